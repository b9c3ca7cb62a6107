"""GLM's raw string arguments (``<arg_value>Paris</arg_value>``) honour the string schema by
construction, as the JSON path does: ``minLength``/``maxLength`` in code points, ``pattern``
searched in the raw text, ``format``, and never a tool-call marker inside. ``len`` and Python's
``re`` judge random schemas and values; random walks over allowed tokens parse back through the
output parser; the fast masks equal the slow reference ones."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.api.output_parser import parse_output
from ember.models.constrain.grammar import END, Grammar, advance, initial_state
from ember.models.constrain.masks import compute_mask, reference_mask
from ember.models.constrain.regex_avoid import Avoider, Liveness, SpellsForbidden
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.session import (
    ConstrainedDecoder,
    ConstraintSpec,
    GrammarCache,
    build_root,
)
from ember.models.constrain.tool_grammars import GLM_MARKERS, ToolSignature
from tests.models.constrain.fixtures import detokenize, sample_tokens, small_vocab
from tests.models.constrain.test_regex import candidates, random_pattern

SPECIAL = small_vocab()
PLAIN = small_vocab(special_markers=False)  # markers spelled as bytes
FORMATS = ("glm45", "glm47")


def _tool(value_schema: object) -> ToolSignature:
    return ToolSignature(
        "t", {"type": "object", "properties": {"v": value_schema}, "required": ["v"]}
    )


def _spec(value_schema: object, tool_format: str = "glm47") -> ConstraintSpec:
    return ConstraintSpec(
        tools=(_tool(value_schema),),
        tools_required=True,
        tool_format=tool_format,  # type: ignore[arg-type]
        parallel_tool_calls=False,
    )


def _call(value: str, tool_format: str) -> tuple[str, str, str]:
    """The text before the value, the value, the text after (GLM-4.5 puts newlines between)."""
    nl = "\n" if tool_format == "glm45" else ""
    head = f"{nl}<tool_call>t{nl}<arg_key>v</arg_key>{nl}<arg_value>"
    return head, value, f"</arg_value>{nl}</tool_call>"


def _feed_text(state: frozenset, text: str, special_ids: dict[str, int]) -> frozenset:
    """Markers as their special symbols where the vocabulary has them, else bytes."""
    i = 0
    while i < len(text) and state:
        marker = next((m for m in special_ids if text.startswith(m, i)), None)
        if marker is not None:
            state = advance(state, 256 + special_ids[marker])
            i += len(marker)
            continue
        for byte in text[i].encode():
            state = advance(state, byte)
        i += 1
    return state


def accepts(root, value: str, special_ids: dict[str, int], tool_format: str = "glm47") -> bool:  # noqa: ANN001
    """The whole call with ``value`` fed as raw bytes (a marker inside it is spelled)."""
    head, value, tail = _call(value, tool_format)
    state = _feed_text(initial_state(root), head, special_ids)
    for byte in value.encode():
        state = advance(state, byte)
    state = _feed_text(state, tail, special_ids)
    return bool(state) and () in advance(state, END)


def spells_marker(value: str) -> bool:
    return any(m in value for m in GLM_MARKERS)


def random_string_schema(
    rng: random.Random, *, bounded: bool = False
) -> tuple[dict, re.Pattern | None]:
    """A string schema with some of minLength, maxLength and a pattern (anchored or searched),
    and the ``re`` judge of its pattern (None: no pattern). Some text satisfies it: a pattern
    no text of the allowed lengths matches is ignored in tool parameters (as on the JSON
    path), which ``test_an_unsatisfiable_pattern_is_ignored_and_the_length_kept`` covers."""
    schema: dict = {"type": "string"}
    low = rng.choice([0, 0, 1, 2, 3, 5])
    if rng.random() < 0.6:
        schema["minLength"] = low
    if bounded or rng.random() < 0.7:
        schema["maxLength"] = low + rng.randint(0, 6)
    if rng.random() < 0.4:
        return schema, None
    while True:
        body = random_pattern(rng)
        if rng.random() < 0.5:
            pattern = f"^(?:{body})$"
            # ECMA's "$" (JSON Schema's): no slack for a final newline, as Python's has.
            judge = re.compile(rf"\A(?:{body})\Z", re.ASCII)
        else:
            pattern, judge = body, re.compile(body, re.ASCII)
        try:
            compile_regex(pattern, search=True, length=(low, schema.get("maxLength")))
        except RegexError:
            continue
        return schema | {"pattern": pattern}, judge


def expected(schema: dict, judge: re.Pattern | None, value: str) -> bool:
    if spells_marker(value):
        return False
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 10**9):
        return False
    return judge is None or judge.search(value) is not None


def _values(rng: random.Random, schema: dict) -> list[str]:
    """Values near the schema: pieces of its pattern, random text, lengths either side of the
    bounds, marker spellings and their prefixes."""
    pattern = schema.get("pattern", "")
    out = candidates(pattern, rng, 60) if pattern else []
    for n in range(0, schema.get("maxLength", 6) + 3):
        out.append("".join(rng.choice("ab<>/é日🙂\n ") for _ in range(n)))
    for marker in GLM_MARKERS:
        out += [marker, "x" + marker, marker[:-1], "a" + marker[: rng.randint(1, len(marker))]]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_raw_values_are_accepted_exactly_when_len_and_re_agree(seed: int) -> None:
    rng = random.Random(seed)
    schema, judge = random_string_schema(rng)
    tool_format = FORMATS[seed % 2]
    special_root = build_root(_spec(schema, tool_format), SPECIAL.special_ids)
    plain_root = build_root(_spec(schema, tool_format), {})
    for value in _values(rng, schema):
        want = expected(schema, judge, value)
        assert accepts(special_root, value, SPECIAL.special_ids, tool_format) == want, (
            schema,
            value,
        )
        if not spells_marker(value):  # spelled markers re-split the call in plain text
            assert accepts(plain_root, value, {}, tool_format) == want, (schema, value)

    if judge is None:
        return

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(judge))
    def drawn(value: str) -> None:
        want = expected(schema, judge, value)
        assert accepts(special_root, value, SPECIAL.special_ids, tool_format) == want, value

    drawn()


@pytest.mark.parametrize("seed", range(16))
def test_random_walks_give_values_the_schema_accepts(seed: int) -> None:
    rng = random.Random(1000 + seed)
    # A random walk rarely happens upon an unanchored pattern's match; a bound makes it end.
    schema, judge = random_string_schema(rng, bounded=True)
    tool_format = FORMATS[seed % 2]
    vocab = SPECIAL if seed % 4 < 2 else PLAIN
    decoder = GrammarCache().decoder(_spec(schema, tool_format), vocab)
    text = detokenize(vocab, sample_tokens(decoder, rng, closing=0.5))
    parsed = parse_output(text, tool_format, tools={"t": _tool(schema).parameters})  # type: ignore[arg-type]
    assert parsed.tool_calls and len(parsed.tool_calls) == 1, text
    value = re.search("<arg_value>(.*)</arg_value>", text, re.DOTALL)
    assert value is not None and expected(schema, judge, value.group(1)), (schema, text)


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", ["2024-02-29", "2023-12-31"], ["2023-02-29", '"2024-01-01"', "2024-1-01"]),
        ("ipv4", ["0.0.0.0", "255.10.1.9"], ["256.1.1.1", "01.1.1.1"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
        ("email", ["ada@example.org"], ["ada", "ada@example"]),
    ],
)
def test_formats_hold_in_raw_values(fmt: str, good: list, bad: list) -> None:
    root = build_root(_spec({"type": "string", "format": fmt}), SPECIAL.special_ids)
    assert all(accepts(root, v, SPECIAL.special_ids) for v in good)
    assert not any(accepts(root, v, SPECIAL.special_ids) for v in bad)


def test_a_string_or_integer_keeps_both_spellings_and_the_raw_bound() -> None:
    schema = {"type": ["string", "integer"], "maxLength": 3}
    root = build_root(_spec(schema), SPECIAL.special_ids)
    for value, ok in [("abc", True), ("abcd", False), ("12345", True), ('"ab"', True)]:
        assert accepts(root, value, SPECIAL.special_ids) is ok, value


def test_a_pattern_that_only_matches_by_spelling_a_marker_names_the_field() -> None:
    schema = {"type": "string", "pattern": "^a</arg_value>$"}
    with pytest.raises(InvalidRequestField) as caught:
        build_root(_spec(schema), SPECIAL.special_ids)
    assert caught.value.field == "/tools/0/function/parameters/properties/v/pattern"
    assert "marker" in str(caught.value)


def test_a_marker_only_pattern_on_a_string_or_integer_leaves_the_integer() -> None:
    # Only the string branch is impossible: the request stands, and the value is an integer.
    schema = {"type": ["string", "integer"], "pattern": "^a</arg_value>$"}
    root = build_root(_spec(schema), SPECIAL.special_ids)
    assert accepts(root, "42", SPECIAL.special_ids)
    assert not accepts(root, "a", SPECIAL.special_ids)
    with pytest.raises(InvalidRequestField) as caught:  # malformed bounds are still refused
        build_root(_spec({**schema, "maxLength": -1}), SPECIAL.special_ids)
    assert caught.value.field.endswith("/maxLength")


def test_a_pattern_that_may_spell_a_marker_never_strands_the_walk() -> None:
    # After "a<tool_cal", an "l" could only go on to spell "<tool_call>": it is refused there,
    # not one byte later, when nothing but ">" would be left (a state with no allowed token).
    schema = {"type": "string", "pattern": r"^(a<tool_call>|a<tool_cal[a-k]|b)$"}
    root = build_root(_spec(schema), SPECIAL.special_ids)
    assert accepts(root, "a<tool_calk", SPECIAL.special_ids)
    assert accepts(root, "b", SPECIAL.special_ids)
    assert not accepts(root, "a<tool_call>", SPECIAL.special_ids)
    head, _, _ = _call("", "glm47")
    state = _feed_text(initial_state(root), head + "a<tool_cal", SPECIAL.special_ids)
    assert advance(state, ord("k")) and not advance(state, ord("l"))
    for seed in range(8):
        decoder = GrammarCache().decoder(
            _spec({"type": "string", "pattern": "^a<tool_cal(l>|[a-k])?$"}), SPECIAL
        )
        text = detokenize(SPECIAL, sample_tokens(decoder, random.Random(seed), closing=0.2))
        assert re.search(r"<arg_value>a<tool_cal[a-k]?</arg_value>", text), text


def test_an_unsatisfiable_pattern_is_ignored_and_the_length_kept() -> None:
    root = build_root(_spec({"type": "string", "pattern": "^abc$", "maxLength": 2}), {})
    assert accepts(root, "xy", {}) and not accepts(root, "abc", {})


def test_a_const_string_is_the_only_value() -> None:
    root = build_root(_spec({"type": "string", "const": "Paris"}), SPECIAL.special_ids)
    assert accepts(root, "Paris", SPECIAL.special_ids)
    assert not accepts(root, "Paris!", SPECIAL.special_ids)


def test_bad_length_keywords_are_named_as_on_the_json_path() -> None:
    with pytest.raises(InvalidRequestField) as caught:
        build_root(_spec({"type": "string", "maxLength": -1}), SPECIAL.special_ids)
    assert caught.value.field == "/tools/0/function/parameters/properties/v/maxLength"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 6},
        {"type": "string", "minLength": 2, "maxLength": 9, "pattern": r"[a-z ]+"},
        {"type": "string", "format": "date"},
    ],
)
def test_fast_masks_equal_reference_for_bounded_raw_values(schema: dict) -> None:
    rng = random.Random(str(schema))
    grammar = Grammar(build_root(_spec(schema), SPECIAL.special_ids))
    decoder = ConstrainedDecoder(grammar, SPECIAL)
    for _ in range(30):
        if decoder.is_finished:
            break
        state = decoder.state
        sid = grammar.intern(state)
        mask = compute_mask(grammar, SPECIAL, sid)
        assert mask == reference_mask(state, SPECIAL)
        decoder.advance(rng.choice(mask.token_ids()))


MARKER_ATOMS = ["<", ">", "/", "a", "t", "x", "_", "tool_call", "arg_", "key", "value", "."]
MARKER_ATOMS += ["[^>]", "[<a-z]", "[/_]", "é", "(</|<)", "(tool_call>|arg_key>)"]
MARKER_ATOMS += ["<tool_call", "</arg_value", "<arg_ke[xy]", ">", "[>y]", "(<tool_call>|ab)"]
MARKER_ATOMS += ["<arg_key[>x]", "(</arg_value>)?", "</tool_call[>y]?", "<arg_value>"]


def _marker_pattern(rng: random.Random) -> str:
    items = []
    for _ in range(rng.randint(1, 5)):
        atom = rng.choice(MARKER_ATOMS)
        if rng.random() < 0.2:
            atom = f"({atom}|{rng.choice(MARKER_ATOMS)})"
        items.append(atom + rng.choice(["", "", "?", "*", "+", "{1,2}"]))
    return "".join(items)


def _pending(text: str) -> str | None:
    """Reference guard: None once a marker is spelled, else the longest suffix of ``text`` that
    is a proper prefix of a marker."""
    if any(text.endswith(m) for m in GLM_MARKERS):
        return None
    for start in range(len(text) + 1):
        tail = text[start:]
        if any(m.startswith(tail) and m != tail for m in GLM_MARKERS):
            return tail
    return ""


def _reference_live_pairs(regex) -> tuple[set, set]:  # noqa: ANN001
    """Every (state, pending) pair reachable from the start, and those from which the final
    state is reachable: the product built in full and trimmed by a plain fixpoint."""
    succ: dict[tuple[int, str], set] = {}
    todo = [(s, "") for s in regex.start]
    while todo:
        pair = todo.pop()
        if pair in succ:
            continue
        state, pending = pair
        out = succ[pair] = set()
        for chars, targets in regex.edges[state]:
            nexts = {_pending(pending + chr(c)) for c in range(0x80) if c in chars}
            if any(hi >= 0x80 for _, hi in chars.ranges):
                nexts.add("")  # any other character ends a pending marker prefix
            for nxt in nexts - {None}:
                out |= {(t, nxt) for t in targets}
        todo += out
    live = {p for p in succ if p[0] == regex.final}
    changed = True
    while changed:
        changed = False
        for pair, out in succ.items():
            if pair not in live and out & live:
                live.add(pair)
                changed = True
    return set(succ), live


@pytest.mark.parametrize("seed", range(100))
def test_liveness_equals_the_trimmed_full_product(seed: int) -> None:
    rng = random.Random(seed)
    while True:
        pattern = _marker_pattern(rng)
        low = rng.randint(0, 3)
        length = (low, low + rng.randint(0, 8) if rng.random() < 0.5 else None)
        try:
            regex = compile_regex(pattern, length=length)
            break
        except RegexError:
            continue
    pairs, live = _reference_live_pairs(regex)
    if not any((s, "") in live for s in regex.start):
        with pytest.raises(SpellsForbidden):
            Liveness(regex, Avoider(GLM_MARKERS))
        return
    fast = Liveness(regex, Avoider(GLM_MARKERS))
    for pair in sorted(pairs, key=lambda p: rng.random()):  # memo filled in any order
        assert fast.live(pair) == (pair in live), (pattern, length, pair)


@pytest.mark.parametrize("choice", ["required", "named"])
def test_the_request_is_refused_when_read_naming_its_own_tool_index(choice: str) -> None:
    def tool(name: str, city: dict) -> dict:
        parameters = {"type": "object", "properties": {"city": city}}
        return {"type": "function", "function": {"name": name, "parameters": parameters}}

    marker_only = {"type": "string", "pattern": "<arg_key>"}
    tools = [tool("ok", {"type": "string"}), tool("bad", marker_only)]
    named = {"type": "function", "function": {"name": "bad"}}
    request = parse_chat_request(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "tools": tools,
            "tool_choice": named if choice == "named" else "required",
        }
    )
    assert constraint_for(request, tool_format="kimi", reasoning="off") is not None
    with pytest.raises(InvalidRequestField) as caught:
        constraint_for(request, tool_format="glm47", reasoning="off")
    assert caught.value.field == "/tools/1/function/parameters/properties/city/pattern"
