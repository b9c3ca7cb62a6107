"""The two chat families ember's checkpoints speak: their special tokens, templates and stops.

Special tokens follow the real models' names and order (Kimi K2's ``[BOS]``/``<|im_*|>``/tool-call
section tokens; GLM-4.x/5's ``[gMASK]``/``<sop>``/role tokens/``<arg_key>``...). They take the top
``NUM_SPECIAL_SLOTS`` ids of the vocabulary, after the shared byte-level BPE tokens, with unused
slots filled by reserved placeholders so that every family has exactly ``VOCAB_SIZE`` ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

VOCAB_SIZE = 8192
NUM_SPECIAL_SLOTS = 64
NUM_BPE_TOKENS = VOCAB_SIZE - NUM_SPECIAL_SLOTS

TEMPLATE_DIR = Path(__file__).parent / "templates"


@dataclass(frozen=True, slots=True)
class ChatFamily:
    """What a chat format needs beyond the shared BPE: special tokens, template, stops."""

    name: str
    special_tokens: tuple[str, ...]
    template_file: str
    bos_token: str | None
    eos_token: str
    pad_token: str
    unk_token: str | None
    stop_tokens: tuple[str, ...]  # generation_config eos_token_id, in order
    doc_start: str  # written before a plain-text document in pretraining data
    doc_end: str  # written after it

    @property
    def chat_template(self) -> str:
        return (TEMPLATE_DIR / self.template_file).read_text(encoding="utf-8")

    def all_special_tokens(self) -> tuple[str, ...]:
        """The family's tokens padded with reserved placeholders to ``NUM_SPECIAL_SLOTS``."""
        free = NUM_SPECIAL_SLOTS - len(self.special_tokens)
        reserved = tuple(f"<|reserved_special_token_{i}|>" for i in range(free))
        return self.special_tokens + reserved


KIMI = ChatFamily(
    name="kimi",
    special_tokens=(
        "[BOS]",
        "[EOS]",
        "<|im_end|>",
        "<|im_user|>",
        "<|im_assistant|>",
        "<|im_system|>",
        "<|im_middle|>",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<think>",
        "</think>",
        "<|media_start|>",
        "<|media_content|>",
        "<|media_end|>",
        "<|media_pad|>",
        "[UNK]",
        "[PAD]",
    ),
    template_file="kimi_k2.jinja",
    bos_token="[BOS]",
    eos_token="[EOS]",
    pad_token="[PAD]",
    unk_token="[UNK]",
    stop_tokens=("<|im_end|>", "[EOS]"),
    doc_start="[BOS]",
    doc_end="[EOS]",
)

GLM = ChatFamily(
    name="glm",
    special_tokens=(
        "<|endoftext|>",
        "[MASK]",
        "[gMASK]",
        "[sMASK]",
        "<sop>",
        "<eop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
        "<|begin_of_image|>",
        "<|end_of_image|>",
        "<|begin_of_video|>",
        "<|end_of_video|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "/nothink",
        "<|begin_of_box|>",
        "<|end_of_box|>",
    ),
    template_file="glm4.jinja",
    bos_token=None,
    eos_token="<|endoftext|>",
    pad_token="<|endoftext|>",
    unk_token=None,
    stop_tokens=("<|endoftext|>", "<|user|>", "<|observation|>"),
    doc_start="[gMASK]<sop>",
    doc_end="<|endoftext|>",
)

FAMILIES = {f.name: f for f in (KIMI, GLM)}
