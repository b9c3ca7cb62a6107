"""When to stop, and what text to show so far: incremental detokenization + stop strings.

``StopChecker(params, decode, eos_token_ids)`` is fed each sampled token and answers with a
``TextDelta``: the text that may be shown now, and whether (and why) the request finished. It is
independent of the tokenizer: ``decode`` is any ``Callable[[Sequence[int]], str]`` (e.g.
``lambda ids: tokenizer.decode(ids, skip_special_tokens=True)``).

- Detokenization is incremental, as HF's and vLLM's streamers do it: decode a short window of
  recent tokens and emit what grew, holding back while the text ends in U+FFFD (a UTF-8
  character split across tokens).
- Stop token ids (``stop_token_ids``, and the EOS ids unless ``ignore_eos``) finish with reason
  ``stop``; the stop token's text is shown only with ``include_stop_str`` (vLLM's
  ``include_stop_str_in_output``, which decodes it as any token: an EOS stays invisible while
  special tokens are skipped).
- Stop strings are matched on the decoded text. Generation stops at the first token after which
  the text contains one; the output ends just before the earliest match (the stop string is not
  shown, as OpenAI does, unless ``include_stop_str``). Text that could still become a stop string
  (a suffix that is a prefix of one) is held back, so a stream never shows part of a stop string;
  it is released as soon as it cannot match any more, or when the request finishes otherwise.
- ``markers``: special tokens an output parser must see (``</think>``, tool-call tokens) while
  the user, with special tokens skipped, never does. Their text is passed through in place but
  is no part of the text stop strings are searched in, as vLLM's detokenizer (which skips them)
  searches: ``stop: ["think"]`` never ends the output inside ``</think>``. A marker is released
  after the text before it; one that comes inside a stop string's match goes with it.
- An empty stop string (SGLang's /generate serves one) is in every text: it matches after the
  first token that may stop, and cuts nothing, as SGLang's trim skips an empty match.
- Stop regexes (SGLang's ``stop_regex``) are checked after each token, once no stop string
  matched: each one's automaton (``constrain/stop_regex.py``, compiled with the params) is
  stepped over the token's new characters only, and a match that ended within the text stops, as
  ``re.search`` on the text would (linear in the text, whatever the pattern). As in SGLang,
  the matched text stays in the output: SGLang trims at the first occurrence of the pattern's
  own text (it looks the pattern up as a stop string), so ember cuts only there too, e.g. at
  ``abc`` for the pattern ``abc``, and never for ``a+``; a pattern's own text is held back as
  a stop string's is, so a stream shows what SGLang's whole answer would.
- ``max_tokens`` finishes with reason ``length`` after the last allowed token (its text is shown,
  unless that token also completed a stop string).
- Before ``min_tokens`` tokens nothing stops the request (as in vLLM); stop strings then match
  only text produced from the ``min_tokens``-th token on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ember.models.constrain.stop_regex import StopScan
from ember.models.sampling.params import SamplingParams

Decode = Callable[[Sequence[int]], str]
FinishReason = Literal["stop", "length"]
_REPLACEMENT = "\ufffd"
_INITIAL_WINDOW = 5  # tokens of context decoded with the first ones (leading-space handling)


class IncrementalDecoder:
    """Turn a stream of token ids into a stream of text pieces with any ``decode`` function."""

    def __init__(self, decode: Decode, context_ids: Sequence[int] = ()) -> None:
        # ``context_ids``: the last prompt tokens, so the first generated token decodes the way it
        # would mid-text (SentencePiece drops a leading space at the very start).
        self._decode = decode
        self._ids = list(context_ids[-_INITIAL_WINDOW:])
        self._prefix_offset = 0
        self._read_offset = len(self._ids)

    def push(self, token_id: int) -> str:
        """Add one token; return the new text it completes ("" while a character is split)."""
        self._ids.append(token_id)
        return self._advance(final=False)

    def flush(self) -> str:
        """Whatever is still held back (a split character decodes as U+FFFD)."""
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> str:
        before = self._decode(self._ids[self._prefix_offset : self._read_offset])
        after = self._decode(self._ids[self._prefix_offset :])
        if len(after) <= len(before) or (after.endswith(_REPLACEMENT) and not final):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return after[len(before) :]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """What one token changed: text to show now, and whether the request is finished."""

    text: str
    finished: bool = False
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None  # the stop string or token id that matched


class StopChecker:
    """Per-request stop handling (see the module docstring)."""

    def __init__(
        self,
        params: SamplingParams,
        decode: Decode,
        eos_token_ids: Collection[int] = (),
        *,
        context_ids: Sequence[int] = (),
        markers: Mapping[int, str] | None = None,
        include_stop_str: bool = False,
    ) -> None:
        self._params = params
        self._markers = dict(markers or {})
        self._include = include_stop_str
        self._stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            self._stop_ids |= set(eos_token_ids)
        self._stops = params.stop
        self._scans = [StopScan(regex) for regex in params.stop_regex]
        # Texts a suffix may be the start of (a regex's own text: SGLang's trim may cut there).
        self._holds = (*params.stop, *(regex.pattern for regex in params.stop_regex))
        self._regex_at = 0  # the text stop regexes have stepped over (from min_tokens on)
        self.regex_steps = 0  # characters stepped, all patterns together (linear in the text)
        self._decoder = IncrementalDecoder(decode, context_ids)
        self._text = ""  # decoded text, markers left out (what stop strings are searched in)
        self._shown = 0  # characters of _text already released
        self._pending: list[tuple[int, str]] = []  # (place in _text, marker text) not released
        self._released = ""  # everything shown so far, markers in place
        self._tokens = 0
        self.finished = False

    @property
    def text(self) -> str:
        """All text released so far."""
        return self._released

    @property
    def num_tokens(self) -> int:
        return self._tokens

    def push(self, token_id: int) -> TextDelta:
        """Feed the next sampled token."""
        if self.finished:
            raise RuntimeError("push() after the request finished")
        self._tokens += 1
        limit = self._params.max_tokens
        if self._tokens < self._params.min_tokens:
            # No stopping yet (the sampler also masks EOS and stop ids): show everything, so a
            # stop string can only match text produced from min_tokens on.
            self._add(token_id)
            self._regex_at = len(self._text)
            if limit is not None and self._tokens >= limit:
                return self._finish("length", None)
            return TextDelta(self._release(len(self._text)))
        if token_id in self._stop_ids:
            if self._include:
                self._add(token_id)
            return self._finish("stop", token_id)
        self._add(token_id)
        match = self._find_stop()
        if match is not None:
            self._cut(*match)
            return self._finish("stop", match[1], flush=False)
        pattern = self._find_regex()
        if pattern is not None:
            at = self._text.find(pattern, self._shown)
            if at >= 0:  # SGLang's trim: the pattern's own text, looked up as a stop string
                self._cut(at, pattern)
            return self._finish("stop", pattern, flush=False)
        if limit is not None and self._tokens >= limit:
            return self._finish("length", None)
        return TextDelta(self._release(len(self._text) - self._held_back()))

    def finish(self) -> TextDelta:
        """End the request for an outside reason (abort, context full): release what is held."""
        return self._finish(None, None)

    def _add(self, token_id: int) -> None:
        marker = self._markers.get(token_id)
        if marker is None:
            self._text += self._decoder.push(token_id)
        else:
            self._pending.append((len(self._text), marker))

    def _cut(self, start: int, stop: str) -> None:
        """End the text at a stop string found at ``start`` (after it with include_stop_str).
        An empty one cuts nothing: SGLang's trim skips an empty match."""
        if not stop:
            return
        end = start + len(stop) if self._include else start
        self._text = self._text[:end]
        self._pending = [(at, marker) for at, marker in self._pending if at <= start]

    def _find_stop(self) -> tuple[int, str] | None:
        # A match cannot start inside released text: we never release a prefix of a stop string.
        best: tuple[int, str] | None = None
        for stop in self._stops:
            at = self._text.find(stop, self._shown)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, stop)
        return best

    def _find_regex(self) -> str | None:
        """The first stop regex (in the request's order, as SGLang checks them) with a match,
        each stepped over the characters new since the last token."""
        if not self._scans:
            return None
        new, self._regex_at = self._text[self._regex_at :], len(self._text)
        found = None
        for scan in self._scans:
            matched, steps = scan.feed(new)
            self.regex_steps += steps
            if matched and found is None:
                found = scan.regex.pattern
        return found

    def _held_back(self) -> int:
        """Length of the longest unreleased suffix that is a proper prefix of a stop string
        (or of a stop regex's own text: SGLang's trim may cut there)."""
        pending = self._text[self._shown :]
        longest = 0
        for stop in self._holds:
            for size in range(min(len(stop) - 1, len(pending)), longest, -1):
                if pending.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _release(self, upto: int) -> str:
        """The text up to ``upto`` not yet released, with the markers that came before it."""
        pieces, at = [], self._shown
        while self._pending and self._pending[0][0] <= upto:
            place, marker = self._pending.pop(0)
            pieces += [self._text[at:place], marker]
            at = max(at, place)
        pieces.append(self._text[at:upto])
        self._shown = max(self._shown, upto)
        piece = "".join(pieces)
        self._released += piece
        return piece

    def _finish(
        self, reason: FinishReason | None, matched: str | int | None, *, flush: bool = True
    ) -> TextDelta:
        if flush:
            self._text += self._decoder.flush()
            # The flushed tail can complete a stop string too.
            match = self._find_stop()
            if match is not None:
                self._cut(*match)
                reason, matched = "stop", match[1]
        self.finished = True
        return TextDelta(self._release(len(self._text)), True, reason, matched)
