"""The per-request object the engine calls every decode step, and the cache of compiled
grammars it is made from.

Engine contract, per sequence that has a decoder::

    mask = decoder.allowed_token_mask()     # before sampling (TokenMask, cached per state)
    ... apply to the logits row (torch_masks.apply_token_masks), sample token_id ...
    decoder.advance(token_id)               # after sampling; raises on a masked token
    if decoder.is_finished: stop            # finish_reason "stop"

EOS ids are allowed exactly when the grammar is complete; once nothing but EOS can follow,
``is_finished`` is true and the engine may stop without sampling EOS.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from ember.errors import InternalError
from ember.models.constrain.answer_grammar import text_or_tool_calls, with_reasoning
from ember.models.constrain.automata import Automata
from ember.models.constrain.grammar import DEAD, Grammar, State
from ember.models.constrain.masks import TokenMask, compute_mask
from ember.models.constrain.nodes import SPECIAL_BASE, Choice, Marker, Node
from ember.models.constrain.regex_nodes import RegexText
from ember.models.constrain.schema import DEFAULT_WHITESPACE, any_json_object, compile_schema
from ember.models.constrain.tool_grammars import (
    ReasoningPrefix,
    ToolFormat,
    ToolSignature,
    family_markers,
    tool_calls_grammar,
)
from ember.models.constrain.vocab import TokenVocabulary


class ConstraintViolation(InternalError):
    """The engine fed a token the grammar does not allow (it must sample from the mask)."""


@dataclass(frozen=True)
class ConstraintSpec:
    """What to constrain a request to, independent of any tokenizer.

    ``json``: ``None`` (no JSON constraint), ``"object"`` (any JSON object) or ``"schema"``
    (``schema`` holds it). ``regex``: instead of JSON, text matching this pattern in full
    (SGLang's and vLLM's ``regex``). ``tools``: when non-empty, tool calls in ``tool_format`` are
    allowed; ``tools_required`` makes them the only option (``tool_choice`` required or named:
    for a named tool, ``tools`` holds just that one). With ``json`` set and tools not
    required, the output is either JSON or tool calls; with ``text`` instead, content then
    tool calls or nothing (``tool_choice`` auto with a strict tool). ``reasoning``: whether a free
    ``<think>`` block comes first (see ``with_reasoning``).
    """

    json: TypingLiteral["object", "schema"] | None = None
    schema: object = None
    regex: str | None = None  # the whole output (after any <think> block) must match it
    regex_path: str = "/regex"  # the field it came from, named if its build is refused
    tools: tuple[ToolSignature, ...] = ()
    tools_required: bool = False
    # tool_choice auto with a strict tool: content, or content then calls (text_or_tool_calls)
    text: bool = False
    tool_format: ToolFormat = "glm47"
    parallel_tool_calls: bool = True
    reasoning: ReasoningPrefix = "off"
    schema_path: str = "/response_format/json_schema/schema"
    schema_strict: bool = True  # False: response_format's strict: false (ResponseFormat)
    whitespace: int = DEFAULT_WHITESPACE
    first_call_index: int = 0  # Kimi: tool calls already in the conversation (ids go on)

    def key(self) -> str:
        """A canonical string for caching compiled grammars."""
        return json.dumps(
            {
                "json": self.json,
                "schema": self.schema,
                "schema_strict": self.schema_strict,
                "regex": self.regex,
                "tools": [[t.name, t.parameters, t.strict] for t in self.tools],
                "required": self.tools_required,
                "text": self.text,
                "format": self.tool_format,
                "parallel": self.parallel_tool_calls,
                "reasoning": self.reasoning,
                "ws": self.whitespace,
                "first_call": self.first_call_index,
            },
            sort_keys=True,
            default=str,
        )


def build_root(spec: ConstraintSpec, special_ids: Mapping[str, int]) -> Node:
    """The grammar's root node for a spec (raises ``InvalidRequestField`` on a bad schema)."""
    marker = Marker(dict(special_ids))
    # With tools in play, the output parser splits on the family's markers: no JSON string
    # and no reasoning text may spell one.
    forbidden = family_markers(spec.tool_format) if spec.tools else ()
    body: Node | None = None
    # One automaton budget for the request's schema and all its tools' (automata.py).
    automata = Automata()
    if spec.json == "object":
        body = any_json_object(spec.whitespace, forbidden)
    elif spec.json == "schema":
        body = compile_schema(
            spec.schema,
            path=spec.schema_path,
            strict=spec.schema_strict,
            ws=spec.whitespace,
            forbidden=forbidden,
            automata=automata,
        )
    elif spec.regex is not None:
        # Through the budget and the process's cache, as the request's check built it
        # (regex_fields.py): found there, not built again; dropped since, built again within
        # the budget by the compile worker, never unbounded in this thread (review43).
        body = RegexText(automata.regex(spec.regex, spec.regex_path))
    if spec.tools and (spec.tools_required or body is not None or spec.text):
        calls = tool_calls_grammar(
            spec.tools,
            marker,
            tool_format=spec.tool_format,
            parallel=spec.parallel_tool_calls,
            ws=spec.whitespace,
            first_index=spec.first_call_index,
            forced=spec.tools_required,
            automata=automata,
        )
        if spec.tools_required:
            body = calls
        elif body is not None:
            body = Choice([body, calls])
        else:
            body = text_or_tool_calls(calls, marker, spec.tool_format)
    if body is None:
        raise ValueError(
            "a ConstraintSpec without JSON, a regex or required tools constrains nothing"
        )
    return with_reasoning(body, marker, spec.reasoning, forbidden=forbidden)


def compile_grammar(spec: ConstraintSpec, vocab: TokenVocabulary) -> Grammar:
    """A spec's grammar with its initial state's token mask already computed: everything a
    request's first step would otherwise pay for. The model server runs this off the engine
    thread (``server.grammar_builds``) and hands the finished grammar over whole."""
    grammar = Grammar(build_root(spec, vocab.special_ids))
    compute_mask(grammar, vocab, grammar.intern(grammar.initial))
    return grammar


class ConstrainedDecoder:
    """Per-request matcher state over a shared ``Grammar`` (not thread-safe: one engine loop)."""

    def __init__(self, grammar: Grammar, vocab: TokenVocabulary) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self.state: State = grammar.initial
        self.eos_seen = False
        self._sid = DEAD
        self._epoch = -1

    def _current(self) -> int:
        grammar = self.grammar
        grammar.maybe_reset()
        if self._epoch != grammar.epoch:
            self._sid = grammar.intern(self.state)
            self._epoch = grammar.epoch
        return self._sid

    def allowed_token_mask(self) -> TokenMask:
        if self.eos_seen:
            return TokenMask(0, self.vocab.size)
        return compute_mask(self.grammar, self.vocab, self._current())

    def accepts(self, token_id: int) -> bool:
        return self._next(token_id) != DEAD

    def _next(self, token_id: int) -> int:
        if self.eos_seen:
            return DEAD
        sid = self._current()
        grammar, vocab = self.grammar, self.vocab
        if token_id in vocab.eos_ids:
            return sid if grammar.accepts_end(sid) else DEAD
        if token_id in vocab.special:
            return grammar.next(sid, SPECIAL_BASE + token_id)
        data = vocab.tokens[token_id] if 0 <= token_id < vocab.size else None
        if not data:
            return DEAD
        for byte in data:
            sid = grammar.next(sid, byte)
            if sid == DEAD:
                break
        return sid

    def advance(self, token_id: int) -> None:
        nxt = self._next(token_id)
        if nxt == DEAD:
            raise ConstraintViolation(
                f"token {token_id} ({self.vocab.token_text(token_id)!r}) is not allowed by the "
                "grammar here; sample from allowed_token_mask()"
            )
        if token_id in self.vocab.eos_ids:
            self.eos_seen = True
        self.state = self.grammar.states[nxt]
        self._sid = nxt

    @property
    def is_finished(self) -> bool:
        """True once EOS was taken or the grammar is complete and nothing else can follow."""
        if self.eos_seen:
            return True
        sid = self._current()
        return self.grammar.accepts_end(sid) and not self.grammar.can_continue(sid)

    @property
    def can_end(self) -> bool:
        """True when the output so far is complete (EOS allowed)."""
        return self.eos_seen or self.grammar.accepts_end(self._current())


class GrammarCache:
    """Compiled grammars by (spec, vocabulary), least recently used dropped first. One per
    model server: requests with the same schema share transitions and token masks. Memory is
    bounded: ``capacity`` grammars, each with at most 20,000 cached states and 32 MiB of
    cached masks. Not thread-safe: use it, and the decoders it makes, from one thread. (The
    model server builds its grammars with ``server.grammar_builds`` instead, off the engine
    thread; this cache serves tests, benchmarks and reference implementations.)"""

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self._grammars: OrderedDict[tuple[str, int], Grammar] = OrderedDict()

    def grammar(self, spec: ConstraintSpec, vocab: TokenVocabulary) -> Grammar:
        key = (spec.key(), id(vocab))
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = Grammar(build_root(spec, vocab.special_ids))
            self._grammars[key] = grammar
            if len(self._grammars) > self.capacity:
                self._grammars.popitem(last=False)
        else:
            self._grammars.move_to_end(key)
        return grammar

    def decoder(self, spec: ConstraintSpec, vocab: TokenVocabulary) -> ConstrainedDecoder:
        return ConstrainedDecoder(self.grammar(spec, vocab), vocab)
