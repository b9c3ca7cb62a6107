"""One config, one meaning: ``ember deploy`` reads a project as ``ember dev`` does.

Both readers run over the corpus of ``config_corpus`` (valid and invalid documents, in every
format, with and without environments):

- what dev refuses, deploy refuses with the same ``ConfigError`` (file, key, found, expected);
- what dev accepts, deploy accepts, unless a deploy-only rule (``DEPLOY_ONLY``) refuses it;
- what deploy uploads (name, main, compatibility date and flags, vars, KV and AI bindings,
  crons, and the modules, by name and content) is what dev runs, up to the deploy-only
  additions named in ``_uploaded``: dev runs the worker from the modules a deploy uploads;
- both show the same config warnings.

``.dev.vars`` (and ``.env``) are ``ember dev``'s secrets only: a deploy neither reads nor
uploads them, so the rules that involve them are dev-only (the tests at the end).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ember.cli.assets_upload import asset_config
from ember.cli.upload_body import binding_specs, kv_spec
from ember.cli.upload_options import UploadOptions, plan_upload
from ember.cli.worker_project import WorkerProject, load_project
from ember.config_assets import AssetsConfig
from ember.errors import ConfigError
from ember.runtime.devserver import DevOptions, DevServer
from ember.runtime.events import ListSink
from tests.cli.config_corpus import ENV, Sample, samples

SAMPLES = list(samples())
PROVISIONED = "<provisioned by the deploy>"
TODAY = "2026-12-01"

# wrangler's deploy asserts a name ("You need to provide a name when publishing a worker.
# Either pass it as a cli arg with `--name <name>` or in your config file as `name = "<name>"`",
# workers-sdk packages/wrangler/src/deploy/index.ts); its dev runs a nameless worker, as
# ember dev does under the directory's name. Rule -> the error, given the config file's path.
DEPLOY_ONLY: dict[str, tuple[str | None, object, str]] = {
    "a deploy needs a name": ("name", None, "the Worker's name (or pass --name)"),
}


def _fields(exc: ConfigError) -> tuple[str, str | None, str, str, str]:
    return (exc.file, exc.key, repr(exc.found), exc.expected, str(exc))


def _dev(root: Path, env: str | None) -> DevServer:
    return DevServer(DevOptions(project=root, env=env), ListSink())


def _read(
    sample: Sample, root: Path
) -> tuple[DevServer | ConfigError, WorkerProject | ConfigError]:
    dev: DevServer | ConfigError
    deploy: WorkerProject | ConfigError
    try:
        dev = _dev(root, sample.env)
    except ConfigError as exc:
        dev = exc
    try:
        deploy = load_project(root, None, sample.env)
    except ConfigError as exc:
        deploy = exc
    return dev, deploy


def _uploaded(project: WorkerProject) -> dict[str, Any]:
    """What a deploy of ``project`` sends, in dev's terms. Deploy-only additions: the
    ``python_workers`` flag (every upload is a Python Worker); a KV binding without an id gets
    a namespace provisioned by the deploy (dev names its local namespace after the binding)."""
    plan = plan_upload(project, UploadOptions(), TODAY)
    specs = binding_specs(plan, lambda kv: kv_spec(kv.binding, kv.id or PROVISIONED))
    flags = list(plan.project.compatibility_flags)
    assert flags[-1:] == ["python_workers"] or "python_workers" in flags[:-1]
    return {
        "name": plan.project.name,
        "main": plan.project.modules()[0].name,
        "modules": {m.name: m.data for m in plan.project.modules()},
        "compatibility_date": plan.project.compatibility_date,
        "compatibility_flags": flags,
        "vars": {
            s["name"]: s["text"] if s["type"] == "plain_text" else s["json"]
            for s in specs
            if s["type"] in ("plain_text", "json")
        },
        "kv": [(s["name"], s["namespace_id"]) for s in specs if s["type"] == "kv_namespace"],
        "ai": [s["name"] for s in specs if s["type"] == "ai"],
        "crons": plan.project.crons or (),
        "assets": _assets_uploaded(plan.project.assets, specs),
    }


def _assets_uploaded(assets: AssetsConfig | None, specs: list[dict[str, Any]]) -> object:
    """The directory uploaded, metadata.assets.config and the assets binding's name."""
    if assets is None:
        return None
    config = asset_config(assets)
    binding = [s["name"] for s in specs if s["type"] == "assets"]
    return (assets.directory, config, binding)


def _assets_run(deployment: Any) -> object:
    """The same, from what ``ember dev`` serves."""
    policy = deployment.assets
    if policy is None:
        return None
    first: object = policy.run_worker_first
    if policy.worker_rules:
        first = [*policy.worker_rules, *("!" + rule for rule in policy.asset_rules)]
    config = {
        "html_handling": policy.html_handling,
        "not_found_handling": policy.not_found_handling,
        "run_worker_first": first,
    }
    binding = [s.name for s in deployment.bindings if s.kind == "assets"]
    return (deployment.assets_dir, config, binding)


def _run(dev: DevServer) -> dict[str, Any]:
    """What ``ember dev`` runs, with the deploy-only additions of ``_uploaded`` applied."""
    deployment = dev.deployment
    flags = list(deployment.compatibility_flags)
    if "python_workers" not in flags:
        flags.append("python_workers")
    kv = []
    for spec in deployment.bindings:
        if spec.kind == "kv_namespace":
            namespace = str(spec.options["namespace_id"])
            kv.append((spec.name, namespace))
    return {
        "name": deployment.name,
        "main": deployment.main,
        "modules": _staged(deployment.code_dir),
        "compatibility_date": deployment.compatibility_date,
        "compatibility_flags": flags,
        "vars": dict(deployment.vars),
        "kv": kv,
        "ai": [s.name for s in deployment.bindings if s.kind == "ai"],
        "crons": deployment.crons,
        "assets": _assets_run(deployment),
    }


def _staged(code_dir: Path) -> dict[str, bytes]:
    """Every file dev's worker can read from its code directory, by module name."""
    return {
        path.relative_to(code_dir).as_posix(): path.read_bytes()
        for path in sorted(code_dir.rglob("*"))
        if path.is_file()
    }


def _provisioned_as_dev_names_them(uploaded: dict[str, Any]) -> dict[str, Any]:
    """A provisioned namespace compared as dev's local one, named after its binding."""
    kv = [(name, name if ns == PROVISIONED else ns) for name, ns in uploaded["kv"]]
    return {**uploaded, "kv": kv}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_deploy_reads_the_config_as_dev_does(tmp_path: Path, sample: Sample) -> None:
    root = sample.write(tmp_path)
    dev, deploy = _read(sample, root)
    if isinstance(dev, ConfigError):
        assert isinstance(deploy, ConfigError), f"dev refuses ({dev}); deploy accepts"
        assert _fields(deploy) == _fields(dev)
        return
    if isinstance(deploy, ConfigError):
        expected = [
            rule
            for rule, (key, found, what) in DEPLOY_ONLY.items()
            if (deploy.file, deploy.key, deploy.found, deploy.expected)
            == (str(root / sample.format), key, found, what)
        ]
        assert expected, f"dev accepts; deploy refuses with no deploy-only rule: {deploy}"
        return
    assert _provisioned_as_dev_names_them(_uploaded(deploy)) == _run(dev)
    assert list(deploy.warnings) == dev.warnings


def test_the_corpus_covers_both_outcomes_in_every_format_and_placement(tmp_path: Path) -> None:
    """The corpus is not vacuous: each format and placement has accepted and refused samples."""
    seen: set[tuple[str, str, bool]] = set()
    for index, sample in enumerate(SAMPLES):
        if sample.case.id not in ("base", "date-bad"):
            continue
        dev, _ = _read(sample, sample.write(tmp_path / str(index)))
        seen.add((sample.format, sample.placement, isinstance(dev, ConfigError)))
    formats = {s.format for s in SAMPLES}
    placements = {s.placement for s in SAMPLES}
    assert seen == {(f, p, r) for f in formats for p in placements for r in (True, False)}


def test_name_override_satisfies_the_deploy_only_rule(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text("async def on_fetch(request, env): ...\n")
    (root / "wrangler.toml").write_text('main = "src/entry.py"\n')
    with pytest.raises(ConfigError, match="pass --name"):
        load_project(root)
    assert load_project(root, "given").name == "given"
    assert _dev(root, None).deployment.name == "shop"  # dev: the directory's name


def _project_with_dev_vars(tmp_path: Path, dev_vars: str, env: str | None = None) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text("async def on_fetch(request, env): ...\n")
    (root / "wrangler.toml").write_text(
        'name = "shop"\nmain = "src/entry.py"\nkv_namespaces = [{binding = "CACHE"}]\n'
        'vars = {TOKEN = "public"}\n'
        f'[env.{ENV}]\nkv_namespaces = [{{binding = "CACHE"}}]\nvars = {{TOKEN = "public"}}\n'
    )
    (root / (f".dev.vars.{env}" if env else ".dev.vars")).write_text(dev_vars)
    return root


@pytest.mark.parametrize("env", [None, ENV])
def test_a_dev_vars_secret_hides_a_var_in_dev_only(tmp_path: Path, env: str | None) -> None:
    root = _project_with_dev_vars(tmp_path, "TOKEN=secret\n", env)
    assert "TOKEN" not in _dev(root, env).deployment.vars
    project = load_project(root, None, env)
    assert project.vars == {"TOKEN": "public"}
    assert _uploaded(project)["vars"] == {"TOKEN": "public"}


@pytest.mark.parametrize(
    ("dev_vars", "found"),
    [
        ("CACHE=x\n", "CACHE"),  # a secret named like a binding: dev refuses it
        ("not a line\n", "<not shown>"),  # a malformed secrets file: dev refuses it
    ],
)
def test_dev_vars_cannot_fail_a_deploy(tmp_path: Path, dev_vars: str, found: str) -> None:
    root = _project_with_dev_vars(tmp_path, dev_vars)
    with pytest.raises(ConfigError) as refused:
        _dev(root, None)
    assert refused.value.found == found
    project = load_project(root)
    assert "CACHE" not in project.vars and [kv.binding for kv in project.kv_namespaces] == ["CACHE"]


def test_name_override_stands_in_for_an_unusable_directory_name(tmp_path: Path) -> None:
    """A nameless config in a directory whose name is no worker name: dev refuses the
    directory's name, a deploy with ``--name`` never uses it."""
    root = tmp_path / "shop.example"
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text("async def on_fetch(request, env): ...\n")
    (root / "wrangler.toml").write_text('main = "src/entry.py"\n')
    with pytest.raises(ConfigError, match="found 'shop.example'"):
        _dev(root, None)
    assert load_project(root, "shop").name == "shop"


def test_dev_runs_from_exactly_the_modules_a_deploy_uploads(tmp_path: Path) -> None:
    """The module rules decide for both: dev's worker cannot read a file the deploy leaves out
    (``secrets.json``, ``key.pem``), and reads every one it uploads, at the same name."""
    root = tmp_path / "ruled"
    (root / "templates").mkdir(parents=True)
    (root / "wrangler.toml").write_text(
        'name = "ruled"\nmain = "worker.py"\n\n'
        '[[rules]]\ntype = "Text"\nglobs = ["**/*.md"]\nfallthrough = true\n'
    )
    (root / "worker.py").write_text("async def on_fetch(request, env):\n    return None\n")
    for name in ("secrets.json", "key.pem", "notes.md", "data.txt", "templates/page.html"):
        (root / name).write_text(name)
    (root / "blob.bin").write_bytes(b"\x00")
    dev = _dev(root, None)
    staged = _staged(dev.deployment.code_dir)
    uploaded = {m.name: m.data for m in load_project(root).modules()}
    assert staged == uploaded
    assert sorted(staged) == [
        "blob.bin", "data.txt", "notes.md", "templates/page.html", "worker.py"
    ]  # fmt: skip
