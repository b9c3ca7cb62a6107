"""``python -m ember.models.training``: build the corpus records, train and evaluate checkpoints.

python -m ember.models.training corpus                  # rewrite the committed corpus records
python -m ember.models.training train kimi-tiny --install
python -m ember.models.training eval [NAME ...] [--json bench/results/checkpoints.json]
"""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting burn the shared cores for nothing and slow training
# several-fold when other processes run; must be set before torch loads its OpenMP runtime.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from ember.errors import EmberError  # noqa: E402

CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ember.models.training")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("corpus", help="write the training manifest and held-out texts")
    tr = sub.add_parser("train", help="train one checkpoint")
    tr.add_argument("name")
    tr.add_argument("--out", type=Path, help="work directory (default .ember/training/NAME)")
    tr.add_argument("--steps", type=int, help="override the step count (experiments only)")
    tr.add_argument("--install", action="store_true", help="copy into ember/models/checkpoints")
    tr.add_argument("--record", type=Path, help="write the training record JSON here")
    tr.add_argument("--allow-stdlib-mismatch", action="store_true")
    ev = sub.add_parser("eval", help="evaluate checkpoints on the held-out files")
    ev.add_argument("names", nargs="*")
    ev.add_argument("--dir", type=Path, help="evaluate this directory instead (one name)")
    ev.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    from ember.models.training import pipeline

    try:
        if args.command == "corpus":
            split = pipeline.write_corpus_records()
            print(f"{len(split.train)} training files, {len(split.heldout)} held out")
        elif args.command == "train":
            out = args.out or Path(".ember/training") / args.name
            record = pipeline.train_checkpoint(
                args.name, out, steps=args.steps, allow_mismatch=args.allow_stdlib_mismatch
            )
            _write_json(args.record or out / "training-record.json", record)
            if args.install:
                target = pipeline.shipped_dir(args.name)
                target.mkdir(parents=True, exist_ok=True)
                for name in CHECKPOINT_FILES:
                    shutil.copyfile(out / name, target / name)  # default permissions
                print(f"installed {target}")
        else:
            from ember.models.training.assess import evaluate_checkpoint

            names = args.names or list(pipeline.specs())
            results = [evaluate_checkpoint(n, args.dir) for n in names]
            for r in results:
                base = r["byte_unigram_baseline"]["train_fitted_bits_per_byte"]
                print(
                    f"{r['checkpoint']}: held-out {r['heldout']['bits_per_byte']:.3f} bits/byte "
                    f"(byte-unigram baseline {base:.3f})"
                )
            if args.json:
                _write_json(args.json, {"results": results})
    except EmberError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
