"""A name the user gives the CLI is one URL path segment, whatever it holds: ``.`` and ``..``
as a KV key or secret name must reach the platform as that name (which refuses them), never
be resolved by the HTTP client into the parent path (``values/..`` is the namespace itself,
``secrets/..`` the worker's script), where a delete would take the namespace or the worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.cli.session import path_segment
from tests.serve.conftest import ServeProcess, permanent_account
from tests.serve.test_cli import _ember

EMBER_YAML = """\
name: dots
main: src/entry.py
compatibility_date: "2026-11-01"
kv_namespaces: [{binding: KV}]
"""
ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    return Response(f"kept {await env.KV.get('keep')}")
"""


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("...", "..."),
        ("a/b", "a%2Fb"),
        ("a.b", "a.b"),
        ("%2E", "%252E"),
        ("é x", "%C3%A9%20x"),
    ],
)
def test_path_segment_encodes_what_a_client_would_resolve_or_split(value: str, sent: str) -> None:
    assert path_segment(value) == sent


def test_dot_names_never_reach_the_parent_resource(serve: ServeProcess, tmp_path: Path) -> None:
    _, token = permanent_account(serve, "dotacct")
    env = {"env": {"EMBER_API_TOKEN": token}}
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(EMBER_YAML)
    (project / "src" / "entry.py").write_text(ENTRY)
    home = tmp_path / "h"

    def ember(*args: str, **kw: object):  # noqa: ANN202
        return _ember(serve, home, project, *args, **env, **kw)

    assert ember("deploy").returncode == 0
    put = ember("kv", "key", "put", "keep", "me", "--binding", "KV", "--remote")
    assert put.returncode == 0, put.stderr
    assert ember("secret", "put", "S", input="v").returncode == 0
    assert serve.worker("dotacct", "dots").text == "kept me"

    for key in (".", ".."):
        deleted = ember("kv", "key", "delete", key, "--binding", "KV", "--remote")
        assert deleted.returncode == 1 and "Illegal key name" in deleted.stderr, deleted.stderr
        got = ember("kv", "key", "get", key, "--binding", "KV", "--remote")
        assert got.returncode == 1 and got.stdout == "", got.stdout
        renamed = ember("kv", "key", "put", key, '{"title": "x"}', "--binding", "KV", "--remote")
        assert renamed.returncode == 1, renamed.stdout
        gone = ember("secret", "delete", key)
        assert gone.returncode == 1, gone.stdout + gone.stderr
    titles = {n["title"] for n in json.loads(ember("kv", "namespace", "list").stdout)}
    assert "x" not in titles
    assert serve.worker("dotacct", "dots").text == "kept me"  # namespace, key, worker all there
    secrets = json.loads(ember("secret", "list").stdout)
    assert [s["name"] for s in secrets] == ["S"]
