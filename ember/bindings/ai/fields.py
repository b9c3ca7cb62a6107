"""Request fields the AI gateway forwards to a replica, whichever backend serves it."""

from __future__ import annotations

# Sampling fields both ember's model server and SGLang accept on chat and text completions.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "logit_bias",
    "response_format",
    "ignore_eos",
    "min_tokens",
    "user",
)


def platform_sampling_defaults(*, classic: bool) -> dict[str, float | int]:
    """The Workers AI schema's defaults for the model's id (io_schema.py): what the gateway
    sends for each of these fields a caller leaves out. A replica left to choose would take the
    checkpoint's generation_config.json defaults (ember's model server and SGLang both do), and
    the same worker would sample differently here than on the platform. ``top_k`` has no
    documented default: -1 (off, in both servers' spelling) keeps a checkpoint's out too.
    The length is left to the replica for the chat-completions ids: the platform documents no
    default ``max_tokens`` for them (the reference says "model default", unconfirmed), so a
    checkpoint's ``max_new_tokens`` applies there, else the context; classic ids send 256."""
    from ember.bindings.ai.classic import DEFAULT_TEMPERATURE  # classic's own 0.6

    return {
        "temperature": DEFAULT_TEMPERATURE if classic else 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
    }
