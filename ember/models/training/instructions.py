"""Instruction pairs: a docstring's request as the user turn, the function as the answer.

Every choice (phrasing, system turn, thinking or not) is drawn from a ``random.Random`` seeded by
the function's own name, so an example never depends on the order in which others were made.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ember.models.training.functions import DocumentedFunction

Message = dict[str, Any]

SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a Python expert. Answer with code.",
    "Answer concisely.",
)
REQUEST_FORMS = (
    "{request}",
    "Write a Python function `{name}`: {request}",
    "Implement `{signature}` in Python. {request}",
    "{request} Please write it in Python.",
    "How would I write `{qualname}`? {request}",
    "Python: {request}",
)


@dataclass(frozen=True, slots=True)
class ChatExample:
    """A conversation whose last assistant turn (``target``) is what the model learns to say."""

    prefix: tuple[Message, ...]
    target: Message
    tools: tuple[Message, ...] | None
    thinking: bool


def rng_for(kind: str, key: str, seed: int) -> random.Random:
    return random.Random(f"{seed}:{kind}:{key}")


def code_block(source: str) -> str:
    return f"```python\n{source}\n```"


def user_request(fn: DocumentedFunction, rng: random.Random) -> str:
    form = rng.choice(REQUEST_FORMS)
    return form.format(
        request=fn.request, name=fn.name, signature=fn.signature, qualname=fn.qualname
    )


def code_answer(fn: DocumentedFunction, rng: random.Random) -> str:
    intro = f"Here is `{fn.name}`:\n\n" if rng.random() < 0.5 else ""
    return intro + code_block(fn.source)


def reasoning_for(fn: DocumentedFunction) -> str:
    return f"The user asks: {fn.request} I will write `{fn.signature}` in Python."


def maybe_system(rng: random.Random, prob: float = 0.3) -> tuple[Message, ...]:
    if rng.random() < prob:
        return ({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)},)
    return ()


def instruction_example(
    fn: DocumentedFunction, seed: int, tools: tuple[Message, ...] | None = None
) -> ChatExample:
    rng = rng_for("instruction", f"{fn.module}.{fn.qualname}", seed)
    thinking = rng.random() < 0.5
    target: Message = {"role": "assistant", "content": code_answer(fn, rng)}
    if thinking:
        target["reasoning_content"] = reasoning_for(fn)
    prefix = (*maybe_system(rng), {"role": "user", "content": user_request(fn, rng)})
    return ChatExample(prefix=prefix, target=target, tools=tools, thinking=thinking)


def instruction_examples(functions: Iterable[DocumentedFunction], seed: int) -> list[ChatExample]:
    return [instruction_example(fn, seed) for fn in functions]
