"""A dev-console note for input fields that do nothing, so a typo does not fail in silence.

Workers AI's chat schema for Kimi and GLM accepts fields it does not know and ignores them, so
``max_token: 5`` (for ``max_tokens``) runs to the default length without a word; ember answers
the same way. vLLM logs the fields it ignored; the dev console gets one line naming each, and
the nearest field that works when one is close. Fields that do something in ember are the ones
the gateway forwards to a replica (``dialects.FORWARDED``) and the ones it reads itself; the
platform's fields ember accepts without effect (``store``, ``metadata``...) are not noted.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.dialects import FORWARDED
from ember.bindings.ai.thinking import IGNORED_SPELLINGS

# Read by the gateway itself (the prompt form, raw prompts, LoRA, async batches, the echo).
READ_BY_GATEWAY = frozenset(
    {"prompt", "stream", "model", "raw", "lora", "requests", "request_id", "external_reference"}
)
# In the platform's schema, accepted by ember and without effect on a local model.
PLATFORM_WITHOUT_EFFECT = frozenset(
    {"store", "metadata", "modalities", "audio", "prediction", "web_search_options",
     "service_tier"}
)  # fmt: skip
KNOWN = frozenset(FORWARDED) | READ_BY_GATEWAY | PLATFORM_WITHOUT_EFFECT


def unknown_fields_note(model: str, inputs: Mapping[str, Any]) -> str | None:
    """The note for ``inputs`` fields no part of ember reads (None when there are none).
    The thinking spellings have their own note (``thinking.py``)."""
    unknown = [key for key in inputs if key not in KNOWN and key not in IGNORED_SPELLINGS]
    if not unknown:
        return None
    named = []
    for key in unknown:
        near = difflib.get_close_matches(key, sorted(KNOWN), n=1, cutoff=0.75)
        named.append(f"'{key}' (did you mean '{near[0]}'?)" if near else f"'{key}'")
    return (
        f"{model}: ignored {', '.join(named)}: not a field of Workers AI's chat input "
        "(the platform ignores unknown fields too)"
    )
