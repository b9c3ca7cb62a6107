"""Why a launched replica is FAILED, and when it may be started again.

A replica that never became ready ``MAX_FAILED_STARTS`` times in a row (``supervision.py``) keeps a
``StartFailure``: requests fail at once with its description (the 3043 error: what happened,
the server's own error line, the config key to check: the checkpoint's when the error is about
it, else ``args``) instead of launching it again, until ``retry_delay`` has passed; each failed
round doubles that delay, so a broken configuration never turns into a restart loop.
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
    """Why a FAILED replica could not start, for the error its requests get."""

    reason: str  # "exited with code 2 while loading"
    error_line: str | None  # the server's own last error line
    attempts: int  # failed starts in a row
    retry_in_s: float  # how long until a request may start it again

    def describe_briefly(self, replica: str) -> str:
        """The 3043 detail for a tenant of ``ember serve``: what happened, not how the replica
        runs (its command, config file and error line stay in the operator's log)."""
        return (
            f"{replica} failed to start {self.attempts} times in a row and is tried again in "
            f"{self.retry_in_s:g} s; the platform's operator has the details in its log"
        )

    def describe(self, replica: str, config: ReplicaConfig) -> str:
        """The detail of the 3043 error: what happened, how often, and which key to check."""
        text = f"{replica} {self.reason}"
        if self.error_line:
            text += f": {json.dumps(self.error_line, ensure_ascii=False)}"
        text += (
            f"; it failed to start {self.attempts} times in a row and is tried again in "
            f"{self.retry_in_s:g} s"
        )
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
