"""What ``ember deploy`` uploads of a project: its modules and data, never its config."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.cli.worker_project import load_project
from ember.config import load_project as load_dev_project
from ember.errors import ConfigError

WORKER = """\
from workers import Response


async def on_fetch(request, env):
    return Response("hi")
"""


@pytest.mark.parametrize(
    ("config_name", "config_text"),
    [
        ("ember.yaml", 'name: w\nmain: worker.py\ncompatibility_date: "2026-11-01"\n'),
        ("wrangler.toml", 'name = "w"\nmain = "worker.py"\ncompatibility_date = "2026-11-01"\n'),
    ],
)
def test_the_upload_has_the_modules_and_ruled_data_but_not_the_config(
    tmp_path: Path, config_name: str, config_text: str
) -> None:
    (tmp_path / config_name).write_text(config_text)
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "page.html").write_text("<p>hi</p>")
    (tmp_path / "data.yaml").write_text("a: 1\n")  # no default rule takes .yaml
    (tmp_path / ".dev.vars").write_text("SECRET=s\n")
    names = [part.name for part in load_project(tmp_path).modules()]
    assert names == ["worker.py", "helpers.py", "templates/page.html"]


def test_deploy_reads_the_same_config_file_and_syntax_as_dev(tmp_path: Path) -> None:
    """``ember deploy`` and ``ember dev`` pick the same file when several exist (wrangler.jsonc
    before wrangler.json) and read it with the same parser (JSONC: comments, trailing commas)."""
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "wrangler.json").write_text('{"name": "from-json", "main": "worker.py"}')
    (tmp_path / "wrangler.jsonc").write_text(
        '{\n  // the one dev reads\n  "name": "from-jsonc",\n  "main": "worker.py",\n'
        '  "vars": {"A": "1",},\n}\n'
    )
    assert load_dev_project(tmp_path).name == "from-jsonc"
    project = load_project(tmp_path)
    assert (project.name, project.config_file.name) == ("from-jsonc", "wrangler.jsonc")
    assert project.vars == {"A": "1"}


def test_deploy_names_an_unreadable_config_as_dev_does(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "wrangler.jsonc").write_bytes(b'{"name": "w\xff"}')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_project(tmp_path)


RULED_TOML = """\
name = "ruled"
main = "worker.py"
compatibility_date = "2026-11-01"

[[rules]]
type = "Text"
globs = ["**/*.md"]
fallthrough = true
"""


def _ruled_project(root: Path) -> Path:
    """A worker beside files that must not all go up: secrets, keys, notes, build output."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "wrangler.toml").write_text(RULED_TOML)
    (root / "worker.py").write_text(WORKER)
    (root / "helpers.py").write_text("X = 1\n")
    (root / "secrets.json").write_text('{"token": "s3cret"}')
    (root / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (root / "notes.md").write_text("# notes\n")
    (root / "data.txt").write_text("some data\n")
    (root / "blob.bin").write_bytes(b"\x00\x01")
    (root / "module.wasm").write_bytes(b"\x00asm")
    (root / "templates").mkdir()
    (root / "templates" / "page.html").write_text("<p>hi</p>")
    (root / "build").mkdir()
    (root / "build" / "bundle.js").write_text("export default {}\n")
    (root / "python_modules" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "python_modules" / "pkg" / "__init__.py").write_text("Y = 2\n")
    (root / "python_modules" / "pkg" / "LICENSE").write_text("MIT\n")
    (root / "python_modules" / "pkg" / "__pycache__" / "x.cpython-312.pyc").write_bytes(b"pyc")
    return root


def test_the_upload_is_what_wranglers_module_rules_pick(tmp_path: Path) -> None:
    """The entry, then each file a rule matches, typed by the first rule that matches it:
    the config's ``rules`` (here Text for ``**/*.md``, falling through), the ``PythonModule``
    rule for ``**/*.py`` that wrangler adds for a ``.py`` entry (workers-sdk
    ``packages/workers-utils/src/config/validation.ts``, ``applyPythonConfig``), then the
    defaults (``packages/wrangler/src/deployment-bundle/rules.ts``, ``DEFAULT_MODULE_RULES``:
    Text ``**/*.txt``, ``**/*.html``, ``**/*.sql``; Data ``**/*.bin``; CompiledWasm
    ``**/*.wasm``); then every file of ``python_modules/`` as Data, but ``**/*.pyc``
    (``find-additional-modules.ts``, ``findAdditionalModules``; ``python_modules.exclude``
    defaults to ``["**/*.pyc"]`` in ``packages/workers-utils/src/config/config.ts``). Files no
    rule matches (``secrets.json``, ``key.pem``, ``build/bundle.js``) are not uploaded."""
    root = _ruled_project(tmp_path / "ruled")
    parts = load_project(root).modules()
    assert [(p.name, p.content_type) for p in parts] == [
        ("worker.py", "text/x-python"),
        ("blob.bin", "application/octet-stream"),
        ("data.txt", "text/plain"),
        ("helpers.py", "text/x-python"),
        ("module.wasm", "application/wasm"),
        ("notes.md", "text/plain"),
        ("templates/page.html", "text/plain"),
        ("python_modules/pkg/LICENSE", "application/octet-stream"),
        ("python_modules/pkg/__init__.py", "application/octet-stream"),
    ]
    assert {p.name: p.data for p in parts}["blob.bin"] == b"\x00\x01"


def test_without_the_rule_markdown_stays_home(tmp_path: Path) -> None:
    root = _ruled_project(tmp_path / "plain")
    (root / "wrangler.toml").write_text(RULED_TOML.split("[[rules]]")[0])
    names = [p.name for p in load_project(root).modules()]
    assert "notes.md" not in names and "data.txt" in names


def test_a_rule_without_fallthrough_replaces_the_default_of_its_type(tmp_path: Path) -> None:
    """wrangler's ``parseRules``: the config's Text rule without ``fallthrough`` shadows the
    default Text rule (``.txt``, ``.html`` are no longer uploaded), with wrangler's warning."""
    root = _ruled_project(tmp_path / "shadow")
    (root / "wrangler.toml").write_text(RULED_TOML.replace("fallthrough = true\n", ""))
    project = load_project(root)
    names = [p.name for p in project.modules()]
    assert "notes.md" in names and "data.txt" not in names and "templates/page.html" not in names
    assert any("does not have a fallback" in w for w in project.warnings)


def test_find_additional_modules_false_uploads_the_entry_alone(tmp_path: Path) -> None:
    """wrangler's ``noBundleWorker`` finds no additional modules when the config turns
    ``find_additional_modules`` off (workers-sdk ``no-bundle-worker.ts``)."""
    root = _ruled_project(tmp_path / "alone")
    off = 'main = "worker.py"\nfind_additional_modules = false\n'
    (root / "wrangler.toml").write_text(RULED_TOML.replace('main = "worker.py"\n', off))
    assert [p.name for p in load_project(root).modules()] == ["worker.py"]


def test_base_dir_is_the_module_root(tmp_path: Path) -> None:
    """``base_dir`` (relative to the config file) roots the module names, as wrangler's entry
    takes ``config.base_dir ?? dirname(main)`` (``deployment-bundle/entry.ts``)."""
    root = tmp_path / "based"
    (root / "src" / "app").mkdir(parents=True)
    (root / "src" / "app" / "entry.py").write_text(WORKER)
    (root / "src" / "shared.py").write_text("Z = 3\n")
    config = 'name = "b"\nmain = "src/app/entry.py"\nbase_dir = "src"\n'
    (root / "wrangler.toml").write_text(config)
    assert [p.name for p in load_project(root).modules()] == ["app/entry.py", "shared.py"]


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        ('[[rules]]\ntype = "Markdown"\nglobs = ["**/*.md"]\n', "rules[0].type", "one of"),
        ('[[rules]]\ntype = "Text"\nglobs = "**/*.md"\n', "rules[0].globs", "a non-empty"),
        ('[[rules]]\ntype = "Text"\nglobs = ["../*.md"]\n', "rules[0].globs[0]", "a glob"),
        ('[env.staging]\nrules = [{type = "Text"}]\n', "env.staging.rules[0].globs",
         "a non-empty"),
    ],
)  # fmt: skip
def test_malformed_rules_are_refused_by_deploy_and_dev_alike(
    tmp_path: Path, extra: str, key: str, expected: str
) -> None:
    root = _ruled_project(tmp_path / "bad")
    (root / "wrangler.toml").write_text(RULED_TOML.split("[[rules]]")[0] + extra)
    env = "staging" if "env.staging" in extra else None
    for read in (lambda: load_project(root, None, env), lambda: load_dev_project(root, env=env)):
        with pytest.raises(ConfigError) as caught:
            read()
        assert caught.value.key == key
        assert caught.value.file == str(root / "wrangler.toml")
        assert caught.value.expected.startswith(expected)


def test_environments_inherit_the_rules(tmp_path: Path) -> None:
    """``rules`` is inheritable in wrangler (``validation.ts``: ``inheritable(..., "rules")``)."""
    root = _ruled_project(tmp_path / "inherit")
    (root / "wrangler.toml").write_text(RULED_TOML + "\n[env.staging]\n")
    names = [p.name for p in load_project(root, None, "staging").modules()]
    assert "notes.md" in names


def test_python_modules_in_a_module_root_below_the_project_is_refused(tmp_path: Path) -> None:
    """wrangler refuses it: "The 'python_modules' directory cannot exist in your module root"
    (``find-additional-modules.ts``); vendored packages live at the project's root."""
    root = tmp_path / "nested"
    (root / "src" / "python_modules").mkdir(parents=True)
    (root / "src" / "entry.py").write_text(WORKER)
    (root / "wrangler.toml").write_text('name = "n"\nmain = "src/entry.py"\n')
    with pytest.raises(ConfigError, match="python_modules/ at the project's root") as caught:
        load_project(root)
    assert caught.value.file == str(root / "src" / "python_modules")
