"""How many completion tokens a chat answer spent thinking:
``usage.completion_tokens_details.reasoning_tokens``, as OpenAI and Workers AI report it.

Counted on the generated token ids with the output parser's rules (``output_parser``): the
answer starts inside reasoning when the prompt left the model in ``<think>``, may open it with
its first non-blank token when thinking is optional, and never thinks when thinking is off;
reasoning ends at ``</think>`` or, when tools are active, where a tool-call section starts. The
markers themselves are not counted. Counting ids rather than re-tokenizing the reasoning text
gives the tokens that were generated (and billed), whatever the detokenizer merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ember.models.constrain.tool_grammars import ReasoningPrefix

Phase = Literal["detect", "reasoning", "after"]
_START: dict[ReasoningPrefix, Phase] = {
    "inside": "reasoning",
    "optional": "detect",
    "off": "after",
}


@dataclass
class ReasoningCounter:
    """Feed every generated token id in order; ``count`` is the reasoning tokens so far.

    ``begin``: the ``<think>`` id (None: the model cannot open reasoning); ``ends``: the ids
    that close it; ``blank``: whether a token is whitespace only (skipped while detecting).
    """

    phase: Phase
    begin: int | None = None
    ends: frozenset[int] = frozenset()
    blank: Callable[[int], bool] = field(default=lambda token: False)
    count: int = 0

    @classmethod
    def starting(
        cls,
        prefix: ReasoningPrefix,
        *,
        begin: int | None,
        ends: Iterable[int | None],
        blank: Callable[[int], bool],
    ) -> ReasoningCounter:
        phase = _START[prefix]
        if phase == "detect" and begin is None:
            phase = "after"
        closing = frozenset(token for token in ends if token is not None)
        return cls(phase, begin, closing, blank)

    def feed(self, token_ids: Iterable[int]) -> None:
        for token in token_ids:
            if self.phase == "reasoning":
                if token in self.ends:
                    self.phase = "after"
                else:
                    self.count += 1
            elif self.phase == "detect":
                if token == self.begin:
                    self.phase = "reasoning"
                elif not self.blank(token):
                    self.phase = "after"
            else:
                return
