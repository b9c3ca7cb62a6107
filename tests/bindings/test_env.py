"""``env`` and the values bindings hand to handlers."""

from __future__ import annotations

import pytest

from ember.bindings.env import Env, Secret
from ember.bindings.jsdict import JsDict, to_jsdict, to_plain


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


def test_a_misspelt_name_is_answered_with_the_nearest_and_every_name_never_a_value() -> None:
    env = Env({"GREETING": "hello"}, {"API_TOKEN": "hunter2-secret"}, {"KV": object()})
    with pytest.raises(AttributeError) as misspelt:
        env.KVV  # noqa: B018
    message = str(misspelt.value)
    assert message.startswith("env has no binding or variable named 'KVV'"), message
    assert "did you mean 'KV'?" in message
    assert "env has: API_TOKEN, GREETING, KV" in message
    assert "hunter2" not in message and "hello" not in message
    with pytest.raises(AttributeError) as lowercase:
        env.kv  # noqa: B018
    assert "did you mean 'KV'?" in str(lowercase.value)
    with pytest.raises(AttributeError) as unrelated:
        env.DATABASE_URL  # noqa: B018
    assert "did you mean" not in str(unrelated.value)
    assert "env has: API_TOKEN, GREETING, KV" in str(unrelated.value)
    with pytest.raises(AttributeError) as no_ai:
        env.AI  # noqa: B018
    assert "declare the AI binding in the project's config (ai: {binding: AI}" in str(no_ai.value)
    assert "declare" not in str(unrelated.value)
    with pytest.raises(AttributeError) as empty:
        Env({}, {}, {}).KV  # noqa: B018
    assert "env has no bindings, vars or secrets" in str(empty.value)


def test_jsdict_data_wins_over_dict_methods_like_a_js_object() -> None:

    listing = to_jsdict({"keys": [{"name": "a"}], "list_complete": True})
    assert listing.keys[0].name == "a" and listing["keys"][0]["name"] == "a"
    plain = JsDict(value=1)
    assert list(plain.keys()) == ["value"] and plain.value == 1
    assert plain.to_py() == {"value": 1} and type(plain.to_py()) is dict


def test_jsdicts_whose_keys_shadow_dict_methods_still_convert() -> None:
    # A JSON schema's "items", KV's "keys": data wins over the methods, so converting must not
    # call them (``await request.json()`` passed on to env.AI.run or Response.json).
    schema = to_jsdict({"type": "array", "items": {"type": "string"}, "keys": 1, "values": 2})
    assert schema.items == {"type": "string"}
    again = to_jsdict(schema)
    assert type(again) is JsDict and again == schema
    plain = to_plain({"outer": schema, "list": [schema]})
    assert plain == {"outer": dict(schema), "list": [dict(schema)]}
    assert type(plain["outer"]) is dict and type(plain["outer"]["items"]) is dict
    assert schema.to_py() == {"type": "array", "items": {"type": "string"}, "keys": 1, "values": 2}
