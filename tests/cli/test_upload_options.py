"""The shared upload flags: parsing, how they apply to a project, and wrangler's bindings table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.cli.bindings_table import binding_rows, print_bindings
from ember.cli.upload_options import (
    OptionError,
    UploadOptions,
    check_compatibility_date,
    parse_vars,
    plan_upload,
    upload_options,
)
from ember.cli.worker_project import load_project

TODAY = "2026-12-05"


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    (tmp_path / "ember.yaml").write_text(
        'name: w\nmain: worker.py\ncompatibility_date: "2026-11-01"\n'
        "compatibility_flags: [python_workers, a_flag]\nvars: {GREETING: hi, N: 1}\n"
    )
    (tmp_path / "worker.py").write_text("x = 1\n")
    return tmp_path


def test_vars_split_at_the_first_colon_and_later_ones_win() -> None:
    assert parse_vars(["A:1", "URL:http://x:8/", "A:2", "EMPTY:"]) == {
        "A": "2",
        "URL": "http://x:8/",
        "EMPTY": "",
    }


@pytest.mark.parametrize("item", ["NOCOLON", ":value", " :v"])
def test_a_var_without_a_key_names_the_flag(item: str) -> None:
    with pytest.raises(OptionError, match="--var: expected KEY:VALUE"):
        parse_vars([item])


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2026-02-30", "YYYY-MM-DD"), ("26-01-01", "YYYY-MM-DD"), ("2026-12-06", "future")],
)
def test_compatibility_dates_must_be_real_and_not_future(value: str, expected: str) -> None:
    with pytest.raises(OptionError, match=f"--compatibility-date: expected .*{expected}"):
        check_compatibility_date(value, TODAY)
    assert check_compatibility_date(TODAY, TODAY) == TODAY


def test_flags_override_the_config(project_dir: Path) -> None:
    (project_dir / "s.json").write_text(json.dumps({"TOKEN": "t", "DROPPED": None}))
    options = UploadOptions(
        vars={"GREETING": "over", "EXTRA": "e"},
        secrets_file=project_dir / "s.json",
        compatibility_date="2026-01-02",
        compatibility_flags=("other",),
        tag="v1",
    )
    plan = plan_upload(load_project(project_dir), options, TODAY)
    assert plan.project.vars == {"GREETING": "over", "N": 1, "EXTRA": "e"}
    assert plan.hidden_vars == {"GREETING", "EXTRA"}
    assert plan.secrets == {"TOKEN": "t"}  # a JSON null is skipped, never a delete
    assert plan.project.compatibility_date == "2026-01-02"
    assert plan.project.compatibility_flags == ("other", "python_workers")
    assert plan.annotations == {"workers/tag": "v1"}
    assert plan.keep_bindings == ["secret_text", "secret_key"]


def test_latest_wins_and_warns_and_keep_vars_comes_from_flag_or_config(
    project_dir: Path,
) -> None:
    warnings: list[str] = []
    options = UploadOptions(latest=True, compatibility_date="2026-01-02", keep_vars=True)
    plan = plan_upload(load_project(project_dir), options, TODAY, warnings.append)
    assert plan.project.compatibility_date == TODAY
    assert warnings and "Using the latest compatibility date" in warnings[0]
    assert plan.keep_bindings == ["plain_text", "json", "secret_text", "secret_key"]
    # Without flags the config's own values stand; keep_vars can come from the config.
    config = project_dir / "ember.yaml"
    config.write_text(config.read_text() + "keep_vars: true\n")
    plain = plan_upload(load_project(project_dir), UploadOptions(), TODAY)
    assert plain.project.compatibility_flags == ("python_workers", "a_flag")
    assert plain.keep_vars and plain.secrets == {} and plain.annotations == {}


def test_the_bindings_table_is_laid_out_as_wranglers() -> None:
    # The layouts of wrangler's deploy tests and of a recorded wrangler 4.164 deploy.
    lines: list[str] = []
    specs = [
        {"name": "SECRET1", "type": "secret_text", "text": "value1"},
        {"name": "SECRET2", "type": "secret_text", "text": "value2"},
    ]
    print_bindings(binding_rows(specs), lines.append)
    assert lines == [
        "Your Worker has access to the following bindings:",
        "Binding                       Resource",
        'env.SECRET1 ("(hidden)")      Environment Variable',
        'env.SECRET2 ("(hidden)")      Environment Variable',
        "",
    ]
    lines.clear()
    specs = [
        {"name": "GREETING", "type": "plain_text", "text": "hello from vars"},
        {"name": "KV", "type": "kv_namespace", "namespace_id": "0f2ac74b498b48028cb68387c421e279"},
        {"name": "AI", "type": "ai"},
        {"name": "ASSETS", "type": "assets"},  # wrangler's printBindings: "Assets", no value
    ]
    print_bindings(binding_rows(specs), lines.append)
    assert lines[1:6] == [
        "Binding                                              Resource",
        "env.KV (0f2ac74b498b48028cb68387c421e279)            KV Namespace",
        "env.AI                                               AI",
        "env.ASSETS                                           Assets",
        'env.GREETING ("hello from vars")                     Environment Variable',
    ]
    lines.clear()
    print_bindings([], lines.append)
    assert lines == ["No bindings found."]


def test_a_secret_name_that_cannot_be_a_binding_names_the_file(project_dir: Path) -> None:
    (project_dir / "s.env").write_text("GOOD=1\nBAD-NAME=2\n")
    options = UploadOptions(secrets_file=project_dir / "s.env")
    with pytest.raises(OptionError, match=r"--secrets-file: expected .*identifier.*BAD-NAME"):
        plan_upload(load_project(project_dir), options, TODAY)


def test_an_outdir_inside_the_module_root_is_warned_about(project_dir: Path) -> None:
    # The entry sits at the project's root here, so dist/ would go up with the next deploy.
    warnings: list[str] = []
    options = UploadOptions(outdir=project_dir / "dist")
    plan_upload(load_project(project_dir), options, TODAY, warnings.append)
    assert any("dist" in w and "next deploy" in w for w in warnings)


def test_array_flags_take_the_values_that_follow_them_as_yargs_does() -> None:
    # wrangler's --var, --compatibility-flags and --triggers are yargs arrays: `--var A:1 B:2`
    # is two vars. The values run to the next option; a later option still parses.
    import click
    from click.testing import CliRunner

    from ember.cli.upload_options import ArrayOption

    seen: dict[str, object] = {}

    @click.command()
    @click.argument("directory", default=".")
    @click.option("--triggers", "--schedule", "triggers", cls=ArrayOption, multiple=True)
    @upload_options
    def command(directory: str, triggers: tuple[str, ...], upload: UploadOptions) -> None:
        seen.update(directory=directory, triggers=triggers, upload=upload)

    result = CliRunner().invoke(
        command,
        ["proj", "--var", "A:1", "B:2", "--compatibility-flags", "f1", "f2", "--keep-vars",
         "--var", "C:3", "--schedule", "*/5 * * * *", "0 1 * * *", "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    upload = seen["upload"]
    assert isinstance(upload, UploadOptions)
    assert dict(upload.vars) == {"A": "1", "B": "2", "C": "3"}
    assert upload.compatibility_flags == ("f1", "f2") and upload.keep_vars and upload.dry_run
    assert seen["triggers"] == ("*/5 * * * *", "0 1 * * *") and seen["directory"] == "proj"
