"""Where a route's request carries what the engine checks (``RequestFields``), so that an error
names the field the client sent."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestFields:
    """Where a route's request carries what the engine checks, as JSON pointers, so that an
    error names the field the client sent: ``/messages`` in chat, ``/prompt`` in completions,
    ``/text`` or ``/input_ids`` and ``/sampling_params/max_new_tokens`` in ``/generate``."""

    prompt: str = "/messages"
    max_tokens: str = "/max_tokens"
    sampling: str = ""  # the object holding the other sampling fields ("" = the body)
    # engine name -> the request's name, where they differ (SGLang's min_new_tokens)
    renames: tuple[tuple[str, str], ...] = ()

    def pointer(self, engine_field: str) -> str:
        if engine_field in ("prompt", "messages", "input_ids"):
            return self.prompt
        if engine_field == "max_tokens":
            return self.max_tokens
        name = dict(self.renames).get(engine_field, engine_field)
        return f"{self.sampling}/{name}"

    @property
    def max_tokens_name(self) -> str:
        return self.max_tokens.rsplit("/", 1)[-1]

    @property
    def prompt_name(self) -> str:
        return self.prompt.rsplit("/", 1)[-1]


CHAT_FIELDS = RequestFields()
COMPLETION_FIELDS = RequestFields(prompt="/prompt")
