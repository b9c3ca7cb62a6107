"""Max relative logit error of ember vs transformers over many fresh seeds, per oracle case.

PYTHONPATH=. python -m tests.models.oracle_report [--seeds 20]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import torch

from ember.models.loader import load_model
from tests.models import tiny
from tests.models.test_oracle import CASES, _hf_logits, _hf_model


@torch.no_grad()
def case_error(case: str, seed: int) -> float:
    hf = _hf_model(CASES[case], seed)
    with tempfile.TemporaryDirectory() as directory:
        hf.save_pretrained(directory)
        ours = load_model(Path(directory)).model
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, hf.config.vocab_size, (2, 12), generator=gen)
    return tiny.relative_error(ours.reference_forward(ids), _hf_logits(hf, ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    for case in sorted(CASES):
        errors = [case_error(case, random.randrange(2**31)) for _ in range(args.seeds)]
        print(f"{case:<22} max {max(errors):.2e}  mean {sum(errors) / len(errors):.2e}")


if __name__ == "__main__":
    main()
