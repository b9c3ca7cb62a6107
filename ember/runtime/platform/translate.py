"""A stored worker version -> the runtime ``Deployment`` the supervisor runs.

The control plane stores versions as Cloudflare describes them (modules, ``plain_text`` /
``json`` / ``kv_namespace`` / ``ai`` bindings, secrets); the supervisor runs ``Deployment``
values. This module is the one place that maps the first onto the second:

- the version's modules are written out once (``ControlPlane.materialize``) and become the
  deployment's ``code_dir``; ``python_modules/`` is importable whatever its content type;
- vars and secrets go to ``env``; KV and AI bindings go through the binding registry exactly as
  an ``ember.yaml`` section would, so ``ember dev`` and ``ember serve`` build the same specs;
- KV and AI bindings are tagged with the owning account, and a temporary account's limits;
- the version's own ``limits`` (``cpu_ms``, ``subrequests``: ``deployments/worker_limits.py``)
  replace the runtime's defaults, and the account's CPU cap tightens them;
- its isolates count in the account's pool and, for a temporary account, in all temporary
  accounts' pool, each held to its share of ``platform.max_isolates`` (``isolate_pools``).

The deployment id names account, worker, version and account kind, so a version is one
immutable slot in the supervisor, and claiming an account (new limits) makes new slots.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.bindings.assets.files import ManifestAssets
from ember.bindings.assets.rule_source import CompiledOnce
from ember.bindings.assets.rules import AssetRules, rules_of
from ember.bindings.assets.serving import AssetsPolicy, navigation_prefers_assets
from ember.bindings.assets.spec import CLIENT as ASSETS_CLIENT
from ember.bindings.assets.spec import KIND as ASSETS_KIND
from ember.bindings.base import BindingSpec, OptionValue
from ember.bindings.registry import BindingRegistry
from ember.config import ConfigSection, JSONValue
from ember.runtime.api.serializers import iso
from ember.runtime.assets_front import AssetSite
from ember.runtime.capacity import IsolatePool
from ember.runtime.deployment import Deployment
from ember.runtime.deployments.assets import version_assets
from ember.runtime.deployments.config import AccountLimits
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account, Module, Script, Version
from ember.runtime.deployments.worker_limits import version_limits
from ember.runtime.limits import Limits

PYTHON_TYPES = frozenset({"text/x-python"})


@dataclass(frozen=True)
class VersionSlot:
    """One version of one worker as the supervisor knows it."""

    slot_id: str
    account_id: str
    account_name: str
    temporary: bool
    script_id: str
    script_name: str
    version_id: str
    version_number: int
    deployment: Deployment | None  # None: no worker runs (``unsupported`` says why; or assets only)
    unsupported: str | None = None
    pools: tuple[IsolatePool, ...] = ()  # held to shares of platform.max_isolates
    assets: AssetSite | None = None  # static assets in front of the worker


def slot_id(account: Account, script_name: str, version_id: str) -> str:
    """The supervisor id of a version: changes when the account's kind (and limits) change."""
    return f"{account.id}:{script_name}:{version_id}:{account.kind[0]}"


def slot_prefix(account_id: str, script_name: str | None = None) -> str:
    """What the slot ids of every version of an account (or of one of its workers) start with
    (account ids are hex and worker names have no colon: no other account's or worker's do)."""
    return f"{account_id}:" if script_name is None else f"{account_id}:{script_name}:"


def slot_owner(ident: str) -> tuple[str, str] | None:
    """(account id, worker name) of a slot id; None if ``ident`` is not one. For the slots no
    longer registered (a stopped or drained version) that the log still names."""
    parts = ident.split(":")
    return (parts[0], parts[1]) if len(parts) == 4 and all(parts) else None


def build_slot(
    plane: ControlPlane,
    registry: BindingRegistry,
    account: Account,
    script: Script,
    version: Version,
    base_limits: Limits | None = None,
) -> VersionSlot:
    """The slot for ``version``: its materialized code, env and limits."""
    ident = slot_id(account, script.name, version.id)
    common = dict(
        slot_id=ident,
        account_id=account.id,
        account_name=account.name,
        temporary=account.temporary,
        script_id=script.id,
        script_name=script.name,
        version_id=version.id,
        version_number=version.number,
    )
    if not version.main_module and version_assets(version) is not None:
        # Assets only: no worker runs; every request is answered from the files.
        files = plane.materialize(account.id, version)
        site = _asset_site(plane, account, version, files.root / "assets", has_worker=False)
        return VersionSlot(deployment=None, assets=site, **common)
    modules = plane.scripts.modules(version.id)
    main = next((m for m in modules if m.name == version.main_module), None)
    reason = _unsupported(main)
    if reason is not None:
        return VersionSlot(deployment=None, unsupported=reason, **common)
    files = plane.materialize(account.id, version)
    vars_: dict[str, JSONValue] = {}
    sections: dict[str, Any] = {}
    for binding in version.bindings:
        if binding.type == "plain_text":
            vars_[binding.name] = str(binding.config.get("text", ""))
        elif binding.type == "json":
            vars_[binding.name] = binding.config.get("json")
        elif binding.type == "version_metadata":
            vars_[binding.name] = {
                "id": version.id,
                "tag": version.annotations.get("workers/tag", ""),
                "timestamp": iso(version.created_on),
            }
        elif binding.type == "kv_namespace":
            sections.setdefault("kv_namespaces", []).append(
                {"binding": binding.name, "id": binding.config["namespace_id"]}
            )
        elif binding.type == "ai":
            sections["ai"] = {"binding": binding.name}
    site = _asset_site(plane, account, version, files.root / "assets")
    where = f"worker {script.name} version {version.id}"
    specs = registry.parse([ConfigSection(where, key, value) for key, value in sections.items()])
    limits = plane.config.limits_for(account.temporary)
    specs = tuple(_account_options(spec, account, limits, script.name) for spec in specs)
    specs += _assets_bindings(plane, account, version, files.root / "assets", site)
    secrets = {s.name: s.value for s in plane.scripts.secret_values(version.id)}
    deployment = Deployment(
        id=ident,
        name=script.name,
        code_dir=files.root / "modules",
        main=version.main_module,
        vars=vars_,
        secrets=secrets,
        bindings=specs,
        limits=version_limits(base_limits or Limits(), version.metadata.get("limits"), limits),
        crons=tuple(_crons(script)),
        compatibility_date=version.compatibility_date,
        compatibility_flags=version.compatibility_flags,
        version=version.id,
        assets=site.policy if site else None,
        assets_dir=files.root / "assets" if site else None,
    )
    return VersionSlot(
        deployment=deployment, pools=isolate_pools(account, limits), assets=site, **common
    )


def _asset_site(
    plane: ControlPlane,
    account: Account,
    version: Version,
    directory: Path,
    *,
    has_worker: bool = True,
) -> AssetSite | None:
    """The version's assets in front of its worker (None: it has none)."""
    stored = version_assets(version)
    if stored is None:
        return None
    config = stored.config
    first = config.get("run_worker_first", False)
    worker_rules = (
        tuple(r for r in first if not r.startswith("!")) if isinstance(first, list) else ()
    )
    policy = AssetsPolicy(
        html_handling=config.get("html_handling", "auto-trailing-slash"),
        not_found_handling=config.get("not_found_handling", "none"),
        run_worker_first=first is True,
        worker_rules=worker_rules,
        asset_rules=tuple(r[1:] for r in first if r.startswith("!/")) if worker_rules else (),
        navigation_prefers_assets=navigation_prefers_assets(
            version.compatibility_date, version.compatibility_flags
        ),
        has_worker=has_worker,
    )
    manifest = plane.assets.files.manifest(account.id, stored.manifest_id)
    # The version's _redirects and _headers, as wrangler uploaded their text (checked then):
    # compiled at its first asset request, not here, where a restart loads every version.
    redirects, headers = _text(config.get("_redirects")), _text(config.get("_headers"))

    def compile_rules() -> AssetRules:
        return rules_of(redirects, headers, policy.html_handling)[0]

    lookup = ManifestAssets(manifest, directory).lookup
    return AssetSite(policy, lookup, CompiledOnce(compile_rules, plane.rule_compiles))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _assets_bindings(
    plane: ControlPlane,
    account: Account,
    version: Version,
    directory: Path,
    site: AssetSite | None,
) -> tuple[BindingSpec, ...]:
    """``env.<name>`` of an ``assets`` binding: the version's own files, and its site's rules
    (one source: compiled once per version, never on the serving loop)."""
    stored = version_assets(version)
    if stored is None or site is None:
        return ()
    options: dict[str, OptionValue] = {
        "directory": str(directory),
        "manifest": str(plane.assets.files.manifest_path(account.id, stored.manifest_id)),
        "html_handling": stored.config.get("html_handling", "auto-trailing-slash"),
        "not_found_handling": stored.config.get("not_found_handling", "none"),
    }
    # The compiled rules go to the service only, never in the Init frame.
    private: dict[str, object] = {"rules": site.rules}
    return tuple(
        BindingSpec(ASSETS_KIND, b.name, ASSETS_CLIENT, options, private)
        for b in version.bindings
        if b.type == "assets"
    )


def isolate_pools(account: Account, limits: AccountLimits) -> tuple[IsolatePool, ...]:
    """The pools an account's isolates count in, narrowest first: its own, and temporary
    accounts' together (a share of None: no pool)."""
    pools = []
    if limits.isolate_share is not None:
        key = f"platform.{'temporary' if account.temporary else 'accounts'}.isolate_share"
        own = f"account:{account.id}"
        remedy = limits.remedy("isolate_share")
        pools.append(IsolatePool(own, limits.isolate_share, key, "this account's", remedy))
    if limits.temporary and limits.total_isolate_share is not None:
        pools.append(
            IsolatePool(
                "temporary",
                limits.total_isolate_share,
                "platform.temporary.total_isolate_share",
                "temporary accounts'",
                limits.remedy("total_isolate_share"),
            )
        )
    return tuple(pools)


# All temporary accounts' isolates together share one cpu group around their accounts' (as
# they share ``platform.temporary.total_isolate_share``): anyone can make temporary accounts, and
# ten of them must not weigh ten permanent accounts when the CPU is contended.
TEMPORARY_CPU_GROUP = "temporary-accounts"


def cpu_nest(slot: VersionSlot) -> tuple[str, ...]:
    """The shared cpu cgroups a version's isolates go in (``SandboxSpec.cpu_nest``)."""
    if slot.temporary:
        return (TEMPORARY_CPU_GROUP, slot.account_id)
    return (slot.account_id,)


def _account_options(
    spec: BindingSpec, account: Account, limits: AccountLimits, worker: str
) -> BindingSpec:
    """Tag KV and AI specs with the owning account and its limits (enforced by the services);
    AI specs also with the worker's name, whose ``ai.limits`` every version shares."""
    extra: dict[str, OptionValue] = {}
    if spec.kind == "kv_namespace":
        extra["account"] = account.id
        if limits.max_kv_bytes:
            extra["max_account_bytes"] = limits.max_kv_bytes
            extra["quota_remedy"] = limits.remedy("max_kv_bytes")
            # What all temporary accounts store together is capped too (temporary_total.py).
            extra["kv_pool"] = limits.temporary
        # Operations per UTC day (temporary accounts: Workers KV's Free plan).
        extra.update(limits.kv_allowances().options())
    elif spec.kind == "ai":
        # Every account's: its workers' env.AI shares the account's batches, gateway logs and
        # stored responses with its REST API (bindings/ai/tenant.py).
        extra["account"] = account.id
        extra["worker"] = worker
        if limits.ai_requests_per_minute:
            extra["ai_requests_per_minute"] = limits.ai_requests_per_minute
            extra["ai_rate_remedy"] = limits.remedy("ai_requests_per_minute")
        if limits.ai_running_share is not None:
            # The account's part of each model's running slots (ember.models.pool.fair).
            extra["ai_running_share"] = limits.ai_running_share
        if limits.ai_neurons_per_day is not None:
            # Its neurons per UTC day (ember.bindings.ai.neurons), shared with its REST API.
            extra["ai_neurons_per_day"] = limits.ai_neurons_per_day
    return dataclasses.replace(spec, options={**spec.options, **extra}) if extra else spec


def _unsupported(main: Module | None) -> str | None:
    if main is None:
        return "its main module is missing from the upload"
    if main.content_type in PYTHON_TYPES or main.name.endswith(".py"):
        return None
    return (
        f"its main module {main.name!r} is not Python ({main.content_type}); ember runs Python "
        "Workers only: deploy a Python worker over it (wrangler deploy with main = *.py)"
    )


def _crons(script: Script) -> list[str]:
    schedules = script.settings.get("schedules", [])
    if isinstance(schedules, str):
        schedules = json.loads(schedules)
    return [s["cron"] for s in schedules if isinstance(s, dict) and isinstance(s.get("cron"), str)]
