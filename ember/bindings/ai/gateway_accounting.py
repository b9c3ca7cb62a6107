"""How the gateway counts each AI call: the operator's metrics (``AITally``, ``ember serve
--metrics-port``) and request log (``on_call``, ``--log-requests``), once per call whether the
gateway answered it, failed it, or a front refused it before ``run``; and the ``Failure`` an
exception becomes. Apart from ``gateway.py``, which runs requests, because none of it decides an
answer.

``GatewayAccounting`` is a mixin of ``AIGateway``.
"""

from __future__ import annotations

import time

from ember.bindings.ai.answer import AIAnswer, AIRequestFailed
from ember.bindings.ai.call_log import AICall, CallObserver, Report, Tokens
from ember.bindings.ai.context_hint import local_context_hint
from ember.bindings.ai.failures import Failure, failure_of
from ember.bindings.ai.tally import UNKNOWN_MODEL, AITally, Outcome
from ember.bindings.ai.tenant import Tenant
from ember.errors import ContextLengthExceeded
from ember.models.pool.pool import ModelPool


class GatewayAccounting:
    """The metrics and the operator's log of one ``AIGateway``."""

    # Set by AIGateway.__init__.
    pool: ModelPool
    tally: AITally
    on_call: CallObserver | None

    def refusal(self, exc: Exception, model: str, tenant: Tenant) -> Failure:
        """The failure a front answers for ``exc``, counted in the metrics and the operator's
        log unless the gateway counted it already (``run`` and ``require_model`` do): a request
        the front refused before ``run`` (its body, its ``options``) is an AI call too."""
        failure = exc.failure if isinstance(exc, AIRequestFailed) else failure_of(exc, model)
        if not getattr(exc, "counted", False):
            self.count_refusal(model, failure.status, failure.code.code, tenant)
        return failure

    def count_refusal(self, model: str, status: int, code: int, tenant: Tenant) -> None:
        """Count a request refused before it reached ``run`` (the platform's per-account rate,
        ``runtime/platform/ai.py``): the operator's metrics and log count every AI call."""
        self._tally(model, status, code, None)
        self._observe(tenant, model, status, code, None)

    def _observe(
        self, tenant: Tenant, model: str, status: int, code: int, started: float | None
    ) -> None:
        if self.on_call is not None:
            took = 0.0 if started is None else (time.monotonic() - started) * 1000
            self.on_call(AICall(tenant, model, status, code, "", None, None, took))

    def _answered(self, tenant: Tenant, model: str, answer: AIAnswer) -> Report:
        # A stream that fails midway keeps its status (its 200 went out, and was counted in the
        # metrics then) and carries the failure's code into the operator's line.
        def report(tokens: Tokens, took: float, code: int) -> None:
            if self.on_call is not None:
                call = AICall(tenant, model, answer.status, code, answer.request_id, *tokens, took)
                self.on_call(call)

        return report

    def _tally(self, model: str, status: int, code: int, started: float | None) -> None:
        label = model if isinstance(model, str) and self.pool.knows(model) else UNKNOWN_MODEL
        seconds = 0.0 if started is None else time.monotonic() - started
        self.tally.record(Outcome(label, status, code), seconds)

    def _failure(self, exc: Exception, model: str) -> Failure:
        if isinstance(exc, AIRequestFailed):
            return exc.failure
        if isinstance(exc, ContextLengthExceeded):
            detail = self.pool.config.settings.operator_detail
            hint = local_context_hint(model, self.pool.status(), detail)
            exc = ContextLengthExceeded(exc.field, f"{exc}{hint}")
        return failure_of(exc, model)
