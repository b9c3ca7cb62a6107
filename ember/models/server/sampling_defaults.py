"""The model server's defaults for the sampling fields a request leaves out.

vLLM (``--generation-config auto``, its default) and SGLang (``--sampling-defaults model``, its
default) take them from the checkpoint's generation_config.json: ``temperature``, ``top_p``,
``top_k``, ``min_p``, ``repetition_penalty``, and (vLLM) ``max_new_tokens`` as the default
``max_tokens``. ``--generation-config vllm`` / ``--sampling-defaults openai`` turn them off: the
OpenAI defaults (temperature 1, no cut, no penalty) apply. A request's own value always wins.

As vLLM reads the file (``GenerationConfig.to_diff_dict``), a value equal to Hugging Face's own
default is no default at all: ``top_k: 50`` (HF's default) leaves ``top_k`` off, and
``temperature: 1.0`` changes nothing either way. ``do_sample`` is not read (vLLM does not).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ember.errors import ConfigError
from ember.models.api.chat_request import SamplingOptions
from ember.models.generation import GenerationConfig

FILE = "generation_config.json"
# transformers.GenerationConfig's own defaults: a value equal to one is not a "diff".
_HF_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "top_k": 50, "repetition_penalty": 1.0}
# What the engine takes for each (SamplingParams' ranges), checked once at start.
_RANGES = {
    "temperature": (0.0, float("inf")),
    "top_p": (0.0, 1.0),
    "min_p": (0.0, 1.0),
    "repetition_penalty": (0.0, 2.0),
}


@dataclass(frozen=True, slots=True)
class SamplingDefaults:
    """Each field: the value a request that leaves it out gets; None: the OpenAI default."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int | None = None

    @classmethod
    def from_generation(cls, config: GenerationConfig, directory: Path) -> SamplingDefaults:
        """The defaults in ``config`` (read from ``directory``'s generation_config.json);
        a ConfigError names a value the engine could never sample with."""
        values = {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "top_k": 0 if config.top_k == -1 else config.top_k,  # -1 and 0: off
            "min_p": config.min_p,
            "repetition_penalty": config.repetition_penalty,
        }
        kept = {k: v for k, v in values.items() if v is not None and _HF_DEFAULTS.get(k) != v}
        for key, value in kept.items():
            low, high = _RANGES.get(key, (0, float("inf")))
            bad = value > high or (value <= low if key == "repetition_penalty" else value < low)
            if bad:
                bounds = (
                    f"a number in ({low:g}, {high:g}]"
                    if key == "repetition_penalty"
                    else (f"a number from {low:g} to {high:g}")
                )
                raise ConfigError(str(directory / FILE), key, value, bounds)
        return cls(**kept, max_tokens=config.max_new_tokens)  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, float | int]:
        """The defaults set, by request field name (``max_tokens`` for max_new_tokens)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }

    def fill(self, options: SamplingOptions) -> SamplingOptions:
        """``options`` with the defaults in the fields the request left out. A route's own
        default ``max_tokens`` (16 on completions, 128 on /generate) is capped by the
        checkpoint's, as vLLM takes the smaller; the rest of the context window is the
        ceiling everywhere (checked later)."""
        changes: dict[str, object] = {}
        for name in ("temperature", "top_p", "min_p", "repetition_penalty"):
            value = getattr(self, name)
            if value is not None and name not in options.given:
                changes[name] = value
        if self.top_k is not None and "top_k" not in options.given:
            changes["top_k"] = self.top_k or None  # 0: off, as the request's own 0
        if self.max_tokens is not None and "max_tokens" not in options.given:
            route = options.max_tokens
            changes["max_tokens"] = (
                self.max_tokens if route is None else min(route, self.max_tokens)
            )
        return replace(options, **changes) if changes else options  # type: ignore[arg-type]


def startup_line(defaults: SamplingDefaults) -> str | None:
    """vLLM's warning when the checkpoint's defaults are in use (None when there are none)."""
    values = defaults.as_dict()
    if not values:
        return None
    listed = ", ".join(f"{key}={value:g}" for key, value in values.items())
    return (
        "Default sampling parameters have been overridden by the model's Hugging Face "
        f"generation config recommended from the model creator ({listed}). If this is not "
        "intended, relaunch with `--generation-config vllm` (or `--sampling-defaults openai`)."
    )
