"""Byte-level BPE trained on the training corpus, and the HF tokenizer files of each family.

The BPE part (``NUM_BPE_TOKENS`` ids: the 256 byte symbols plus learned merges) is shared by every
checkpoint; each family then appends its own special tokens at the top of the vocabulary. The
pre-tokenizer splits text like the GPT-4/Kimi/GLM tokenizers do (letters, up to three digits,
punctuation runs, newline runs, whitespace runs that leave one space for the next word), which
suits indented source code, and then maps bytes to printable symbols (byte-level).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from ember.models.training.families import NUM_BPE_TOKENS, ChatFamily

SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
MODEL_MAX_LENGTH = 4096


def _empty_byte_level_bpe() -> Tokenizer:
    tok = Tokenizer(models.BPE(byte_fallback=False, fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int = NUM_BPE_TOKENS) -> Tokenizer:
    """Train the shared BPE (deterministic for a given text sequence)."""
    tok = _empty_byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def family_tokenizer(base: Tokenizer, family: ChatFamily) -> Tokenizer:
    """A copy of the shared BPE with the family's special tokens appended at the top ids."""
    tok = Tokenizer.from_str(base.to_str())
    if tok.get_vocab_size(with_added_tokens=True) != NUM_BPE_TOKENS:
        raise ValueError(f"the shared BPE must have exactly {NUM_BPE_TOKENS} tokens")
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False, single_word=False, lstrip=False)
            for t in family.all_special_tokens()
        ]
    )
    return tok


def _tokenizer_config(tok: Tokenizer, family: ChatFamily) -> dict[str, object]:
    added = {
        str(tok.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in family.all_special_tokens()
    }
    return {
        "added_tokens_decoder": added,
        "bos_token": family.bos_token,
        "eos_token": family.eos_token,
        "pad_token": family.pad_token,
        "unk_token": family.unk_token,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": family.chat_template,
    }


def _special_tokens_map(family: ChatFamily) -> dict[str, str]:
    named = {
        "bos_token": family.bos_token,
        "eos_token": family.eos_token,
        "pad_token": family.pad_token,
        "unk_token": family.unk_token,
    }
    return {k: v for k, v in named.items() if v is not None}


def save_tokenizer_files(base: Tokenizer, family: ChatFamily, out_dir: Path) -> Tokenizer:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json (HF layout)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = family_tokenizer(base, family)
    tok.save(str(out_dir / "tokenizer.json"), pretty=False)
    config = _tokenizer_config(tok, family)
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out_dir / "special_tokens_map.json").write_text(
        json.dumps(_special_tokens_map(family), indent=2) + "\n", encoding="utf-8"
    )
    return tok
