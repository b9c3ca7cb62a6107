"""``SamplingParams``: the sampling fields of a chat-completions request, typed and validated.

Fields, ranges and defaults follow the OpenAI-compatible schema Workers AI uses for Kimi and GLM
(reference/workers-api.md §1.4): ``temperature`` >= 0 (default 1; Workers AI's cap of 2 is the
gateway's, the engine has none, as SGLang and vLLM), ``top_p`` 0-1 (1),
``frequency_penalty``/``presence_penalty`` -2..2 (0), ``stop`` a string or 1-4 strings,
``logprobs`` bool with ``top_logprobs`` 0-20, ``seed``; every numeric field also accepts null
(= default), and ``logit_bias`` maps token ids to -100..100. Engine extensions as vLLM/SGLang
name them: ``top_k`` (0 or -1 = off), ``min_p`` (0-1), ``repetition_penalty`` (> 0, 1 = off;
0 itself is refused, it would divide by zero; Workers AI's cap of 2 is the gateway's),
``min_tokens``, ``stop_token_ids``, ``ignore_eos``.
``max_completion_tokens`` wins over the deprecated ``max_tokens``. Unknown keys are ignored (the
request body carries messages, tools, ...).

Each bad value raises ``InvalidModelInput`` naming the field, the allowed range and the value.
The HTTP front end validates with ``ember.models.api.parse_sampling`` (JSON-pointer paths, OpenAI
error bodies) and converts with ``SamplingParams.from_options``; ``from_request`` is for callers
holding a plain dict (the engine's Python API, tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ember.errors import InvalidModelInput
from ember.models.api.chat_request import SERVER_MAX_STOP_STRINGS, SamplingOptions
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.stop_regex import (
    STOP_REGEX_DIALECT,
    STOP_REGEX_LIMIT,
    StopRegex,
    StopRegexBuild,
    StopRegexesTooLarge,
    edge_targets,
    over_cap,
)

MAX_STOP_STRINGS = 4  # a request body's ``stop`` (OpenAI's and Workers AI's schema)
# What the engine takes: SGLang's /generate has no cap of 4, and ember's parser allows 16.
MAX_ENGINE_STOP_STRINGS = SERVER_MAX_STOP_STRINGS
MAX_TOP_LOGPROBS = 20
LOGPROBS_MODES = ("raw", "processed", "processed_cut")
# torch.Generator.manual_seed accepts this range (negative seeds are folded in).
_SEED_MIN, _SEED_MAX = -(2**63), 2**64 - 1
# Below this a temperature is greedy: dividing logits by it overflows float32 (vLLM uses 1e-5).
GREEDY_TEMPERATURE = 1e-5


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How to pick each next token for one request, and when to stop."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    min_p: float = 0.0  # drop tokens below min_p * the top token's probability
    seed: int | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    max_tokens: int | None = None  # None: the engine caps by the context window; 0: prefill only
    min_tokens: int = 0  # EOS, stop ids and stop strings are ignored before this many tokens
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, -100..100) added to the logits
    stop: tuple[str, ...] = ()  # "" (SGLang's /generate) matches after the first token
    # SGLang's: patterns found in the output text (constrain/stop_regex.py). Strings are
    # compiled here, where the params are made (a request's parse), never on the step thread.
    stop_regex: tuple[StopRegex, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0
    ignore_eos: bool = False
    # The prompt's logprobs (vLLM's prompt_logprobs): None off, else how many alternatives per
    # position; scored from prompt token ``prompt_logprobs_start`` (>= 1) on.
    prompt_logprobs: int | None = None
    prompt_logprobs_start: int = 1
    # raw: log_softmax of the model's logits (vLLM's default); processed: after logit_bias,
    # penalties and temperature (SGLang's /generate); processed_cut: that, then the top-k /
    # top-p / min-p cut, the exact distribution drawn from (vLLM's processed_logprobs).
    logprobs_mode: str = "raw"
    # vLLM's: only these ids may be sampled (None: any).
    allowed_token_ids: tuple[int, ...] | None = None
    # vLLM's bad_words as token sequences: a sequence's last token is banned while the output
    # ends with the rest of it (a one-token sequence is always banned).
    bad_words_token_ids: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        # No upper bound, as SGLang's and vLLM's SamplingParams: Workers AI's cap of 2 is the
        # AI gateway's (parse_sampling), not the engine's.
        _check_number("temperature", self.temperature, 0.0, math.inf)
        _check_number("top_p", self.top_p, 0.0, 1.0)
        _check_number("min_p", self.min_p, 0.0, 1.0)
        _check_number("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _check_number("presence_penalty", self.presence_penalty, -2.0, 2.0)
        _check_number("repetition_penalty", self.repetition_penalty, 0.0, math.inf, open_low=True)
        if not _is_int(self.top_k) or self.top_k < -1:
            _fail("top_k", "an integer >= 1, or 0 / -1 to disable", self.top_k)
        if self.seed is not None and not (
            _is_int(self.seed) and _SEED_MIN <= self.seed <= _SEED_MAX
        ):
            _fail("seed", f"an integer between {_SEED_MIN} and {_SEED_MAX}", self.seed)
        # 0 is a prompt-only pass (SGLang's max_new_tokens 0, vLLM's echo with max_tokens 0:
        # scoring a prompt); the HTTP routes decide where a client may ask for it.
        if self.max_tokens is not None and not (_is_int(self.max_tokens) and self.max_tokens >= 0):
            _fail("max_tokens", "an integer >= 0", self.max_tokens)
        if self.prompt_logprobs is not None and not (
            _is_int(self.prompt_logprobs) and 0 <= self.prompt_logprobs <= MAX_TOP_LOGPROBS
        ):
            _fail(
                "prompt_logprobs",
                f"an integer between 0 and {MAX_TOP_LOGPROBS}",
                self.prompt_logprobs,
            )
        if not _is_int(self.prompt_logprobs_start) or self.prompt_logprobs_start < 1:
            _fail("prompt_logprobs_start", "an integer >= 1", self.prompt_logprobs_start)
        if not _is_int(self.min_tokens) or self.min_tokens < 0:
            _fail("min_tokens", "an integer >= 0", self.min_tokens)
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            _fail("min_tokens", f"at most max_tokens ({self.max_tokens})", self.min_tokens)
        for token, bias in self.logit_bias:
            if not (_is_int(token) and token >= 0):
                _fail("logit_bias", "an object whose keys are token ids (integers >= 0)", token)
            _check_number(f"logit_bias[{token}]", bias, -100.0, 100.0)
        stop_expected = f"a string or a list of 1 to {MAX_STOP_STRINGS} of them"
        if len(self.stop) > MAX_ENGINE_STOP_STRINGS:
            _fail("stop", f"a list of at most {MAX_ENGINE_STOP_STRINGS} strings", list(self.stop))
        for item in self.stop:
            if not isinstance(item, str):
                _fail("stop", stop_expected, item)
        if len(self.stop_regex) > MAX_ENGINE_STOP_STRINGS:
            _fail("stop_regex", f"at most {MAX_ENGINE_STOP_STRINGS} patterns", self.stop_regex)
        regexes = (self.stop_regex,) if isinstance(self.stop_regex, str) else self.stop_regex
        build = StopRegexBuild()  # the patterns given as text, within the stop regexes' cap
        compiled = tuple(_stop_regex(item, build) for item in regexes)
        object.__setattr__(self, "stop_regex", compiled)
        over = over_cap(  # compiled ones handed in count as well
            sum(len(regex.automaton.edges) for regex in compiled),
            sum(edge_targets(regex.automaton) for regex in compiled),
        )
        if over:
            _fail("stop_regex", STOP_REGEX_LIMIT, over)
        for token in self.stop_token_ids:
            if not (_is_int(token) and token >= 0):
                _fail("stop_token_ids", "a list of token ids (integers >= 0)", token)
        for flag in ("logprobs", "ignore_eos"):
            if not isinstance(getattr(self, flag), bool):
                _fail(flag, "true or false", getattr(self, flag))
        if self.allowed_token_ids is not None and not (
            self.allowed_token_ids and all(_is_int(t) and t >= 0 for t in self.allowed_token_ids)
        ):
            _fail("allowed_token_ids", "a non-empty list of token ids", self.allowed_token_ids)
        for word in self.bad_words_token_ids:
            if not (word and all(_is_int(t) and t >= 0 for t in word)):
                _fail("bad_words", "words that are at least one token each", word)
        if self.logprobs_mode not in LOGPROBS_MODES:
            _fail("logprobs_mode", "raw, processed or processed_cut", self.logprobs_mode)
        if not _is_int(self.top_logprobs) or not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            _fail("top_logprobs", f"an integer between 0 and {MAX_TOP_LOGPROBS}", self.top_logprobs)
        if self.top_logprobs and not self.logprobs:
            raise InvalidModelInput(
                "top_logprobs", "top_logprobs requires logprobs to be true, got logprobs false"
            )

    @property
    def greedy(self) -> bool:
        """Whether the next token is simply the most likely one (no randomness is drawn)."""
        return self.temperature < GREEDY_TEMPERATURE or self.top_k == 1

    @property
    def effective_top_k(self) -> int:
        """``top_k`` with the "off" spellings (0, -1) normalised to 0."""
        return max(self.top_k, 0)

    @property
    def has_cut(self) -> bool:
        """Whether a top-k, top-p or min-p cut applies (the draw then sorts the vocabulary)."""
        return self.effective_top_k > 0 or self.top_p < 1.0 or self.min_p > 0.0

    @property
    def has_bans(self) -> bool:
        """Whether some tokens may not be sampled (allowed_token_ids, bad_words)."""
        return self.allowed_token_ids is not None or bool(self.bad_words_token_ids)

    @property
    def has_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
        )

    @classmethod
    def from_request(
        cls,
        body: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] | None = None,
        max_tokens_limit: int | None = None,
    ) -> SamplingParams:
        """From a chat/completions request body; ``defaults`` (e.g. a model's
        generation_config) fill fields the request leaves absent or null."""
        if not isinstance(body, Mapping):
            raise InvalidModelInput("body", f"the request must be a JSON object, got {body!r}")
        merged: dict[str, Any] = {}
        for source in (defaults or {}, body):
            for key, value in source.items():
                if value is not None:
                    merged[key] = value
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in merged.items() if k in names and k not in ("stop", "max_tokens")}
        # The newer name wins; errors name the field the request used.
        limit_field = "max_completion_tokens" if "max_completion_tokens" in merged else "max_tokens"
        limit = merged.get(limit_field)
        if limit is not None:
            upper = max_tokens_limit
            if not _is_int(limit) or limit < 1 or (upper is not None and limit > upper):
                expected = (
                    "an integer >= 1" if upper is None else f"an integer between 1 and {upper}"
                )
                _fail(limit_field, expected, limit)
            values["max_tokens"] = limit
        if "stop" in merged:
            values["stop"] = _stop_strings(merged["stop"])
        if "logit_bias" in merged:
            values["logit_bias"] = _logit_bias(merged["logit_bias"])
        if "stop_token_ids" in merged:
            ids = merged["stop_token_ids"]
            if not isinstance(ids, list | tuple):
                _fail("stop_token_ids", "a list of token ids (integers >= 0)", ids)
            values["stop_token_ids"] = tuple(ids)
        return cls(**values)

    @classmethod
    def from_options(cls, options: SamplingOptions) -> SamplingParams:
        """From the chat API's already validated ``SamplingOptions`` (ember.models.api)."""
        return cls(
            temperature=float(options.temperature),
            top_p=float(options.top_p),
            top_k=options.top_k or 0,
            min_p=float(options.min_p),
            seed=options.seed,
            repetition_penalty=float(options.repetition_penalty),
            frequency_penalty=float(options.frequency_penalty),
            presence_penalty=float(options.presence_penalty),
            max_tokens=options.max_tokens,
            min_tokens=options.min_tokens,
            logit_bias=tuple(sorted((int(t), float(b)) for t, b in options.logit_bias.items())),
            stop=tuple(options.stop),
            stop_regex=tuple(options.stop_regex),
            stop_token_ids=tuple(options.stop_token_ids),
            logprobs=options.logprobs,
            top_logprobs=options.top_logprobs,
            ignore_eos=options.ignore_eos,
            prompt_logprobs=options.prompt_logprobs,
            prompt_logprobs_start=options.prompt_logprobs_start,
            logprobs_mode=options.logprobs_mode,
            allowed_token_ids=options.allowed_token_ids,
        )


def _logit_bias(value: object) -> tuple[tuple[int, float], ...]:
    """OpenAI's ``{"token id": bias}`` object (JSON keys are strings) -> sorted pairs."""
    if not isinstance(value, Mapping):
        _fail("logit_bias", "an object mapping token ids to numbers from -100 to 100", value)
    pairs = []
    for key, bias in value.items():  # type: ignore[union-attr]
        # At most ten digits (token ids are below 2**31): int() refuses over 4,300, a 500.
        digits = isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 10
        token = int(key) if digits else key
        if digits and any(token == earlier for earlier, _ in pairs):
            _fail("logit_bias", "an object with one key per token id", value)
        pairs.append((token, bias))
    return tuple(sorted(pairs, key=lambda pair: str(pair[0])))


def _stop_regex(item: object, build: StopRegexBuild) -> StopRegex:
    """A compiled stop regex as it is; a pattern compiled (the engine's Python API, tests)."""
    if isinstance(item, StopRegex):
        return item
    if not isinstance(item, str):
        _fail("stop_regex", STOP_REGEX_DIALECT, item)
    try:
        return build.add(item, "stop_regex")  # type: ignore[arg-type]
    except RegexError as error:
        raise InvalidModelInput(
            "stop_regex", f"stop_regex must be {STOP_REGEX_DIALECT}, got {item!r} ({error})"
        ) from None
    except StopRegexesTooLarge as error:
        raise InvalidModelInput(
            "stop_regex", f"stop_regex must be {STOP_REGEX_LIMIT}, got {error.got}"
        ) from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(field: str, expected: str, value: object) -> None:
    raise InvalidModelInput(field, f"{field} must be {expected}, got {value!r}")


def _check_number(
    field: str, value: object, low: float, high: float, *, open_low: bool = False
) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (low < value if open_low else low <= value)
        and value <= high
    )
    if not ok:
        lower = "greater than" if open_low else "between"
        if high == math.inf:
            expected = f"a finite number {'>' if open_low else '>='} {low:g}"
        elif open_low:
            expected = f"a number {lower} {low:g} and at most {high:g}"
        else:
            expected = f"a number {lower} {low:g} and {high:g}"
        _fail(field, expected, value)


def _stop_strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    expected = f"a non-empty string or a list of 1 to {MAX_STOP_STRINGS} of them"
    if not isinstance(value, list | tuple) or len(value) > MAX_STOP_STRINGS:
        _fail("stop", expected, value)
    for item in value:  # type: ignore[union-attr]
        # Empty only where SGLang's /generate asks for it (its parser builds the params).
        if not (isinstance(item, str) and item):
            _fail("stop", expected, item)
    return tuple(value)  # type: ignore[arg-type]
