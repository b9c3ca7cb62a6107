"""The fewest tokens a text can encode to, known without encoding it.

Each token of a byte-level BPE encoding decodes to a piece of the text, and the pieces put
together are the text: a text of B UTF-8 bytes is at least ceil(B / L) tokens, L being the
byte length of the longest token in the vocabulary (what it decodes to; an added token counts
its text). A server refuses a prompt that cannot fit its window with this, before spending
seconds tokenizing megabytes (vLLM likewise refuses ``len(text)`` characters past
``max_input_tokens * max_chars_per_token`` before it tokenizes).

The pieces cover the text only when the tokenizer loses none of it, which ``longest_token_bytes``
checks on the tokenizer's own description (``tokenizer.json``):

- no normalizer (NFKC turns 3-byte ligatures into 2 bytes; ``Strip`` removes spaces);
- a pre-tokenizer made of parts that keep every character (``ByteLevel``, ``Split`` and
  ``Punctuation`` unless their behavior is ``Removed``, ``Digits``), ``ByteLevel`` among them;
- a BPE model whose vocabulary holds all 256 byte symbols (a missing one is dropped or unknown);
- no added token that swallows the whitespace beside it (``lstrip``, ``rstrip``);
- no truncation configured in the file.

When any of these fails the bound is unknown (None) and callers tokenize as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Pre-tokenizers that split text without dropping any of it (``behavior`` aside).
_KEEPING = frozenset({"ByteLevel", "Split", "Digits", "Punctuation"})


def longest_token_bytes(
    spec: Mapping[str, Any], token_bytes: Sequence[bytes], byte_symbols: Sequence[str]
) -> int | None:
    """L for a tokenizer (``spec``: its ``tokenizer.json`` as a dict; ``token_bytes``: what each
    id decodes to; ``byte_symbols``: the 256 printable stand-ins byte-level BPE uses), or None
    when an encoding could lose part of a text (see the module docstring)."""
    if spec.get("normalizer") is not None or spec.get("truncation") is not None:
        return None
    if not _keeps_text(spec.get("pre_tokenizer")) or not _has_byte_level(spec["pre_tokenizer"]):
        return None
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "BPE" or not isinstance(vocab, Mapping):
        return None
    if any(symbol not in vocab for symbol in byte_symbols):
        return None
    for added in spec.get("added_tokens") or ():
        if added.get("lstrip") or added.get("rstrip"):
            return None
    return max((len(data) for data in token_bytes), default=0) or None


def at_least(text_bytes: int, longest: int) -> int:
    """The fewest tokens ``text_bytes`` bytes of text encode to: ceil(text_bytes / longest)."""
    return -(-text_bytes // longest)


def _keeps_text(pre: Any) -> bool:
    if not isinstance(pre, Mapping):
        return False
    if pre.get("type") == "Sequence":
        return all(_keeps_text(part) for part in pre.get("pretokenizers") or ())
    return pre.get("type") in _KEEPING and pre.get("behavior") != "Removed"


def _has_byte_level(pre: Mapping[str, Any]) -> bool:
    if pre.get("type") == "Sequence":
        return any(_has_byte_level(part) for part in pre.get("pretokenizers") or ())
    return pre.get("type") == "ByteLevel"
