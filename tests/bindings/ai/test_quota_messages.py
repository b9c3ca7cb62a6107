"""Limit messages name the scope in words, not as ember's internal key."""

from __future__ import annotations

import pytest

from ember.bindings.ai.quota import QuotaBook, QuotaLimits
from ember.bindings.ai.tenant import Tenant, describe_scope
from ember.models.pool.errors import CapacityExceeded


def test_scopes_read_as_words() -> None:
    assert describe_scope(Tenant.of_worker("a1", "chat").quota) == "worker chat of account a1"
    assert describe_scope(Tenant.of_account("a1").quota) == "account a1"
    assert describe_scope(Tenant.alone("hello").quota) == "deployment hello"


def test_a_quota_refusal_names_the_worker_and_its_account() -> None:
    book = QuotaBook(QuotaLimits(requests_per_minute=100, concurrent_requests=1))
    scope = Tenant.of_worker("a1", "chat").quota
    book.acquire(scope)
    with pytest.raises(CapacityExceeded) as refused:
        book.acquire(scope)
    assert "worker chat of account a1 already has 1 AI requests in flight" in str(
        refused.value.description
    )
    assert "account:" not in str(refused.value.description)
