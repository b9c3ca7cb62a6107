"""Control-plane leaves of ember's exception tree, each carrying its Cloudflare code and status.

The control plane speaks ``client/v4``, so its errors know the code a Cloudflare client expects:
wrangler branches on 10007/10090 (worker missing), 10000 (auth), 10220 (secrets changed on
rollback) and 10009 (KV key missing); anything else is printed as ``message [code: N]``. Codes
marked "ember" are ours where Cloudflare's own is not documented.

    NotFound ── ScriptNotFound (10007) · VersionNotFound (10007) · NamespaceNotFound (10013)
                KeyNotFound (10009) · SecretNotFound (10056) · TailNotFound (10007)
    AuthError ── Unauthenticated (401, 10000) · Forbidden (403, 10000) · ClaimRejected (403, 10000)
                 ── ClaimsTurnedOff (403, ember 1035)
    UserError ── InvalidRequest (10001) · InvalidUpload (10021) ── UnsupportedBinding (10021)
                 VarTooLarge (10054) · TooManyVars (10055) (InvalidUpload's too)
                 SecretsChanged (10220) · NamespaceTitleTaken (10014)
                 ProofOfWorkRejected (400, ember 1033) · TemporaryAccountsRefused (403, ember 1034)
    LimitExceeded ── BodyTooLarge (413, 10001) ── UploadTooLarge (413, 10027)
                     QuotaExceeded (403, 10037) · RateLimited (429, 971)
                     DailyAllowanceSpent (429, 10048)
                     NotStartedNow (503, ember 1037)
"""

from __future__ import annotations

from ember.errors import AuthError, LimitExceeded, NotFound, UserError


class ControlPlaneError:
    """Mixin: the HTTP status and Cloudflare error code this error is answered with."""

    http_status: int = 400
    cf_code: int = 10001


class ScriptNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10007

    def __init__(self, name: str) -> None:
        super().__init__(f"This Worker does not exist on your account: {name!r}")


class ScriptExists(ControlPlaneError, UserError):
    """A create-only upload (``If-None-Match: *``) for a Worker that exists: HTTP's answer to
    a precondition that failed, so a draft never replaces a Worker made meanwhile."""

    http_status, cf_code = 412, 10001

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Worker {name!r} already exists; this upload only creates one (If-None-Match: *)"
        )


class VersionNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10007

    def __init__(self, version_id: str, script: str, kept: int | None = None) -> None:
        # Why a version once listed may be gone, when the caller knows the window.
        self.note = retention_note(kept) if kept else ""
        found = f"Version {version_id!r} does not exist for Worker {script!r}"
        super().__init__(found + (f" ({self.note})" if self.note else ""))


def retention_note(kept: int) -> str:
    return (
        f"a Worker keeps its {kept} most recent versions and those of its live deployment; "
        "older ones are deleted"
    )


class NamespaceNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10013

    def __init__(self, namespace_id: str) -> None:
        super().__init__(f"KV namespace {namespace_id!r} does not exist on this account")


class KeyNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10009

    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key!r}")


class SecretNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10056

    def __init__(self, name: str, script: str) -> None:
        super().__init__(f"Worker {script!r} has no secret named {name!r}")


class TailNotFound(ControlPlaneError, NotFound):
    http_status, cf_code = 404, 10007

    def __init__(self, tail_id: str) -> None:
        super().__init__(f"tail {tail_id!r} does not exist")


class Unauthenticated(ControlPlaneError, AuthError):
    """No token, an unknown or revoked one, or one of an expired temporary account."""

    http_status, cf_code = 401, 10000


# What a token of an unknown, revoked or gone (expired, being deleted) account is answered.
TOKEN_NOT_VALID = (
    "Authentication error: the API token is not valid on this platform (unknown or revoked)"
)


class Forbidden(ControlPlaneError, AuthError):
    """A valid token used on another account's path. The message never names that account."""

    http_status, cf_code = 403, 10000

    def __init__(self) -> None:
        super().__init__("Authentication error: this API token is not allowed to use that account")


class ClaimRejected(ControlPlaneError, AuthError):
    http_status, cf_code = 403, 10000


class ClaimsTurnedOff(ClaimRejected):
    """The operator set ``platform.temporary.claim: off``: no temporary account is claimed."""

    cf_code = 1035

    def __init__(self) -> None:
        super().__init__(
            "claiming temporary accounts is turned off on this platform (its operator set "
            "platform.temporary.claim: off): a temporary account and its workers are deleted "
            "at its expiry. Ask the platform's operator for an account to keep your workers."
        )


class InvalidRequest(ControlPlaneError, UserError):
    http_status, cf_code = 400, 10001


class InvalidUpload(ControlPlaneError, UserError):
    """The worker upload is malformed: multipart, metadata, module names, main module."""

    http_status, cf_code = 400, 10021


class UnsupportedBinding(InvalidUpload):
    pass


class VarTooLarge(InvalidUpload):
    """A var (``plain_text``, ``json``) or secret past 5 KiB: Cloudflare's 10054 ("An
    environment variable or secret exceeds the size limit"). Names it, never its value."""

    cf_code = 10054


class TooManyVars(InvalidUpload):
    """More vars and secrets on one Worker than its tier allows: Cloudflare's 10055 ("The
    number of environment variables or secrets exceeds the limit/Worker")."""

    cf_code = 10055


class LimitAboveTier(InvalidUpload):
    """``metadata.limits`` asks for more than the account's tier allows: Cloudflare's 400 and
    code for a CPU limit the plan cannot set ("CPU limits are not supported for the Free
    plan", 100328), with the key and the maximum named."""

    http_status, cf_code = 400, 100328


class SecretsChanged(ControlPlaneError, UserError):
    http_status, cf_code = 400, 10220

    def __init__(self, version_id: str) -> None:
        super().__init__(
            f"The secrets of version {version_id} differ from the secrets of the version that is "
            "live now; deploying it would change them. Retry with ?force=true to deploy anyway."
        )


class NamespaceTitleTaken(ControlPlaneError, UserError):
    http_status, cf_code = 400, 10014

    def __init__(self, title: str) -> None:
        super().__init__(f"a namespace with this account ID and title already exists: {title!r}")


class ProofOfWorkRejected(ControlPlaneError, UserError):
    http_status, cf_code = 400, 1033


class TemporaryAccountsRefused(ControlPlaneError, UserError):
    """The operator's platform does not take anonymous deployments (e.g. sandbox too weak)."""

    http_status, cf_code = 403, 1034


class BodyTooLarge(ControlPlaneError, LimitExceeded):
    """A request body over what its endpoint reads (``context.read_body``). Routes with a
    better word for it (a Worker upload, the claim form) answer in their own terms."""

    http_status, cf_code = 413, 10001

    def __init__(self, observed: int, maximum: int, message: str | None = None) -> None:
        super().__init__(
            "request_body",
            observed,
            maximum,
            message
            or f"The request body is {observed:,} bytes; this endpoint reads at most "
            f"{maximum:,} bytes.",
        )


class UploadTooLarge(BodyTooLarge):
    http_status, cf_code = 413, 10027

    def __init__(self, observed: int, maximum: int, temporary: bool) -> None:
        scope = "temporary accounts" if temporary else "this platform"
        super().__init__(
            observed,
            maximum,
            f"The Worker upload is {observed:,} bytes; the limit for {scope} is {maximum:,} "
            "bytes. Remove unused modules or static files and try again.",
        )


class QuotaExceeded(ControlPlaneError, LimitExceeded):
    http_status, cf_code = 403, 10037


class NotStartedNow(ControlPlaneError, LimitExceeded):
    """A new version could not be started to check that its module loads (the account's share
    of the isolates, or all of them, busy): nothing was stored or made live, and the same
    upload can succeed later. Cloudflare documents no code for it; 1037 is ember's."""

    http_status, cf_code = 503, 1037


class RateLimited(ControlPlaneError, LimitExceeded):
    """``retry_after``: seconds until a retry can succeed, sent as ``Retry-After`` when known."""

    http_status, cf_code = 429, 971

    def __init__(
        self,
        limit: str,
        observed: object,
        maximum: object,
        message: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(limit, observed, maximum, message)
        self.retry_after = retry_after


class DailyAllowanceSpent(ControlPlaneError, LimitExceeded):
    """An account spent today's allowance of an operation (KV's on the Free plan: 10048, the
    code Cloudflare answers with; the allowance is whole again at 00:00 UTC)."""

    http_status, cf_code = 429, 10048
