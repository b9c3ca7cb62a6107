"""The limits a version's ``_redirects`` / ``_headers`` texts are held to at upload: their own,
sized from the rule limits, not the 16 KiB of any other metadata field (review14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from ember.bindings.assets.rule_files import MAX_EXAMPLES, parse_redirects
from ember.bindings.assets.rule_source import FixedRules
from ember.bindings.assets.rules import (
    MAX_RULES_FILE_BYTES,
    MAX_RULES_FILE_LINES,
    directory_rules,
    rules_of,
)
from ember.bindings.assets.service import AssetsService
from ember.bindings.base import BindingSpec, ServiceHost
from ember.cli.assets_upload import asset_config
from ember.config_assets import AssetsConfig
from ember.errors import UserError
from ember.runtime.deployments.asset_manifest import parse_config
from ember.runtime.deployments.errors import InvalidUpload
from ember.runtime.deployments.metadata_limits import check_extra


def test_rule_texts_past_16_kib_pass_and_past_their_limit_are_refused_by_name() -> None:
    redirects = "".join(f"/s{i}/{'x' * 400} /t 301\n" for i in range(2000))
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


def test_a_rule_file_past_its_lines_or_bytes_is_refused_at_deploy_by_name() -> None:
    # review17: 4 MiB of junk lines cost seconds of parsing on the serving loop; the platform's
    # own limits (2,100 redirect lines, 100 header rules) keep any valid file far below these.
    assert MAX_RULES_FILE_BYTES == 1024 * 1024 and MAX_RULES_FILE_LINES == 10_000
    parse_config({"_headers": "#\n" * MAX_RULES_FILE_LINES})
    parse_config({"_headers": "#\n" * (MAX_RULES_FILE_LINES - 1) + "#"})
    with pytest.raises(InvalidUpload, match="_headers.*at most 10,000 lines"):
        parse_config({"_headers": "#\n" * MAX_RULES_FILE_LINES + "#"})
    with pytest.raises(InvalidUpload, match="_redirects.*1,048,576 bytes"):
        parse_config({"_redirects": "#" * (MAX_RULES_FILE_BYTES + 1)})
    # ember dev (which reads the files itself) ignores such a file, with one warning.
    rules, notes = rules_of("/a /b 301\n" * (MAX_RULES_FILE_LINES + 1), None, "none")
    assert rules.redirect("/a") is None
    assert len(notes) == 1 and "_redirects" in notes[0] and "10,000 lines" in notes[0]


def test_skipped_lines_are_counted_and_only_a_few_kept() -> None:
    parsed = parse_redirects("a\n" * 5000)
    assert (len(parsed.invalid), parsed.skipped) == (MAX_EXAMPLES, 5000)
    _, notes = rules_of("a\n" * 5000, "nothing\n" * 3000, "none")
    assert len(notes) == 2 * (MAX_EXAMPLES + 1)
    assert notes[MAX_EXAMPLES] == "_redirects: ... and 4980 more lines skipped"
    assert notes[-1] == "_headers: ... and 2980 more lines skipped"


def test_the_assets_binding_reuses_the_rules_compiled_for_its_version(tmp_path: Path) -> None:
    # review17: the service parsed the version's texts again, on the serving loop.
    (tmp_path / "manifest.json").write_text(json.dumps({}))
    rules, _ = rules_of("/a /b 301\n", None, "auto-trailing-slash")
    options = {"directory": str(tmp_path), "manifest": str(tmp_path / "manifest.json")}
    source = FixedRules(rules)
    spec = BindingSpec("assets", "ASSETS", "m:f", options, {"rules": source})
    service = AssetsService(spec, cast(ServiceHost, None))
    assert service.rules is source


def test_a_rule_file_is_held_to_its_bytes_on_disk_not_to_their_replacements(
    tmp_path: Path,
) -> None:
    # A byte that is not UTF-8 is read as U+FFFD, three bytes in UTF-8: a file of them just
    # under 1 MiB was counted as ~3 MiB, ignored by ember dev and refused at deploy.
    line = b"#" + b"\xff" * 198 + b"\n"  # 200 bytes, a comment
    count = MAX_RULES_FILE_BYTES // len(line) - 1
    body = line * count + b"/a /b 301\n"
    (tmp_path / "_redirects").write_bytes(body)
    assert len(body) <= MAX_RULES_FILE_BYTES < len(body.decode("utf-8", "replace").encode())
    rules, notes = directory_rules(tmp_path, "none")
    assert notes == [] and rules.redirect("/a") is not None
    # Sent as the text it reads as (wrangler's, ember deploy's), the platform takes it.
    config = asset_config(AssetsConfig(directory=tmp_path))
    assert parse_config(config)["_redirects"] == config["_redirects"]
    # One byte past the limit on disk, whatever the bytes: ignored, and refused before upload.
    for filler in (b"\xff", b"\xe2\x82", "\N{REPLACEMENT CHARACTER}".encode()):
        over = (body + filler * MAX_RULES_FILE_BYTES)[: MAX_RULES_FILE_BYTES + 1]
        (tmp_path / "_redirects").write_bytes(over)
        rules, notes = directory_rules(tmp_path, "none")
        assert rules.redirect("/a") is None
        assert notes == [f"_redirects: must be at most {MAX_RULES_FILE_BYTES:,} bytes "
                         "(ember's limit): all of it ignored"]  # fmt: skip
        with pytest.raises(UserError, match="_redirects.*at most 1,048,576 bytes"):
            asset_config(AssetsConfig(directory=tmp_path))
