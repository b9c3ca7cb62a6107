"""The steps that make the shipped checkpoints, each a function of the repository alone.

``write_corpus_records`` records the corpus split; ``train_checkpoint`` trains one checkpoint and
writes it in the HF layout (config.json, model.safetensors in bfloat16 with float32 router biases,
generation_config.json, tokenizer.json, tokenizer_config.json, special_tokens_map.json);
``evaluate_checkpoint`` measures it on the committed held-out files.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

import ember.models
from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.generation import GenerationConfig
from ember.models.loader import load_model, save_checkpoint
from ember.models.tokenizer import Tokenizer
from ember.models.training.bpe import save_tokenizer_files, train_bpe
from ember.models.training.configs import SEQ_LEN, CheckpointSpec, checkpoint_specs
from ember.models.training.corpus import (
    CorpusMismatch,
    CorpusSplit,
    build_split,
    load_heldout,
    verify_training_files,
    write_records,
)
from ember.models.training.data import document_tokens, pack
from ember.models.training.families import NUM_BPE_TOKENS
from ember.models.training.trainer import make_deterministic, train

CHECKPOINTS_DIR = Path(ember.models.__file__).parent / "checkpoints"
TRAIN_MANIFEST = CHECKPOINTS_DIR / "stdlib-train-manifest.json"
HELDOUT = CHECKPOINTS_DIR / "stdlib-heldout.json"


def specs() -> dict[str, CheckpointSpec]:
    return checkpoint_specs(NUM_BPE_TOKENS)


def write_corpus_records(manifest: Path = TRAIN_MANIFEST, heldout: Path = HELDOUT) -> CorpusSplit:
    split = build_split()
    manifest.parent.mkdir(parents=True, exist_ok=True)
    write_records(split, manifest, heldout)
    return split


def training_split(allow_mismatch: bool, log: Any = print) -> CorpusSplit:
    """The local training files, checked against the committed manifest."""
    split = build_split()
    problems = verify_training_files(split, TRAIN_MANIFEST)
    if problems:
        head = "; ".join(problems[:5]) + (
            f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        )
        message = (
            f"this Python's standard library ({split.python_version}) differs from the one the "
            f"checkpoints were trained on ({TRAIN_MANIFEST.name}): {head}"
        )
        if not allow_mismatch:
            raise CorpusMismatch(message + "; pass --allow-stdlib-mismatch to train anyway")
        log(f"warning: {message}; training will not reproduce the shipped weights")
    return split


def _environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "load_average": os.getloadavg(),
    }


def train_checkpoint(
    name: str,
    out_dir: Path,
    *,
    steps: int | None = None,
    allow_mismatch: bool = False,
    log: Any = print,
) -> dict[str, Any]:
    """Train checkpoint ``name`` into ``out_dir``; returns the measured training record."""
    spec = specs()[name]
    settings = (
        spec.settings
        if steps is None
        else type(spec.settings)(**{**asdict(spec.settings), "steps": steps})
    )
    split = training_split(allow_mismatch, log)
    env_before = _environment()
    make_deterministic(settings.threads, settings.seed)
    base = train_bpe(f.text for f in split.train)
    save_tokenizer_files(base, spec.family, out_dir)
    tokenizer = Tokenizer.from_dir(out_dir)
    documents, stats = document_tokens(tokenizer, spec.family, split, settings.seed)
    windows = pack(documents, SEQ_LEN, settings.seed)
    log(
        f"{name}: {stats.corpus_documents} files ({stats.corpus_tokens} tokens) + "
        f"{stats.chat_documents} chats ({stats.chat_tokens} tokens) -> {len(windows)} windows"
    )
    config = parse_config(spec.hf_config, source=f"{name} (training)")
    torch.manual_seed(settings.seed)
    model = build_model(config)
    report = train(model, windows, settings, log=log)
    generation = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_ids=config.eos_token_ids,
        pad_token_id=config.pad_token_id,
    )
    save_checkpoint(model, out_dir, dtype=torch.bfloat16, generation=generation)
    return {
        "checkpoint": name,
        "settings": asdict(settings),
        "seq_len": SEQ_LEN,
        "parameters": sum(p.numel() for p in model.parameters()),
        "data": {
            **asdict(stats),
            "windows": len(windows),
            "epochs": report.tokens / (len(windows) * SEQ_LEN),
        },
        "tokens_trained": report.tokens,
        "wall_s": report.wall_s,
        "cpu_s": report.cpu_s,
        "final_train_loss": report.final_loss(),
        "loss_every_10_steps": report.losses[::10],
        "indexer_kl_every_10_steps": report.indexer_kls[::10],
        "max_expert_load_every_10_steps": report.max_expert_load[::10],
        "environment_before": env_before,
        "environment_after": _environment(),
        "python_executable_stdlib_version": split.python_version,
        # the arguments only: argv[0] is this machine's absolute path of __main__.py
        "argv": ["python -m ember.models.training", *sys.argv[1:]],
    }


def shipped_dir(name: str) -> Path:
    return CHECKPOINTS_DIR / name


def load_shipped(name: str, directory: Path | None = None) -> tuple[Any, Tokenizer]:
    root = directory or shipped_dir(name)
    return load_model(root).model, Tokenizer.from_dir(root)


def heldout_files() -> tuple:
    return load_heldout(HELDOUT)
