"""A checkpoint's tokenizer: ``tokenizer.json`` through the ``tokenizers`` library, plus the chat
template and special tokens from ``tokenizer_config.json``, in the Hugging Face layout.

Decoding text as it streams out token by token must never split a multi-byte UTF-8 character:
``IncrementalDecoder`` keeps the bytes of an unfinished character until the rest arrives, and its
concatenated output always equals a one-shot ``decode`` of the same ids (the tests check this on
random ids, invalid byte sequences included).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from ember.errors import CheckpointError, InvalidModelInput
from ember.models.chat_template import ChatTemplate
from ember.models.token_floor import longest_token_bytes

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")
# From this many characters on a text is encoded through ``encode_batch_fast``: the binding
# releases the GIL there, while its ``encode`` holds it throughout (a server's event loop froze
# for the 3 s a 2 MB prompt took), and skips the offsets ember never reads (2x faster at 200 KB).
# Shorter texts keep the plain call, so that ordinary requests never start the tokenizers'
# thread pool (a process that forks after using it gets a warning on stderr).
UNLOCKED_ENCODE_CHARS = 16 * 1024


def _byte_level_table() -> dict[str, int]:
    """GPT-2's byte-to-printable map, inverted: printable symbol -> byte value."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror})") from exc
    except ValueError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


@dataclass(frozen=True)
class Tokenizer:
    """Encode, decode and chat-template one checkpoint's text."""

    backend: HFTokenizer
    _plain_backend: HFTokenizer  # same tokenizer, special-token text encoded as plain text
    chat_template: ChatTemplate | None
    special_tokens: Mapping[str, str]  # bos_token/eos_token/... -> token text
    token_bytes: tuple[bytes, ...]  # per id: the bytes it decodes to
    special_ids: frozenset[int]

    @classmethod
    def from_dir(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        tok_file = path / "tokenizer.json"
        if not tok_file.is_file():
            raise CheckpointError(f"{tok_file}: missing (ember reads HF tokenizer.json files)")
        try:
            backend = HFTokenizer.from_file(str(tok_file))
        except Exception as exc:  # the Rust side raises plain Exception
            raise CheckpointError(f"{tok_file}: not a tokenizers file ({exc})") from exc
        config_file = path / "tokenizer_config.json"
        config = _read_json(config_file) if config_file.is_file() else {}
        specials = {k: t for k in SPECIAL_TOKEN_KEYS if (t := _token_text(config.get(k)))}
        template_source = config.get("chat_template")
        jinja_file = path / "chat_template.jinja"
        if template_source is None and jinja_file.is_file():
            template_source = jinja_file.read_text(encoding="utf-8")
        if isinstance(template_source, list):  # HF allows named templates; use "default"
            named = {t.get("name"): t.get("template") for t in template_source}
            template_source = named.get("default")
        template = (
            ChatTemplate(template_source, specials, origin=str(config_file))
            if isinstance(template_source, str)
            else None
        )
        return cls.from_backend(backend, template, specials)

    @classmethod
    def from_backend(
        cls,
        backend: HFTokenizer,
        chat_template: ChatTemplate | None = None,
        special_tokens: Mapping[str, str] | None = None,
    ) -> Tokenizer:
        size = backend.get_vocab_size(with_added_tokens=True)
        added = backend.get_added_tokens_decoder()
        byte_of = _byte_level_table()
        table: list[bytes] = []
        for i in range(size):
            if i in added:
                table.append(added[i].content.encode("utf-8"))
                continue
            piece = backend.id_to_token(i)
            if piece is None:
                table.append(b"")
            elif all(ch in byte_of for ch in piece):
                table.append(bytes(byte_of[ch] for ch in piece))
            else:
                raise CheckpointError(
                    f"token {i} ({piece!r}) is not byte-level; ember needs a byte-level BPE"
                )
        special_ids = frozenset(i for i, t in added.items() if t.special)
        plain = HFTokenizer.from_str(backend.to_str())
        plain.encode_special_tokens = True
        return cls(
            backend, plain, chat_template, dict(special_tokens or {}), tuple(table), special_ids
        )

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    @cached_property
    def control_text_pattern(self) -> re.Pattern[str]:
        """Matches the text of any special (control) token, longest first.

        Built once per tokenizer: decoding every special id and compiling the alternation took
        about half of a chat request's intake when it was done per request."""
        texts = sorted({self.decode([i]) for i in self.special_ids}, key=len, reverse=True)
        return re.compile("|".join(re.escape(t) for t in texts if t))

    @cached_property
    def special_affixes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ids the tokenizer's post-processor puts before and after a text when asked for
        special tokens (HF's ``add_special_tokens``: a BOS, say); ``((), ())`` for none. Found
        by encoding a probe both ways, so any post-processor is read the same way."""
        bare = self.backend.encode("a", add_special_tokens=False).ids
        full = self.backend.encode("a", add_special_tokens=True).ids
        for start in range(len(full) - len(bare) + 1):
            if full[start : start + len(bare)] == bare:
                return tuple(full[:start]), tuple(full[start + len(bare) :])
        return (), ()

    @cached_property
    def max_token_bytes(self) -> int | None:
        """The longest token's byte length, when a text of B bytes is known to encode to at
        least ceil(B / it) tokens (``token_floor``); None when this tokenizer could drop part
        of a text. The model server computes it at load."""
        spec = json.loads(self.backend.to_str())
        return longest_token_bytes(spec, self.token_bytes, tuple(_byte_level_table()))

    def with_special_tokens(self, ids: Sequence[int]) -> list[int]:
        """``ids`` wrapped as HF's ``add_special_tokens=True`` wraps an encoded text."""
        before, after = self.special_affixes
        return [*before, *ids, *after]

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """The vocabulary's own strings for ``ids`` (HF's ``convert_ids_to_tokens``)."""
        self._check_ids(ids)
        return [self.backend.id_to_token(i) or "" for i in ids]

    def token_id(self, token: str) -> int:
        tid = self.backend.token_to_id(token)
        if tid is None:
            raise CheckpointError(f"the tokenizer has no token {token!r}")
        return tid

    def special_id(self, key: str) -> int | None:
        """The id of a named special token (``bos_token``, ``eos_token``...), if set."""
        text = self.special_tokens.get(key)
        return None if text is None else self.token_id(text)

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """Token ids of ``text``. Special-token text in it becomes the special token, unless
        ``allow_special`` is false: then it is encoded as the plain characters it is made of."""
        backend = self.backend if allow_special else self._plain_backend
        if len(text) >= UNLOCKED_ENCODE_CHARS:
            return backend.encode_batch_fast([text], add_special_tokens=False)[0].ids
        return backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        self._check_ids(ids)
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def decode_bytes(self, ids: Sequence[int], skip_special_tokens: bool = False) -> bytes:
        self._check_ids(ids)
        skip = self.special_ids if skip_special_tokens else frozenset()
        return b"".join(self.token_bytes[i] for i in ids if i not in skip)

    def incremental_decoder(self, skip_special_tokens: bool = True) -> IncrementalDecoder:
        return IncrementalDecoder(self, skip_special_tokens)

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text; ``chat_template_kwargs`` (a request's, e.g. ``enable_thinking``) and
        ``kwargs`` reach the template as variables."""
        if self.chat_template is None:
            raise InvalidModelInput(
                "messages", "this model has no chat template; send a prompt instead"
            )
        return self.chat_template.render(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            chat_template_kwargs=chat_template_kwargs,
            **kwargs,
        )

    def _check_ids(self, ids: Sequence[int]) -> None:
        bad = next((i for i in ids if not 0 <= i < len(self.token_bytes)), None)
        if bad is not None:
            raise InvalidModelInput(
                "token_ids", f"token id {bad} is outside the vocabulary (0..{self.vocab_size - 1})"
            )


class IncrementalDecoder:
    """Turns a stream of token ids into text without ever emitting half a UTF-8 character."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> None:
        self._table = tokenizer.token_bytes
        self._skip = tokenizer.special_ids if skip_special_tokens else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, ids: Sequence[int]) -> str:
        """Text completed by these ids (may be empty while a character is unfinished)."""
        if any(not 0 <= i < len(self._table) for i in ids):
            raise InvalidModelInput("token_ids", f"token ids outside the vocabulary: {list(ids)}")
        chunk = b"".join(self._table[i] for i in ids if i not in self._skip)
        return self._utf8.decode(chunk)

    def finish(self) -> str:
        """Whatever is left; an unfinished character becomes U+FFFD."""
        return self._utf8.decode(b"", final=True)
