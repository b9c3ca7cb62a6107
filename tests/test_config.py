"""Project config from ember.yaml, wrangler.toml and wrangler.jsonc; every error names its place."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.bindings.registry import default_registry
from ember.config import load_project, parse_dotenv
from ember.config_env import NOT_INHERITABLE_KEYS
from ember.config_keys import BINDING_KEYS
from ember.errors import ConfigError
from ember.jsonc import strip_jsonc
from ember.runtime.deployment import deployment_from_project

YAML = """
name: shop
main: src/entry.py
compatibility_date: 2025-11-02
compatibility_flags: [python_workers]
vars:
  API_HOST: example.com
  LIMITS: {max: 3}
kv_namespaces:
  - binding: CACHE
    id: abc123
ai:
  binding: AI
triggers:
  crons: ["*/5 * * * *"]
limits:
  cpu_ms: 50
  subrequests: 20
dev:
  port: 9000
"""

TOML = """
name = "shop"
main = "src/entry.py"
compatibility_date = "2025-11-02"
compatibility_flags = ["python_workers"]

[vars]
API_HOST = "example.com"
LIMITS = { max = 3 }

[[kv_namespaces]]
binding = "CACHE"
id = "abc123"

[ai]
binding = "AI"

[triggers]
crons = ["*/5 * * * *"]

[limits]
cpu_ms = 50
subrequests = 20

[dev]
port = 9000
"""

JSONC = """
// wrangler.jsonc, as create-cloudflare writes it
{
  "$schema": "node_modules/wrangler/config-schema.json",
  "name": "shop",
  "main": "src/entry.py", /* the Python entry point */
  "compatibility_date": "2025-11-02",
  "compatibility_flags": ["python_workers",],
  "vars": {"API_HOST": "example.com", "LIMITS": {"max": 3}},
  "kv_namespaces": [{"binding": "CACHE", "id": "abc123"}],
  "ai": {"binding": "AI"},
  "triggers": {"crons": ["*/5 * * * *"]},
  "limits": {"cpu_ms": 50, "subrequests": 20},
  "dev": {"port": 9000},
}
"""


def _project(tmp_path: Path, filename: str, text: str, main: str = "src/entry.py") -> Path:
    (tmp_path / main).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / main).write_text("async def fetch(request, env, ctx): ...\n")
    (tmp_path / filename).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("filename", "text"), [("ember.yaml", YAML), ("wrangler.toml", TOML), ("wrangler.jsonc", JSONC)]
)
def test_the_three_formats_give_the_same_deployment(
    tmp_path: Path, filename: str, text: str
) -> None:
    config = load_project(_project(tmp_path, filename, text))
    deployment = deployment_from_project(config)
    assert (config.name, config.main, config.compatibility_date) == (
        "shop",
        "src/entry.py",
        "2025-11-02",
    )
    assert config.compatibility_flags == ("python_workers",)
    assert dict(config.vars) == {"API_HOST": "example.com", "LIMITS": {"max": 3}}
    assert config.crons == ("*/5 * * * *",) and config.dev.port == 9000
    assert [(b.kind, b.name, dict(b.options)) for b in deployment.bindings][0] == (
        "kv_namespace",
        "CACHE",
        {"namespace_id": "abc123"},
    )
    assert deployment.bindings[1].kind == "ai"
    assert (deployment.limits.cpu_ms, deployment.limits.subrequests) == (50, 20)


def test_dev_vars_are_secrets_that_override_vars(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "ember.yaml", "name: s\nmain: src/entry.py\nvars:\n  TOKEN: public\n  KEEP: x\n"
    )
    (root / ".dev.vars").write_text(
        "# comment\nexport TOKEN=\"line1\\nline2\"\nOTHER=plain # note\nQUOTED='a b'\n"
    )
    config = load_project(root)
    assert dict(config.secrets) == {"TOKEN": "line1\nline2", "OTHER": "plain", "QUOTED": "a b"}
    assert dict(config.vars) == {"KEEP": "x"}
    assert "line1" not in repr(config)


def test_cli_var_overrides_vars_and_dev_vars(tmp_path: Path) -> None:
    # wrangler dev --var KEY:VALUE wins over both wrangler.toml vars and .dev.vars.
    root = _project(tmp_path, "ember.yaml", "name: s\nmain: src/entry.py\nvars:\n  URL: toml\n")
    (root / ".dev.vars").write_text("TOKEN=from-dev-vars\nOTHER=kept\n")
    config = load_project(root, extra_vars={"TOKEN": "from-cli", "URL": "cli-url"})
    assert dict(config.vars) == {"URL": "cli-url", "TOKEN": "from-cli"}
    assert dict(config.secrets) == {"OTHER": "kept"}


def test_bad_dev_vars_line_never_echoes_its_value(tmp_path: Path) -> None:
    (tmp_path / ".dev.vars").write_text("GOOD=1\nthis-is-the-secret-value\n")
    with pytest.raises(ConfigError) as info:
        parse_dotenv(tmp_path / ".dev.vars")
    assert "line 2" in str(info.value) and "this-is-the-secret" not in str(info.value)


def test_dev_vars_read_as_wrangler_reads_them(tmp_path: Path) -> None:
    # wrangler parses .dev.vars with the dotenv package; the same file must give the same values.
    (tmp_path / ".dev.vars").write_text(
        'QUOTED="value" # a comment after quotes\n'
        "HASH=abc#rest is a comment\n"
        "SINGLE='keeps # and  spaces'\n"
        'PEM="-----BEGIN KEY-----\nline two\n-----END KEY-----"\n'
        "TICK=`back tick`\n"
        "COLON: yes\n"
        'ESCAPES="a\\nb \\"q\\""\n'
        "  export INDENTED=1\r\n"
        "EMPTY=\n"
        "1KEY=digit first\n"
    )
    assert parse_dotenv(tmp_path / ".dev.vars") == {
        "QUOTED": "value",
        "HASH": "abc",
        "SINGLE": "keeps # and  spaces",
        "PEM": "-----BEGIN KEY-----\nline two\n-----END KEY-----",
        "TICK": "back tick",
        "COLON": "yes",
        "ESCAPES": 'a\nb \\"q\\"',
        "INDENTED": "1",
        "EMPTY": "",
        "1KEY": "digit first",
    }


@pytest.mark.parametrize("where", ["vars", ".dev.vars"])
def test_a_var_named_like_a_binding_is_refused(tmp_path: Path, where: str) -> None:
    # wrangler: "KV assigned to Environment Variable and KV Namespace bindings."
    text = "name: s\nmain: src/entry.py\nkv_namespaces:\n  - binding: KV\n"
    if where == "vars":
        text += "vars:\n  KV: shadow\n"
    root = _project(tmp_path, "ember.yaml", text)
    if where == ".dev.vars":
        (root / ".dev.vars").write_text("KV=secret-shadow\n")
    with pytest.raises(ConfigError) as info:
        deployment_from_project(load_project(root))
    message = str(info.value)
    assert "the kv_namespace binding KV has it" in message and "unique names" in message
    assert message.startswith(
        str(root / ("ember.yaml: vars.KV" if where == "vars" else ".dev.vars: KV"))
    )
    assert "secret-shadow" not in message


def test_future_compatibility_date_is_a_warning_in_dev(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "ember.yaml", 'name: s\nmain: src/entry.py\ncompatibility_date: "2999-01-01"\n'
    )
    config = load_project(root)
    assert config.compatibility_date == "2999-01-01"
    assert any('compatibility_date "2999-01-01" is in the future' in w for w in config.warnings)
    today = load_project(
        _project(
            tmp_path / "now",
            "ember.yaml",
            'name: s\nmain: src/entry.py\ncompatibility_date: "2026-11-01"\n',
        )
    )
    assert not today.warnings


def test_unclosed_quote_in_dev_vars_names_its_line(tmp_path: Path) -> None:
    (tmp_path / ".dev.vars").write_text('A=1\nTOKEN="never-closed-secret\nB=2\n')
    with pytest.raises(ConfigError) as info:
        parse_dotenv(tmp_path / ".dev.vars")
    message = str(info.value)
    assert "line 2" in message and 'closing "' in message
    assert "never-closed-secret" not in message


@pytest.mark.parametrize(
    ("filename", "text", "pattern"),
    [
        (
            "ember.yaml",
            "name: x\nmain: [unclosed\n",
            r"ember\.yaml: line 3, column 1: expected valid YAML",
        ),
        (
            "wrangler.toml",
            'name = "x\n',
            r'wrangler\.toml: expected valid TOML, found "Illegal character '
            r".*\(at line 1, column 10\)",
        ),
        (
            "wrangler.jsonc",
            '{"name": "x" "main": 1}',
            r"wrangler\.jsonc: line 1, column 14: expected valid JSONC",
        ),
        (
            "ember.yaml",
            "name: x\nmain: missing.py\n",
            r"ember\.yaml: main: expected an existing file under .*, found 'missing\.py'",
        ),
        (
            "ember.yaml",
            "name: x\nmain: src/entry.py\nlimits: {cpu_ms: 0}\n",
            r"limits\.cpu_ms: expected an integer from 1 to 300000, found 0",
        ),
        (
            "ember.yaml",
            "name: x\nmain: src/entry.py\nlimits: {cpu: 5}\n",
            r"limits\.cpu: expected one of cpu_ms",
        ),
        (
            "ember.yaml",
            "name: x\nmain: src/entry.py\nvars: [1]\n",
            r"vars: expected a mapping of names to values, found \[1\]",
        ),
        ("ember.yaml", "name: bad name\nmain: src/entry.py\n", r"name: expected letters, digits"),
        ("ember.yaml", "main: src/entry.txt\n", r"main: expected a Python module ending in \.py"),
        ("ember.yaml", "- a list\n", r"expected a mapping of keys at the top level, found 'list'"),
    ],
)
def test_config_errors_name_file_key_found_and_expected(
    tmp_path: Path, filename: str, text: str, pattern: str
) -> None:
    _project(tmp_path, filename, text)
    (tmp_path / "src" / "entry.txt").write_text("")
    with pytest.raises(ConfigError, match=pattern):
        load_project(tmp_path)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "r2_buckets:\n  - binding: B\n",
            r"r2_buckets: expected a supported binding type: ai, assets, kv_namespaces, "
            r"found 'r2_buckets'",
        ),
        (
            "worker_loaders:\n  - binding: LOADER\n",
            r"worker_loaders: expected a supported binding type: ai, assets, kv_namespaces, "
            r"found 'worker",
        ),
        (  # every unsupported type at once, in the file's order
            "r2_buckets: []\nkv_namespaces: [{binding: KV}]\nd1_databases: []\n",
            r"r2_buckets, d1_databases: expected supported binding types: ai, assets, "
            r"kv_namespaces, found \['r2_buckets', 'd1_databases'\] \(ember does not emulate "
            r"these binding types",
        ),
        (
            "kv_namespaces:\n  - binding: 1\n",
            r"kv_namespaces\[0\]\.binding: expected a binding name",
        ),
        (
            "kv_namespaces: {binding: KV}\n",
            r"kv_namespaces: expected a list of \{binding, id\} entries",
        ),
        ("ai: AI\n", r"ai: expected a mapping such as \{binding: AI\}"),
        (
            "kv_namespaces:\n  - binding: X\nai:\n  binding: X\n",
            r"ai: expected a binding name not already used",
        ),
        (
            "triggers:\n  crons: ['61 * * * *']\n",
            r"triggers\.crons\[0\]: expected minute: 61 is outside 0-59",
        ),
    ],
)
def test_binding_and_cron_errors(tmp_path: Path, text: str, pattern: str) -> None:
    root = _project(tmp_path, "ember.yaml", "name: x\nmain: src/entry.py\n" + text)
    with pytest.raises(ConfigError, match=pattern):
        deployment_from_project(load_project(root))


def test_every_binding_wrangler_knows_is_refused_rather_than_ignored() -> None:
    not_bindings = {"define", "vars", "secrets", "cloudchamber", "connect"}
    not_bindings |= {"tail_consumers", "streaming_tail_consumers"}
    bindings = NOT_INHERITABLE_KEYS - not_bindings
    assert bindings <= BINDING_KEYS, sorted(bindings - BINDING_KEYS)


def test_unknown_top_level_fields_are_warned_about_not_fatal(tmp_path: Path) -> None:
    root = _project(tmp_path, "ember.yaml", "name: x\nmain: src/entry.py\nmian: oops\n")
    config = load_project(root)
    assert default_registry().ignored(config.binding_sections) == ["mian"]


def test_missing_config_suggests_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("ember init NAME")):
        load_project(tmp_path)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab/*,]}"\\ x\n', max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


def _noisy(value: object) -> str:
    """JSON with a comment after every token and a trailing comma in every container."""
    if isinstance(value, list):
        items = "".join(f"{_noisy(v)}, // item\n" for v in value)
        return f"[ /* list */ {items}]"
    if isinstance(value, dict):
        items = "".join(f"{json.dumps(k)} /* key */ : {_noisy(v)},\n" for k, v in value.items())
        return "{ // object\n" + items + "}"
    return json.dumps(value) + " /* value */"


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_jsonc_with_comments_and_trailing_commas_parses_like_json(value: object) -> None:
    assert json.loads(strip_jsonc("// leading comment\n" + _noisy(value))) == value
