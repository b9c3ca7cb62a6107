"""vLLM's ``bad_words``, as token sequences: which tokens a request may not sample next.

A word is banned as the token sequence(s) it encodes to (the server encodes each word with and
without a leading space, as vLLM does). Its last token is banned whenever the output so far
ends with the rest of the sequence, so a one-token word is banned at every step and a longer
one only where sampling that token would complete it. Only generated tokens count (vLLM's
"past tokens"), never the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence


def banned_words(words: Sequence[Sequence[int]], output: Sequence[int]) -> list[int]:
    """The last tokens of ``words`` that ``output`` is one token away from completing."""
    banned = []
    for word in words:
        prefix = len(word) - 1
        if prefix > len(output):
            continue
        if prefix == 0 or list(output[len(output) - prefix :]) == list(word[:prefix]):
            banned.append(word[-1])
    return banned
