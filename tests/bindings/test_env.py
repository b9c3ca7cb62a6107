"""``env`` and the values bindings hand to handlers."""

from __future__ import annotations

from ember.bindings.env import Env, Secret
from ember.bindings.jsdict import JsDict, to_jsdict


def test_env_gives_vars_secrets_and_bindings_and_hides_secrets() -> None:
    binding = object()
    env = Env({"NAME": "x", "CONF": {"a": {"b": 1}}}, {"TOKEN": "hunter2-secret"}, {"KV": binding})
    assert env.NAME == "x" and env["NAME"] == "x" and env.CONF.a.b == 1
    assert env.TOKEN == "hunter2-secret" and isinstance(env.TOKEN, Secret)
    assert f"Bearer {env.TOKEN}" == "Bearer hunter2-secret"
    assert (
        env.KV is binding and "KV" in env and sorted(env.keys()) == ["CONF", "KV", "NAME", "TOKEN"]
    )
    assert "hunter2" not in repr(env) and "hunter2" not in repr(env.TOKEN)
    assert "TOKEN=<secret>" in repr(env)
    try:
        env.MISSING  # noqa: B018
    except AttributeError as exc:
        assert "MISSING" in str(exc)
    else:
        raise AssertionError("missing names must raise AttributeError")


def test_jsdict_data_wins_over_dict_methods_like_a_js_object() -> None:

    listing = to_jsdict({"keys": [{"name": "a"}], "list_complete": True})
    assert listing.keys[0].name == "a" and listing["keys"][0]["name"] == "a"
    plain = JsDict(value=1)
    assert list(plain.keys()) == ["value"] and plain.value == 1
    assert plain.to_py() == {"value": 1} and type(plain.to_py()) is dict
