"""Why a launched replica's start failed, and when it is tried again.

A start that fails while the replica has no successful start since (its first load, or the
restart after a crash) is kept as a ``StartFailure`` right away: while the replica retries
(attempt k of ``MAX_FAILED_STARTS``, ``supervision.py``) the failure is ``retrying``, and a model
with no ready replica fails its queued and new requests at once with it (the 3043 error: what
happened, the server's own error line, attempt k of n and when the next one starts, the config
key to check: the checkpoint's when the error is about it, else ``args``), as SGLang's and
vLLM's routers answer a request with no healthy worker, rather than keeping them through every
attempt and its backoff. After ``MAX_FAILED_STARTS`` in a row the replica is FAILED: requests
get the failure without a new launch until ``retry_delay`` has passed; each failed round
doubles that delay, so a broken configuration never turns into a restart loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ember.models.pool.config import ReplicaConfig

# What a server's error line says when its checkpoint is at fault (a missing directory, a
# missing config.json or weights): the key to check is then where the checkpoint is set, however
# many args the replica has.
CHECKPOINT_SIGNS = ("config.json", "checkpoint", "safetensors", "failed to load")
FAILED_RETRY_CAP_S = 600.0  # a FAILED replica is tried again at most this often, at the latest


def retry_delay(max_restart_backoff_s: float, failed_rounds: int) -> float:
    """The wait before a FAILED replica's next start: the restart backoff's cap, doubled for
    each round that failed since it was last ready, up to ``FAILED_RETRY_CAP_S``."""
    cap = max(FAILED_RETRY_CAP_S, max_restart_backoff_s)
    rounds = max(failed_rounds, 1)
    return float(min(max_restart_backoff_s * 2 ** (rounds - 1), cap))


@dataclass(frozen=True, slots=True)
class StartFailure:
    """Why a replica's latest start failed (retrying, or FAILED), for the error its requests get."""

    reason: str  # "exited with code 2 while loading"
    error_line: str | None  # the server's own last error line
    attempts: int  # failed starts in a row
    retry_in_s: float  # FAILED: until a request may start it again; retrying: until the next
    # Retrying: the attempt of how many in this round (``MAX_FAILED_STARTS``); None once FAILED.
    of: int | None = None
    at: float = 0.0  # when it failed (time.monotonic()): a retry's wait is told as what is left

    @property
    def retrying(self) -> bool:
        """The replica is still in its round of starts (backoff, or the next start running)."""
        return self.of is not None

    def _when(self, now: float | None) -> str:
        """When the next start is ("in 60 s"): what is left of ``retry_in_s`` while retrying."""
        if not self.retrying or now is None:
            return f"in {self.retry_in_s:g} s"
        left = round(self.at + self.retry_in_s - now, 1)
        return f"in {left:g} s" if left > 0 else "now"

    def describe_briefly(self, replica: str, now: float | None = None) -> str:
        """The 3043 detail for a tenant of ``ember serve``: what happened, not how the replica
        runs (its command, config file and error line stay in the operator's log)."""
        if self.retrying:
            what = f"failed to start (attempt {self.attempts} of {self.of}) and is retried"
        else:
            what = f"failed to start {self.attempts} times in a row and is tried again"
        where = "the platform's operator has the details in its log"
        return f"{replica} {what} {self._when(now)}; {where}"

    def describe(self, replica: str, config: ReplicaConfig, now: float | None = None) -> str:
        """The detail of the 3043 error: what happened, how often, and which key to check."""
        text = f"{replica} {self.reason}"
        if self.error_line:
            text += f": {json.dumps(self.error_line, ensure_ascii=False)}"
        if self.retrying:
            text += f"; start attempt {self.attempts} of {self.of} failed and is retried"
        else:
            text += f"; it failed to start {self.attempts} times in a row and is tried again"
        text += f" {self._when(now)}"
        file = config.file or "ember.yaml"
        if not config.key:
            return text
        line = (self.error_line or "").lower()
        if any(sign in line for sign in CHECKPOINT_SIGNS):
            where = (
                "model_path" if config.backend == "sglang" and config.model_path else "checkpoint"
            )
            text += f"; check {config.key}.{where} in {file}"
        elif config.args:
            text += f"; check {config.key}.args in {file} (now {json.dumps(list(config.args))})"
        else:
            text += f"; check {config.key} in {file}"
        return text
