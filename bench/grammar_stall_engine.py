"""The longest engine step while requests with new schemas arrive: grammars compiled on the engine
thread (as before) against compiled off it (``GrammarBuilds``), in one process, alternating.

The model server's own stack without HTTP (``load_served_model``: glm4moe-tiny, its tokenizer,
``AsyncEngine``, ``ServerSampler``, ``GrammarBuilds``), so that what is timed is the engine
thread's step, not the event loop's request parsing (the same for both). A phase: ``--streams``
plain requests of ``--tokens`` tokens (``ignore_eos``) decode while ``--senders`` clients each
submit, one after the other, a request constrained to an ``enum`` of 1000 strings never seen
before (4 tokens). ``engine``: the request is submitted at once and its grammar compiled by the
sampler on the engine thread at its first step, as ``ServerSampler`` did before; ``builder``: the
request waits for ``GrammarBuilds`` and is submitted with its grammar built. Per phase: every
engine step's duration (p50 / p99 / max) and the plain streams' gaps between outputs (ITL).
``quiet`` (the plain streams alone) gives the floor; the three modes rotate round by round.

    PYTHONPATH=. python -m bench.grammar_stall_engine [--rounds 8]

Writes ``bench/results/grammar_stall_engine.json``: the phases, and per mode the medians over
rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.ai import checkpoint
from bench.ai_load import checkout_commit, load_average
from ember.models.constrain.session import ConstraintSpec, compile_grammar
from ember.models.sampling import SamplingParams
from ember.models.server.loading import ServedModel, load_served_model
from ember.models.server.request_sampling import ServerSampler
from ember.models.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parents[1]
_tags = itertools.count()
MODES = ("engine", "builder", "quiet")


class BuildOnEngine(ServerSampler):
    """``ServerSampler`` plus the way it was before: a spec registered by ``constrain_spec`` is
    compiled by the sampler, on the engine thread, at the request's first step."""

    def __init__(self, served: ServedModel) -> None:
        super().__init__(served.vocab)
        self.specs: dict[str, ConstraintSpec] = {}

    def constrain_spec(self, request_id: str, spec: ConstraintSpec) -> None:
        self.specs[request_id] = spec

    def sample(self, logits, seqs):  # noqa: ANN001, ANN201 - the engine's Sampler seam
        for seq in seqs:
            spec = self.specs.pop(seq.request_id, None)
            if spec is not None:
                assert self.vocab is not None
                self.constrain(seq.request_id, compile_grammar(spec, self.vocab))
        return super().sample(logits, seqs)


def new_spec(chars: int) -> ConstraintSpec:
    """An enum never seen before: 1000 strings of ``chars`` characters (the bounds allow 1000
    values and 120,000 characters in all)."""
    tag = next(_tags)
    filler = "abcdefghij" * (chars // 10 + 1)
    values = [f"s{tag:06d}-v{i:04d}-{filler}"[:chars] for i in range(1000)]
    return ConstraintSpec(json="schema", schema={"enum": values})


async def _drain(served: ServedModel, rid: str, prompt: list[int], params: SamplingParams):
    arrivals = []
    async for _ in served.engine.generate(rid, prompt, sampling=params):
        arrivals.append(time.perf_counter())
    return arrivals


async def _sender(
    served: ServedModel, sampler: BuildOnEngine, mode: str, chars: int, stop, done
) -> None:  # noqa: ANN001, E501
    params = SamplingParams(max_tokens=4, temperature=0.0)
    prompt = served.tokenizer.encode("colour: ")
    while not stop.is_set():
        rid, spec = f"enum-{next(_tags)}", new_spec(chars)
        if mode == "builder":
            grammar = await served.grammars.grammar(spec, rid)
            assert grammar is not None
            sampler.constrain(rid, grammar)
        else:
            sampler.constrain_spec(rid, spec)
        try:
            await _drain(served, rid, prompt, params)
        finally:
            sampler.release(rid)
        done.append(rid)


async def phase(served: ServedModel, sampler: BuildOnEngine, mode: str, args) -> dict:  # noqa: ANN001
    steps: list[float] = []
    step = served.llm.step

    def timed():  # noqa: ANN202 - the engine thread's step, timed
        started = time.perf_counter()
        try:
            return step()
        finally:
            steps.append((time.perf_counter() - started) * 1e3)

    served.llm.step = timed  # type: ignore[method-assign]
    stop, done = asyncio.Event(), []
    try:
        senders = [
            asyncio.create_task(_sender(served, sampler, mode, args.value_chars, stop, done))
            for _ in range(args.senders if mode != "quiet" else 0)
        ]
        await asyncio.sleep(0.1)
        params = SamplingParams(max_tokens=args.tokens, ignore_eos=True, temperature=0.0)
        streams = [
            _drain(served, f"plain-{next(_tags)}", served.tokenizer.encode(f"def f{i}("), params)
            for i in range(args.streams)
        ]
        arrivals = await asyncio.gather(*streams)
        stop.set()
        await asyncio.gather(*senders)
    finally:
        served.llm.step = step  # type: ignore[method-assign]
    gaps = sorted((b - a) * 1e3 for times in arrivals for a, b in itertools.pairwise(times))
    steps.sort()
    return {
        "step_p50_ms": round(statistics.median(steps), 2),
        "step_p99_ms": round(steps[int(0.99 * (len(steps) - 1))], 2),
        "step_max_ms": round(steps[-1], 2),
        "itl_p99_ms": round(gaps[int(0.99 * (len(gaps) - 1))], 2),
        "itl_max_ms": round(gaps[-1], 2),
        "enum_requests": len(done),
    }


def summary(phases: list[dict]) -> list[dict]:
    out = []
    for mode in MODES:
        rows = [p for p in phases if p["mode"] == mode]
        row: dict = {"mode": mode, "rounds": len(rows)}
        for key in rows[0]:
            if key not in ("mode", "round"):
                row[key] = round(statistics.median(r[key] for r in rows), 2)
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument("--value-chars", type=int, default=18, help="per enum value (<= 119)")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "grammar_stall_engine.json"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        settings = ServerSettings(
            model=str(checkpoint(Path(scratch))),
            torch_threads=args.torch_threads,
            kv_cache_bytes=256 * 2**20,
            max_running_requests=64,
        )
        served = load_served_model(settings, lambda message: None)
    sampler = BuildOnEngine(served)
    served.llm.runner.sampler = sampler
    phases: list[dict] = []
    loads = [load_average()]

    async def rounds() -> None:  # one event loop throughout, as in the server
        warm = argparse.Namespace(**{**vars(args), "tokens": 8})
        await phase(served, sampler, "builder", warm)
        for index in range(args.rounds):
            shift = index % len(MODES)
            for mode in MODES[shift:] + MODES[:shift]:
                result = await phase(served, sampler, mode, args)
                phases.append({"mode": mode, "round": index, **result})
                print(f"  {mode:<8} {result}", flush=True)
            loads.append(load_average())

    try:
        asyncio.run(rounds())
    finally:
        served.shutdown()
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "commit": checkout_commit(ROOT),
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "cpus": os.cpu_count(),
        "load_average_per_round": loads,
        "phases": phases,
        "summary": summary(phases),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in data["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
