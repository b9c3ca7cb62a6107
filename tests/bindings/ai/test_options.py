"""AiOptions: platform names and snake_case, headers, gateway, and errors naming the option."""

from __future__ import annotations

import pytest

from ember.bindings.ai.options import parse_run_options
from ember.errors import InvalidModelInput

MODEL = "@cf/zai-org/glm-4.7-flash"


def test_platform_and_python_spellings() -> None:
    options = parse_run_options(
        {
            "rejectIfBusy": True,
            "return_raw_response": True,
            "extraHeaders": {"x-session-affinity": "ses_1"},
            "prefix": "p",
            "gateway": {"id": "g", "cache_ttl": 30, "skipCache": False, "requestTimeoutMs": 500},
            "tags": ["a", "a", "b:c"],
            "unknownOption": 1,
        },
        MODEL,
    )
    assert options.reject_if_busy and options.return_raw_response
    assert options.session == "ses_1"
    assert options.headers["cf-consn-model-id"] == f"p:{MODEL}"
    assert options.gateway is not None and options.gateway.cache_ttl == 30
    assert options.timeout == 0.5
    assert options.tags == ("a", "b:c")


def test_deprecated_session_options_still_carry_headers() -> None:
    options = parse_run_options(
        {"sessionOptions": {"extraHeaders": {"X-Session-Affinity": "s"}}}, MODEL
    )
    assert options.session == "s"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"rejectIfBusy": "yes"}, "options.rejectIfBusy"),
        ({"extraHeaders": {"bad header": "x"}}, "options.extraHeaders"),
        ({"extraHeaders": {"x": "a\nb"}}, "options.extraHeaders.x"),
        ({"gateway": {"cacheTtl": 5}}, "options.gateway.id"),
        ({"gateway": {"id": "g", "requestTimeoutMs": 0}}, "options.gateway.requestTimeoutMs"),
        ({"tags": [f"t{i}" for i in range(6)]}, "options.tags"),
        ({"tags": ["no#hash"]}, "options.tags"),
        ({"websocket": True}, "options.websocket"),
        ("fast", "options"),
    ],
)
def test_bad_options_name_the_option(options: object, field: str) -> None:
    with pytest.raises(InvalidModelInput) as caught:
        parse_run_options(options, MODEL)
    assert caught.value.field == field
    assert f"'{field}'" in str(caught.value)


def test_no_options_is_what_the_full_parse_gives() -> None:
    """``{}`` skips the parse; keys the platform ignores go through it: the same options."""
    assert parse_run_options({}, MODEL) == parse_run_options({"ignored": 1}, MODEL)
    assert parse_run_options({}, MODEL) == parse_run_options(None, MODEL)
