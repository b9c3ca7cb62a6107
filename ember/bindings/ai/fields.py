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
