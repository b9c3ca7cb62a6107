"""``Tenant``: who an AI request is for, in the two senses the gateway needs.

- ``quota``: whose requests-per-minute and in-flight limits it counts against (``ai.limits``:
  per worker for a worker's ``env.AI``, all its versions together; per account for the REST
  API);
- ``data``: whose batches, gateway logs, stored responses and cached answers it sees. On the
  platform a worker's ``env.AI`` and its account's REST API act for one account, so both carry
  the account's data scope (``ember serve``); in ``ember dev`` everything is the project's.

One value for both would make an account's REST batch invisible to its own workers (or merge
every worker's quota into one), so the two are kept apart and built only by the constructors
below: a scope is never spelt by hand at a call site.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.models.pool.fair import Fairness


@dataclass(frozen=True, slots=True)
class Tenant:
    """See the module docstring."""

    quota: str
    data: str
    # The part of each model's running slots the account may hold (platform.accounts /
    # platform.temporary ai_running_share); None: every slot (ember dev, tests).
    running_share: float | None = None
    # Neurons the account may spend per UTC day (platform.temporary ai_neurons_per_day:
    # ``neurons.py``); None: no limit (ember dev, permanent accounts by default).
    daily_neurons: int | None = None

    @classmethod
    def alone(cls, name: str) -> Tenant:
        """A tenant whose quota and data are its own (``ember dev``'s project; tests)."""
        return cls(quota=name, data=name)

    @classmethod
    def of_account(
        cls,
        account_id: str,
        quota: str | None = None,
        running_share: float | None = None,
        daily_neurons: int | None = None,
    ) -> Tenant:
        """A caller acting for ``account_id``: its REST API (quota: the account) or one of its
        deployments (``quota``: the deployment)."""
        data = account_scope(account_id)
        return cls(quota or data, data, running_share, daily_neurons)

    @classmethod
    def of_worker(
        cls,
        account_id: str,
        worker: str,
        running_share: float | None = None,
        daily_neurons: int | None = None,
    ) -> Tenant:
        """A worker's ``env.AI`` on the platform: the account's data, the worker's quota (every
        version of the worker shares it)."""
        quota = f"{account_scope(account_id)}/worker:{worker}"
        return cls.of_account(account_id, quota, running_share, daily_neurons)


def account_scope(account_id: str) -> str:
    return f"account:{account_id}"


def describe_scope(scope: str) -> str:
    """A scope as a limit message names it: ``account abc``, ``worker w of account abc``, or
    the deployment (``ember dev``'s project, a test's) for any other."""
    prefix = account_scope("")
    if not scope.startswith(prefix):
        return f"deployment {scope}"
    account, _, worker = scope[len(prefix) :].partition("/worker:")
    return f"worker {worker} of account {account}" if worker else f"account {account}"


def fairness_of(scope: str, running_share: float | None = None) -> Fairness:
    """Whose share of the model pool a request takes (``ember.models.pool.fair``): the
    tenant's data scope, its account on ``ember serve`` (every worker's ``env.AI``, the REST
    and ``/ai/v1`` calls and its batches together), the deployment in ``ember dev``."""
    return Fairness(scope, describe_scope(scope), running_share)
