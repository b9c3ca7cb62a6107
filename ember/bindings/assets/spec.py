"""The assets binding type: ``assets = {binding = "ASSETS", ...}`` -> ``env.ASSETS``.

The ``assets`` key is read by ``ember.config_assets`` (it configures serving as well as the
binding); ``spec_of`` turns a parsed config into the binding's spec, whose options carry what
the service needs to answer ``env.ASSETS.fetch`` as the assets in front of the worker answer.
"""

from __future__ import annotations

from ember.bindings.assets.serving import AssetsPolicy, navigation_prefers_assets
from ember.bindings.base import BindingSpec, BindingType, OptionValue
from ember.config import ConfigSection
from ember.config_assets import AssetsConfig, assets_value

KIND = "assets"
CLIENT = "ember.bindings.assets.client:AssetsBinding"
SERVICE = "ember.bindings.assets.service:AssetsService"


def policy_of(
    assets: AssetsConfig,
    *,
    has_worker: bool,
    compatibility_date: str | None,
    compatibility_flags: tuple[str, ...],
) -> AssetsPolicy:
    """How ``assets`` answer requests in front of the worker (or alone, without one)."""
    return AssetsPolicy(
        html_handling=assets.html_handling,
        not_found_handling=assets.not_found_handling,
        run_worker_first=assets.run_worker_first,
        worker_rules=assets.worker_rules,
        asset_rules=assets.asset_rules,
        navigation_prefers_assets=navigation_prefers_assets(
            compatibility_date, compatibility_flags
        ),
        has_worker=has_worker,
    )


def spec_of(assets: AssetsConfig, directory: str | None = None) -> BindingSpec | None:
    """``env.<binding>`` for ``assets`` (None without ``binding``); ``directory``: where the
    files are (a deployed version's own copy), else the project's directory."""
    if assets.binding is None:
        return None
    options: dict[str, OptionValue] = {
        "directory": directory or str(assets.directory),
        "html_handling": assets.html_handling,
        "not_found_handling": assets.not_found_handling,
    }
    return BindingSpec(kind=KIND, name=assets.binding, client=CLIENT, options=options)


def _parse(section: ConfigSection) -> tuple[BindingSpec, ...]:
    # Reached only where a caller hands the registry the raw section; ember.config parses it.
    from pathlib import Path

    spec = spec_of(assets_value(section.value, section.file, Path(section.file).parent))
    return (spec,) if spec else ()


BINDING_TYPE = BindingType(
    kind=KIND,
    config_key="assets",
    parse=_parse,
    service=SERVICE,
    description="Workers Static Assets (files served from the assets directory)",
)
