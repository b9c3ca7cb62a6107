"""A corpus of project configs for comparing ``ember dev``'s reader with ``ember deploy``'s.

Each sample is one *case* (a change to a valid base document: a key set to a value, or removed)
written in one *format* (ember.yaml, wrangler.toml, wrangler.jsonc, wrangler.json) under one
*placement*:

- ``top``: the document as it is, no environment selected;
- ``env``: the changed keys written in ``[env.staging]`` (the bindings live there too) and
  ``staging`` selected, so errors are named ``env.staging.<key>``;
- ``inherit``: the document at the top level plus an empty ``[env.staging]``, selected, so
  inheritable keys come from the top and bindings are dropped (with wrangler's warning).

The documents are Python values, written out by small serialisers (TOML as inline tables, so
any nesting fits on one line each); a case a format cannot write (``null`` in TOML) is skipped.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FORMATS = ("ember.yaml", "wrangler.toml", "wrangler.jsonc", "wrangler.json")
PLACEMENTS = ("top", "env", "inherit")
ENV = "staging"
DROP = object()  # a change that removes the key
WORKER = "async def on_fetch(request, env):\n    return None\n"
MD_RULE = {"type": "Text", "globs": ["**/*.md"], "fallthrough": True}

BASE: dict[str, object] = {
    "name": "shop",
    "main": "src/entry.py",
    "compatibility_date": "2025-11-02",
    "compatibility_flags": ["python_workers"],
    "vars": {"API_HOST": "example.com", "LIMITS": {"max": 3}},
    "kv_namespaces": [{"binding": "CACHE", "id": "abc123"}, {"binding": "SESSIONS"}],
    "ai": {"binding": "AI"},
    "triggers": {"crons": ["*/5 * * * *"]},
}
# Keys the ``env`` placement writes in the environment's section (with the case's changes).
ENV_KEYS = ("vars", "kv_namespaces", "ai", "triggers")


@dataclass(frozen=True)
class Case:
    """One change to ``BASE``: ``{key: value}``, or ``{key: DROP}`` to remove the key."""

    id: str
    changes: dict[str, object] = field(default_factory=dict)
    formats: tuple[str, ...] = FORMATS


def _cases() -> list[Case]:
    big = "x" * 6000
    many = {f"V{i}": str(i) for i in range(129)}
    cases = [
        # Valid documents.
        Case("base"),
        Case("minimal", {k: DROP for k in BASE if k not in ("name", "main")}),
        Case("no-flags", {"compatibility_flags": DROP}),
        Case("other-flags", {"compatibility_flags": ["nodejs_compat"]}),
        Case("no-date", {"compatibility_date": DROP}),
        Case("date-value", {"compatibility_date": datetime.date(2025, 1, 2)}, FORMATS[:2]),
        Case("var-date", {"vars": {"D": datetime.date(2024, 5, 6)}}, FORMATS[:2]),
        Case("var-kinds", {"vars": {"S": "s", "N": 3, "F": 1.5, "B": True, "L": [1, "a"]}}),
        Case("var-null", {"vars": {"N": None}}, ("ember.yaml", "wrangler.jsonc")),
        Case("no-vars", {"vars": {}}),
        Case("kv-ids", {"kv_namespaces": [{"binding": "A", "id": "a1", "preview_id": "p"}]}),
        Case("kv-empty", {"kv_namespaces": []}),
        Case("no-kv", {"kv_namespaces": DROP}),
        Case("no-ai", {"ai": DROP}),
        Case("ai-limits", {"ai": {"binding": "AI", "limits": {"requests_per_minute": 60}}}),
        Case("ai-remote", {"ai": {"binding": "AI", "remote": True}}),
        Case("no-triggers", {"triggers": DROP}),
        Case("triggers-empty", {"triggers": {}}),
        Case("crons-empty", {"triggers": {"crons": []}}),
        Case("crons-two", {"triggers": {"crons": ["0 0 * * *", "30 6 * * 2-6"]}}),
        Case("unknown-key", {"colour": "blue"}),
        Case("known-keys", {"routes": ["a.example/*"], "workers_dev": True, "account_id": "x"}),
        Case("keep-vars", {"keep_vars": True}),
        Case("limits", {"limits": {"cpu_ms": 50}}),
        Case("dev", {"dev": {"port": 9000}}),
        Case("no-name", {"name": DROP}),  # a deploy-only rule: a deploy needs a name
        Case("no-main-yaml", {"main": DROP}, ("ember.yaml",)),  # ember.yaml: worker.py
        Case("main-root", {"main": "worker.py"}),
        # Module rules: what dev stages is what deploy uploads (README.md once a rule takes it).
        Case("rules-md", {"main": "worker.py", "rules": [MD_RULE]}),
        Case("rules-shadow", {"rules": [{"type": "Text", "globs": ["**/*.md"]}]}),
        Case("rules-data", {"rules": [{"type": "Data", "globs": ["**/*.json"]}]}),
        Case("base-dir", {"base_dir": "."}),
        Case("no-additional", {"find_additional_modules": False}),
        Case("python-modules-exclude", {"python_modules": {"exclude": ["**/*.txt"]}}),
        Case("assets", {"assets": {"directory": "src"}}),
        Case(
            "assets-all",
            {
                "assets": {
                    "directory": "./src",
                    "binding": "ASSETS",
                    "html_handling": "none",
                    "not_found_handling": "404-page",
                    "run_worker_first": ["/api/*", "!/api/docs/*"],
                }
            },
        ),
        Case("assets-first", {"assets": {"directory": ".", "run_worker_first": True}}),
        # Invalid documents: ember dev refuses every one.
        Case("name-int", {"name": 5}),
        Case("name-empty", {"name": ""}),
        Case("name-space", {"name": "my shop"}),
        Case("name-long", {"name": "a" * 64}),
        Case("main-int", {"main": 5}),
        Case("no-main", {"main": DROP}, FORMATS[1:]),
        Case("main-missing", {"main": "src/missing.py"}),
        Case("main-not-py", {"main": "README.md"}),
        Case("main-outside", {"main": "../outside.py"}),
        Case("date-bad", {"compatibility_date": "2025-13-01"}),
        Case("date-word", {"compatibility_date": "yesterday"}),
        Case("date-int", {"compatibility_date": 20250101}),
        Case("flags-str", {"compatibility_flags": "python_workers"}),
        Case("flags-int", {"compatibility_flags": [1]}),
        Case("vars-list", {"vars": ["A"]}),
        Case("var-empty-name", {"vars": {"": "x"}}),
        Case("var-too-big", {"vars": {"BIG": big}}),
        Case("vars-too-many", {"vars": many}),
        Case("var-is-binding", {"vars": {"CACHE": "x"}}),
        Case("var-is-ai", {"vars": {"AI": "x"}}),
        Case("kv-mapping", {"kv_namespaces": {"binding": "KV"}}),
        Case("kv-string", {"kv_namespaces": ["CACHE"]}),
        Case("kv-no-binding", {"kv_namespaces": [{"id": "x"}]}),
        Case("kv-bad-binding", {"kv_namespaces": [{"binding": "my-kv"}]}),
        Case("kv-id-int", {"kv_namespaces": [{"binding": "KV", "id": 5}]}),
        Case("kv-id-empty", {"kv_namespaces": [{"binding": "KV", "id": ""}]}),
        Case("kv-preview-int", {"kv_namespaces": [{"binding": "KV", "preview_id": 5}]}),
        Case("kv-twice", {"kv_namespaces": [{"binding": "KV"}, {"binding": "KV"}]}),
        Case("ai-string", {"ai": "AI"}),
        Case("ai-empty", {"ai": {}}),
        Case("ai-unknown", {"ai": {"binding": "AI", "model": "x"}}),
        Case("ai-is-kv", {"ai": {"binding": "CACHE"}}),
        Case("ai-limits-bad", {"ai": {"binding": "AI", "limits": {"requests_per_minute": -1}}}),
        Case("r2", {"r2_buckets": [{"binding": "B", "bucket_name": "b"}]}),
        Case("d1", {"d1_databases": [{"binding": "DB", "database_id": "x"}]}),
        Case("services", {"services": [{"binding": "S", "service": "other"}]}),
        Case("triggers-str", {"triggers": "* * * * *"}),
        Case("crons-str", {"triggers": {"crons": "* * * * *"}}),
        Case("crons-int", {"triggers": {"crons": [5]}}),
        Case("crons-null", {"triggers": {"crons": None}}, ("ember.yaml", "wrangler.jsonc")),
        Case("cron-bad", {"triggers": {"crons": ["* * *"]}}),
        Case("cron-macro", {"triggers": {"crons": ["@daily"]}}),
        Case("cron-range", {"triggers": {"crons": ["61 * * * *"]}}),
        Case("limits-zero", {"limits": {"cpu_ms": 0}}),
        Case("limits-unknown", {"limits": {"gpu_ms": 1}}),
        Case("dev-port", {"dev": {"port": "x"}}),
        Case("keep-vars-str", {"keep_vars": "yes"}),
        Case("env-str", {"env": "staging"}),
        Case("rules-mapping", {"rules": MD_RULE}),
        Case("rules-type", {"rules": [{"type": "Markdown", "globs": ["**/*.md"]}]}),
        Case("rules-python", {"rules": [{"type": "PythonModule", "globs": ["**/*.py"]}]}),
        Case("rules-globs-str", {"rules": [{"type": "Text", "globs": "**/*.md"}]}),
        Case("rules-glob-up", {"rules": [{"type": "Text", "globs": ["../*.md"]}]}),
        Case("rules-fallthrough", {"rules": [{**MD_RULE, "fallthrough": "yes"}]}),
        Case("base-dir-missing", {"base_dir": "nowhere"}),
        Case("base-dir-beside", {"base_dir": "lib"}),
        Case("additional-str", {"find_additional_modules": "yes"}),
        Case("python-modules-list", {"python_modules": ["x"]}),
        Case("assets-str", {"assets": "public"}),
        Case("assets-missing", {"assets": {"directory": "public"}}),
        Case("assets-html", {"assets": {"directory": "src", "html_handling": "auto"}}),
        Case("assets-rules", {"assets": {"directory": "src", "run_worker_first": ["api/*"]}}),
        Case("assets-is-kv", {"assets": {"directory": "src", "binding": "CACHE"}}),
        Case("assets-is-var", {"assets": {"directory": "src", "binding": "API_HOST"}}),
    ]
    return cases


CASES = _cases()


@dataclass(frozen=True)
class Sample:
    """One case in one format and placement: what to write, and the ``--env`` to pass."""

    case: Case
    format: str
    placement: str

    @property
    def id(self) -> str:
        return f"{self.case.id}-{self.format}-{self.placement}"

    @property
    def env(self) -> str | None:
        return None if self.placement == "top" else ENV

    def document(self) -> dict[str, object]:
        top = _changed(BASE, self.case.changes)
        if self.placement == "top":
            return top
        if self.placement == "inherit":
            return {**top, "env": {ENV: {}}} if "env" not in top else top
        # "env": the bindings and the case's keys in the environment's section; a removed key
        # is removed from both (a name the top level still gave would be suffixed, not absent).
        own = set(ENV_KEYS) | set(self.case.changes)
        section = {k: v for k, v in top.items() if k in own and k != "env"}
        rest = {k: v for k, v in top.items() if k not in own or k == "env"}
        if "env" in rest:
            return rest  # a malformed env key: there is no section to write into
        return {**rest, "env": {ENV: section}}

    def write(self, tmp_path: Path) -> Path:
        """The project directory, with its worker, a stray README, data files (one no rule
        takes), vendored packages and a module outside it."""
        root = tmp_path / "shop"
        (root / "src").mkdir(parents=True)
        (root / "src" / "entry.py").write_text(WORKER)
        (root / "worker.py").write_text(WORKER)
        (root / "README.md").write_text("# shop\n")
        (root / "src" / "page.html").write_text("<p>shop</p>\n")  # a default rule's
        (root / "src" / "secrets.json").write_text('{"key": "no rule takes it"}\n')
        (root / "lib").mkdir()  # beside src: not a base_dir that holds main
        (root / "python_modules" / "pkg").mkdir(parents=True)
        (root / "python_modules" / "pkg" / "__init__.py").write_text("")
        (root / "python_modules" / "pkg" / "notes.txt").write_text("vendored\n")
        (tmp_path / "outside.py").write_text(WORKER)
        (root / self.format).write_text(serialise(self.document(), self.format))
        return root


def samples() -> Iterator[Sample]:
    for case in CASES:
        for fmt in case.formats:
            for placement in PLACEMENTS:
                yield Sample(case, fmt, placement)


def _changed(base: dict[str, object], changes: dict[str, object]) -> dict[str, object]:
    out = {k: v for k, v in base.items() if changes.get(k) is not DROP}
    out.update({k: v for k, v in changes.items() if v is not DROP})
    return out


def serialise(document: dict[str, object], fmt: str) -> str:
    if fmt.endswith(".yaml"):
        return yaml.safe_dump(document, sort_keys=False)
    if fmt.endswith(".toml"):
        return "".join(f"{_toml_key(k)} = {_toml(v)}\n" for k, v in document.items())
    text = json.dumps(document, indent=2, default=str)
    if fmt.endswith(".jsonc"):
        return "// written by config_corpus\n" + text
    return text


def _toml_key(key: str) -> str:
    bare = key and all(c.isalnum() or c in "_-" for c in key) and key.isascii()
    return key if bare else json.dumps(key)


def _toml(value: object) -> str:
    if value is None:
        raise ValueError("TOML has no null")  # such cases list only the other formats
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")
