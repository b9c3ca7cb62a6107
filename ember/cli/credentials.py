"""The CLI's saved credentials: one login and one cached temporary account per platform URL.

A JSON file, mode 0600 in a 0700 directory, written atomically. Its path is ``$EMBER_CREDENTIALS``
when set (tests), else ``$XDG_CONFIG_HOME/ember/credentials.json`` (default ``~/.config``).
Credentials are keyed by platform URL so a token for one platform is never sent to another.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ember.errors import ConfigError

EXACT_BELOW_S = 600.0  # below this, time left is said to the second


@dataclass(frozen=True)
class Login:
    token: str
    account_id: str
    account_name: str


@dataclass(frozen=True)
class TemporaryLogin:
    token: str
    account_id: str
    account_name: str
    expires_at: float
    claim_url: str
    claim_expires_at: float
    # False where the platform turned claims off (platform.temporary.claim: off), so nothing
    # printed promises a claim; entries saved before the field were claimable.
    claimable: bool = True

    def valid(self, now: float | None = None) -> bool:
        moment = time.time() if now is None else now
        return min(self.expires_at, self.claim_expires_at) > moment

    def expires_in(self, now: float | None = None) -> str:
        """How long until the platform deletes the account unless it is claimed: "60 minutes"."""
        moment = time.time() if now is None else now
        return distance(min(self.expires_at, self.claim_expires_at) - moment)


CLAIMS_OFF = "claiming is turned off on this platform"


def distance(seconds: float) -> str:
    """How long is left, never more than is left: under 10 minutes exactly to the second
    ("2m08s": rounding said "3 minutes" for 2m38s, a third more than was left), from there
    date-fns ``formatDistanceToNowStrict`` as wrangler words it, one unit, rounded (3599.5 s ->
    "60 minutes"; there a rounding is under a tenth of the time left)."""
    seconds = max(seconds, 0.0)
    if seconds < EXACT_BELOW_S:
        whole = int(seconds)
        if whole < 60:
            return f"{whole} second{'' if whole == 1 else 's'}"
        return f"{whole // 60}m{whole % 60:02d}s"
    units = (("minute", 60, 3600), ("hour", 3600, 86400))
    unit, size = next(((u, s) for u, s, limit in units if seconds < limit), ("day", 86400))
    value = round(seconds / size)
    return f"{value} {unit}{'' if value == 1 else 's'}"


def credentials_path() -> Path:
    explicit = os.environ.get("EMBER_CREDENTIALS")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ember" / "credentials.json"


class CredentialStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or credentials_path()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"logins": {}, "temporary": {}}
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                str(self.path),
                None,
                "unreadable",
                "ember's credentials JSON",
                hint=f"{exc}; delete the file and log in again",
            ) from exc
        data.setdefault("logins", {})
        data.setdefault("temporary", {})
        return data

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, staging = tempfile.mkstemp(prefix=".credentials-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staging, self.path)
        except BaseException:
            Path(staging).unlink(missing_ok=True)
            raise

    def login(self, platform: str) -> Login | None:
        entry = self._load()["logins"].get(platform)
        return Login(**entry) if entry else None

    def temporary(self, platform: str) -> TemporaryLogin | None:
        entry = self._load()["temporary"].get(platform)
        return TemporaryLogin(**entry) if entry else None

    def save_login(self, platform: str, login: Login) -> None:
        data = self._load()
        data["logins"][platform] = asdict(login)
        self._save(data)

    def save_temporary(self, platform: str, login: TemporaryLogin) -> None:
        data = self._load()
        data["temporary"][platform] = asdict(login)
        self._save(data)

    def forget(self, platform: str, *, login: bool = True, temporary: bool = True) -> list[str]:
        """Remove what is saved for a platform; returns what was removed."""
        data = self._load()
        removed = []
        if login and data["logins"].pop(platform, None):
            removed.append("login")
        if temporary and data["temporary"].pop(platform, None):
            removed.append("temporary account")
        if removed:
            self._save(data)
        return removed
