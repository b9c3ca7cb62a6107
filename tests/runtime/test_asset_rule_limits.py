"""The limits a version's ``_redirects`` / ``_headers`` texts are held to at upload: their own,
sized from the rule limits, not the 16 KiB of any other metadata field (review14)."""

from __future__ import annotations

import pytest

from ember.bindings.assets.rules import MAX_RULES_FILE_BYTES
from ember.bindings.base import BindingSpec
from ember.runtime.deployments.asset_manifest import parse_config
from ember.runtime.deployments.errors import InvalidUpload
from ember.runtime.deployments.metadata_limits import check_extra


def test_rule_texts_past_16_kib_pass_and_past_their_limit_are_refused_by_name() -> None:
    redirects = "".join(f"/s{i}/{'x' * 900} /t 301\n" for i in range(2000))
    assets = {"jwt": "j", "config": {"_redirects": redirects, "_headers": "/*\n  X: 1\n"}}
    check_extra({"assets": assets})
    assert parse_config(assets["config"])["_redirects"] == redirects
    for key in ("_redirects", "_headers"):
        with pytest.raises(InvalidUpload, match=f"config.{key} must be the text of the {key}"):
            parse_config({key: "#" * (MAX_RULES_FILE_BYTES + 1)})
    # Anything else in metadata.assets still counts against its 16 KiB.
    with pytest.raises(InvalidUpload, match="metadata.assets is"):
        check_extra({"assets": {**assets, "other": "x" * 20_000}})
    with pytest.raises(InvalidUpload, match="metadata.assets is"):
        check_extra({"assets": {"config": {"_redirects": ["x" * 20_000]}}})


def test_private_options_never_travel_to_the_isolate() -> None:
    spec = BindingSpec("assets", "ASSETS", "m:f", {"directory": "/d"}, {"redirects": "x" * 10})
    assert spec.to_wire() == ["assets", "ASSETS", "m:f", {"directory": "/d"}]
    assert BindingSpec.from_wire(spec.to_wire()).private == {}
