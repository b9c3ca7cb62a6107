"""generation_config.json: a checkpoint's default stop tokens and sampling parameters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.errors import ConfigError
from ember.models.config import ModelConfig


@dataclass(frozen=True, slots=True)
class GenerationConfig:
    """Defaults a request may override. ``None`` means "not set by the checkpoint"."""

    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    do_sample: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_new_tokens: int | None = None

    @classmethod
    def from_model_config(cls, config: ModelConfig) -> GenerationConfig:
        return cls(config.bos_token_id, config.eos_token_ids, config.pad_token_id)

    def to_json(self) -> dict[str, Any]:
        eos: int | list[int] | None = list(self.eos_token_ids) or None
        if eos is not None and len(eos) == 1:
            eos = eos[0]
        out = {
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "pad_token_id": self.pad_token_id,
            "do_sample": self.do_sample,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "max_new_tokens": self.max_new_tokens,
        }
        return {key: value for key, value in out.items() if value is not None}


def read_generation_config(path: Path, fallback: ModelConfig) -> GenerationConfig:
    """Parse ``path`` if it exists; token ids it leaves out come from config.json."""
    base = GenerationConfig.from_model_config(fallback)
    if not path.is_file():
        return base
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(str(path), None, str(exc), "a JSON object") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(str(path), None, type(raw).__name__, "a JSON object")

    def number(key: str, kind: type, minimum: float) -> Any:
        value = raw.get(key)
        if value is None:
            return None
        ok = isinstance(value, int | float) if kind is float else isinstance(value, int)
        if isinstance(value, bool) or not ok or value < minimum:
            raise ConfigError(str(path), key, value, f"a number >= {minimum}")
        return kind(value)

    eos = raw.get("eos_token_id")
    if eos is None:
        eos_ids = base.eos_token_ids
    else:
        values = eos if isinstance(eos, list) else [eos]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
            raise ConfigError(str(path), "eos_token_id", eos, "a token id or a list of token ids")
        eos_ids = tuple(values)
    do_sample = raw.get("do_sample")
    if do_sample is not None and not isinstance(do_sample, bool):
        raise ConfigError(str(path), "do_sample", do_sample, "true or false")
    bos, pad = number("bos_token_id", int, 0), number("pad_token_id", int, 0)
    return GenerationConfig(
        bos_token_id=base.bos_token_id if bos is None else bos,
        eos_token_ids=eos_ids,
        pad_token_id=base.pad_token_id if pad is None else pad,
        do_sample=do_sample,
        temperature=number("temperature", float, 0.0),
        top_p=number("top_p", float, 0.0),
        top_k=number("top_k", int, -1),  # -1: off, as vLLM and SGLang spell it
        min_p=number("min_p", float, 0.0),
        repetition_penalty=number("repetition_penalty", float, 0.0),
        max_new_tokens=number("max_new_tokens", int, 1),
    )
