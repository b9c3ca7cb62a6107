"""The arithmetic behind the serving report (bench/serving*.py, roofline.py, summarize_serving.py):
percentiles and bench_serving's figures, medians over repeats and goal ratios, the KV budget that
makes BF16 limit the batch, the roofline's bytes per decode step, greedy agreement."""

from __future__ import annotations

import math

import pytest
import torch

from bench.roofline import bytes_per_step, measured
from bench.serving import Plan, combine, kv_budget, merge_into, prompts_for, run_server
from bench.serving_accuracy import agreement
from bench.serving_client import RequestResult, RunResult, _percentile, summarize
from bench.serving_probe import batch_summary, parse_metrics
from bench.summarize_serving import goal_ratios, goals_table, integrity_costs, medians
from ember.models.catalog import SHIPPED_CHECKPOINTS
from ember.models.kv.spec import kv_layout_for
from ember.models.loader import load_model
from ember.models.quant import QuantConfig, model_weight_bytes, quantize_model

KIMI = SHIPPED_CHECKPOINTS / "kimi-tiny"
GLM = SHIPPED_CHECKPOINTS / "glm4moe-tiny"


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert _percentile(values, 0.0) == 1.0
    assert _percentile(values, 1.0) == 4.0
    assert _percentile(values, 0.5) == pytest.approx(2.5)
    assert _percentile(values, 0.99) == pytest.approx(3.97)
    assert math.isnan(_percentile([], 0.5))


def test_summarize_follows_bench_serving() -> None:
    done = [
        RequestResult(True, 10, 5, ttft=0.1, e2e=0.5, itls=[0.1, 0.1, 0.1, 0.1]),
        RequestResult(True, 10, 3, ttft=0.3, e2e=0.7, itls=[0.2, 0.2]),
    ]
    failed = RequestResult(False, error="500 boom")
    out = summarize(RunResult([*done, failed], wall=2.0, concurrency=2, stream=True))
    assert (out["completed"], out["failed"], out["errors"]) == (2, 1, ["500 boom"])
    assert out["output_tokens"] == 8 and out["input_tokens"] == 20
    assert out["output_tokens_per_s"] == pytest.approx(4.0)
    assert out["request_throughput"] == pytest.approx(1.0)
    assert out["achieved_concurrency"] == pytest.approx(0.6)
    assert out["ttft_ms"]["p50"] == pytest.approx(200.0)
    # ITL pools every gap of every request; TPOT is per request, (e2e - ttft) / (tokens - 1).
    assert out["itl_ms"]["mean"] == pytest.approx(1000 * 0.8 / 6)
    assert out["tpot_ms"]["mean"] == pytest.approx(1000 * (0.1 + 0.2) / 2)


def _row(server: str, concurrency: int, tok_s: float, **extra) -> dict:
    latency = {"mean": 1.0, "p50": 1.0, "p99": 2.0}
    return {
        "server": server,
        "concurrency": concurrency,
        "output_tokens_per_s": tok_s,
        "output_tokens_per_server_cpu_s": tok_s / 2,
        "ttft_ms": latency,
        "itl_ms": extra.pop("itl_ms", latency),
        "e2e_ms": extra.pop("e2e_ms", latency),
        "load_after": [3.0, 3.0, 3.0],
        "failed": 0,
        **extra,
    }


def test_medians_over_repeats_and_goal_ratios() -> None:
    runs = [
        _row("bf16", 64, 100.0),
        _row("bf16", 64, 300.0),
        _row("bf16", 64, 120.0),
        _row("fp8", 64, 200.0),
        _row("hf-static", 64, 50.0),
        _row("fp8-sampled", 64, 198.0, e2e_ms={"mean": 1, "p50": 1, "p99": 2.2}),
        _row("fp8", 16, 999.0),  # another concurrency: not part of the ratios at 64
    ]
    table = medians(runs)
    assert table[("bf16", 64)]["runs"] == 3
    assert table[("bf16", 64)]["tok_s"] == 120.0  # the median, not the mean (173)
    ratios = {r["label"]: r for r in goal_ratios(table, 64)}
    fp8 = ratios["FP8 KV / BF16 KV throughput"]
    assert fp8["ratio"] == pytest.approx(200 / 120) and fp8["met"] is True
    assert ratios["ember BF16 / HF static batch"]["ratio"] == pytest.approx(2.4)
    assert "ember FP8 / HF naive" not in ratios  # never measured: no ratio, no verdict
    (sampled,) = integrity_costs(table, 64)
    assert sampled["mode"] == "sampled"
    assert sampled["throughput_change"] == pytest.approx(-0.01)
    assert sampled["e2e_p99_change"] == pytest.approx(0.1)


def test_kv_budget_makes_bf16_the_limit() -> None:
    plan = Plan([1, 64], 128, 128, 1.0, 1, kv_limited_batch=32, page_size=16, stream=True,
                hf_naive_requests=8)  # fmt: skip
    for directory in (KIMI, GLM):
        budget = kv_budget(directory, plan)
        assert budget["pages_per_request"] == 16
        assert budget["bf16"]["kv_limited_batch"] == 32
        assert budget["fp8_e4m3"]["kv_limited_batch"] >= 63  # twice as many fit, less the scales
        assert budget["fp8_over_bf16_capacity"] == pytest.approx(2.0, abs=0.01)
        assert budget["bf16"]["bytes_per_token"] == 2 * budget["fp8_e4m3"]["bytes_per_token"]


def test_parse_metrics_and_running_batch() -> None:
    text = (
        "# HELP sglang:num_running_reqs Requests in the running batch.\n"
        '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="b"} 32\n'
        'sglang:e2e_request_latency_seconds_bucket{le="1"} 5\n'
        'ember:num_preemptions_total{model_name="b"} 7\n'
    )
    assert parse_metrics(text) == {
        "sglang:num_running_reqs": 32.0,
        "ember:num_preemptions_total": 7.0,
    }
    assert batch_summary([0, 0, 30, 32, 32, 31, 0]) == {"median": 31.5, "max": 32, "samples": 4}
    assert batch_summary([0.0]) is None


@pytest.mark.parametrize("weights", ["bf16", "int4"])
def test_bytes_per_step_matches_the_model_bytes(weights: str) -> None:
    """A batch that touches every expert and embedding row reads every weight byte once (as
    model_weight_bytes counts them); batch 1 reads k/E of the routed experts and one row."""
    loaded = load_model(KIMI, dtype=torch.bfloat16)
    model, config = loaded.model, loaded.config
    if weights == "int4":
        quantize_model(model, QuantConfig.from_flag("int4", targets="experts"))
    total = model_weight_bytes(model).total
    vocab = config.vocab_size
    assert bytes_per_step(model, config, vocab, 0, "bf16") == pytest.approx(total, rel=1e-6)

    experts = 0
    for name, module in model.named_modules():
        if ".mlp.experts." in name and not list(module.children()):
            experts += model_weight_bytes(module).total
    # The routed experts are most of these models: if they stop being found by name (a
    # regrouped MoE layer), the roofline would charge every expert to every step.
    assert experts > 0.15 * total
    (embedding,) = [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    table = embedding.numel() * embedding.element_size()
    k_over_e = config.moe.num_experts_per_tok / config.moe.n_routed_experts
    one = total - experts - table + experts * k_over_e + table / vocab
    kv = 100 * kv_layout_for(config, "fp8_e4m3").cell_size
    assert bytes_per_step(model, config, 1, 100, "fp8_e4m3") == pytest.approx(one + kv, abs=2)


def test_roofline_reads_the_running_batch() -> None:
    itl = {"mean": 50.0, "p50": 50.0, "p99": 90.0}
    serving = {
        "archs": {
            "kimi": {
                "runs": [
                    _row("bf16", 64, 500.0, itl_ms=itl, running_batch={"median": 32}),
                    _row("bf16", 64, 700.0, itl_ms=itl, running_batch={"median": 30}),
                    _row("fp8", 64, 800.0, itl_ms=itl, running_batch=None),
                ]
            }
        }
    }
    bf16 = measured(serving, "kimi", "bf16", 64)
    assert bf16 is not None
    assert bf16["running_batch"] == 31 and bf16["runs"] == 2
    assert bf16["decode_tokens_per_s"] == pytest.approx(31 / 0.05)
    assert bf16["output_tokens_per_s"] == 600.0
    assert bf16["output_tokens_per_server_cpu_s"] == 300.0
    fp8 = measured(serving, "kimi", "fp8", 64)  # no samples: the concurrency
    assert fp8 is not None and fp8["decode_tokens_per_s"] == pytest.approx(64 / 0.05)
    assert measured(serving, "kimi", "fp8", 16) is None


def test_agreement_counts_positions_prefixes_and_identical_runs() -> None:
    reference = [[1, 2, 3, 4], [5, 6, 7, 8]]
    runs = [[1, 2, 9, 4], [5, 6, 7, 8]]
    out = agreement(runs, reference)
    assert out["positions_equal"] == pytest.approx(7 / 8)
    assert out["sequences_identical"] == pytest.approx(0.5)
    assert out["mean_common_prefix"] == pytest.approx((2 + 4) / 2)
    assert agreement(reference, reference)["positions_equal"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fp8", "hf-static"])
def test_run_server_measures_a_real_server(kind: str, tmp_path) -> None:
    """The benchmark end to end on loopback: a real server subprocess (ember's model server, or
    the HF baseline), the streaming client, the running-batch sampler, the server's figures."""
    plan = Plan([3], 16, 6, 1.0, 1, kv_limited_batch=2, page_size=16, stream=True,
                hf_naive_requests=4)  # fmt: skip
    budget = kv_budget(KIMI, plan)
    prompts = prompts_for(KIMI, 8, plan.input_len)
    assert all(len(p) == 16 for p in prompts) and len({tuple(p) for p in prompts}) == 8
    (row,) = run_server(kind, KIMI, prompts, plan, budget["budget_bytes"])
    assert row["server"] == kind and row["concurrency"] == 3
    assert (row["completed"], row["failed"]) == (4, 0)
    assert row["output_tokens"] == 4 * plan.output_len  # ignore_eos: every token counted
    assert row["input_tokens"] == 4 * plan.input_len
    assert row["ttft_ms"]["p50"] > 0 and row["itl_ms"]["p50"] > 0
    assert row["server_cpu_s"] > 0
    if kind == "fp8":
        figures = row["server_figures"]
        assert figures["kv_dtype"] == "fp8_e4m3"
        assert figures["kv_capacity_tokens"] == budget["fp8_e4m3"]["capacity_tokens"]
        assert figures["integrity_failures"] == 0
    else:
        assert row["server_figures"] == {} and row["running_batch"] is None


def test_append_keeps_earlier_archs_of_the_same_plan() -> None:
    plan = {"concurrency": [1, 64], "input_len": 128}
    previous = {"plan": plan, "machine": {"load_at_start": [5.0]}, "archs": {"kimi": {"a": 1}}}
    fresh = {"plan": dict(plan), "machine": {"load_at_start": [2.0]}, "archs": {}}
    merged = merge_into(previous, fresh)
    assert merged["archs"] == {"kimi": {"a": 1}}
    assert merged["machine"] == {"load_at_start": [2.0]}
    assert merged["earlier_runs"] == [{"load_at_start": [5.0], "archs": ["kimi"]}]
    with pytest.raises(SystemExit, match="plan differs"):
        merge_into(previous, fresh | {"plan": {"concurrency": [64], "input_len": 128}})


def test_goals_table_judges_each_goal() -> None:
    runs = [_row("bf16", 64, 100.0), _row("fp8", 64, 159.0), _row("fp8-sampled", 64, 158.0)]
    serving = {
        "plan": {"concurrency": [1, 64]},
        "archs": {"kimi": {"kv": {"fp8_over_bf16_capacity": 1.998}, "runs": runs}},
    }
    configs = {"fp8_kv": {"bpb_change_vs_bf16": -0.006}, "int4": {"bpb_change_vs_bf16": 0.019}}
    accuracy = {"archs": {"kimi": {"configs": configs}, "glmdsa": {"configs": configs}}}
    header, _, *rows = goals_table(serving, accuracy)
    assert header == "| goal | kimi | glmdsa |"
    table = {row.split(" | ")[0].lstrip("| "): row for row in rows}
    assert "1.998x met | - |" in table["KV tokens FP8 / BF16 at equal bytes (>= 1.99x)"]
    fp8 = next(row for label, row in table.items() if label.startswith("FP8 KV / BF16 KV"))
    assert "1.590x **missed**; 1.590x **missed**" in fp8  # just under 1.6: missed
    sampled = next(row for label, row in table.items() if label.startswith("sampled"))
    assert "-0.6% met" in sampled
    assert "-0.600% **missed**" in table["FP8 KV bits per byte vs BF16 (within 0.5%)"]
    assert "+1.900% met | +1.900% met" in table["INT4 experts bits per byte vs BF16 (within 2%)"]


def test_combine_joins_archs_run_separately() -> None:
    plan = {"concurrency": [1, 64]}
    a = {"plan": plan, "machine": {"load_at_start": [5.0]}, "archs": {"kimi": {"a": 1}}}
    b = {"plan": dict(plan), "machine": {"load_at_start": [7.0]}, "archs": {"glmdsa": {"b": 2}}}
    out = combine([a, b])
    assert out["archs"] == {"kimi": {"a": 1}, "glmdsa": {"b": 2}}
    assert [run["archs"] for run in out["combined_from"]] == [["kimi"], ["glmdsa"]]
    with pytest.raises(SystemExit, match="plans differ"):
        combine([a, b | {"plan": {"concurrency": [64]}}])
