"""SGLang's and vLLM's launch flags on ``ember models serve``: a command copied from their docs
starts (honoured, or accepted where the knob means nothing on ember's engine), a value ember
cannot honour is refused naming the flag, and the served model logs SGLang's periodic
"Decode batch." line and, with ``--log-requests``, one line per request."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from ember.cli.main import cli
from ember.errors import ConfigError
from ember.models.server.settings import ServerSettings
from tests.models.server.live import running_server, server_settings, wait_until
from tests.models.server.served_process import served_process

ASK = {"messages": [{"role": "user", "content": "Write a function."}], "max_tokens": 12}


def _settings_from(args: list[str], monkeypatch: pytest.MonkeyPatch) -> ServerSettings:
    """The settings the CLI builds from ``args`` (the server itself is not started)."""
    seen: list[ServerSettings] = []
    monkeypatch.setattr(
        "ember.models.server.runner.run_server",
        lambda settings, **_: seen.append(settings) or 0,
    )
    # A catalog id: the CLI refuses a MODEL that names nothing before it reaches the server.
    result = CliRunner().invoke(cli, ["models", "serve", "@cf/zai-org/glm-4.7-flash", *args])
    assert result.exit_code == 0, result.output
    return seen[0]


def test_vllm_spellings_are_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings_from(
        [
            "--max-model-len", "2048",
            "--max-num-seqs", "4",
            "--gpu-memory-utilization", "0.5",
            "--max-num-batched-tokens", "512",
            "--block-size", "32",
            "--seed", "9",
            "--tensor-parallel-size", "1",
            "--enable-auto-tool-choice",
            "--enforce-eager",
            "--enable-log-requests",
            "--tool-call-parser", "glm47",
        ],
        monkeypatch,
    )  # fmt: skip
    assert (settings.context_length, settings.max_running_requests) == (2048, 4)
    assert (settings.mem_fraction_static, settings.chunked_prefill_size) == (0.5, 512)
    assert (settings.page_size, settings.random_seed, settings.log_requests) == (32, 9, True)
    assert settings.decode_log_interval == 40  # the default, untouched by --disable-log-stats
    quiet = _settings_from(["--disable-log-stats", "--no-enable-prefix-caching"], monkeypatch)
    assert quiet.decode_log_interval == 0 and quiet.disable_radix_cache
    assert not _settings_from(["--enable-prefix-caching"], monkeypatch).disable_radix_cache


def test_sglang_flags_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings_from(
        [
            "--tp", "1", "--dp-size", "1",
            "--random-seed", "3",
            "--log-level", "warning",
            "--log-requests",
            "--max-prefill-tokens", "256",
            "--schedule-policy", "fcfs",
            "--disable-cuda-graph",
            "--grammar-backend", "xgrammar",
            "--attention-backend", "triton",
            "--reasoning-parser", "glm45",
            "--tool-call-parser", "glm",
            "--decode-log-interval", "10",
            "--trust-remote-code",
        ],
        monkeypatch,
    )  # fmt: skip
    assert settings.random_seed == 3 and settings.log_level == "warning"
    assert settings.step_tokens(4096) == 256 and settings.decode_log_interval == 10
    assert settings.reasoning_parser == "glm45" and settings.tool_call_parser == "glm"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--tp", "2"], "--tp-size: expected 1: ember runs one model replica on one device"),
        (["--dp", "4"], "--dp-size: expected 1"),
        (["--schedule-policy", "lpm"], "'lpm' is not 'fcfs'"),
        (["--reasoning-parser", "qwen3"], "'qwen3' is not one of"),
        (
            ["--max-prefill-tokens", "8", "--max-running-requests", "16"],
            "--max-prefill-tokens: expected >= --max-running-requests (16)",
        ),
    ],
)
def test_what_cannot_be_honoured_is_refused(args: list[str], words: str) -> None:
    result = CliRunner().invoke(cli, ["models", "serve", "m", *args])
    assert result.exit_code != 0
    assert words in result.output + str(result.exception)


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("--max-model-length", "--max-model-len"),
        ("--random_seed", "--random-seed"),
        ("--tensor-parallel", "--tensor-parallel-size"),
    ],
)
def test_unknown_flags_get_a_sensible_suggestion(typo: str, suggestion: str) -> None:
    result = CliRunner().invoke(cli, ["models", "serve", "m", typo, "1"])
    assert result.exit_code == 2
    assert f"No such option '{typo}'" in result.output and f"'{suggestion}'" in result.output


@pytest.mark.parametrize(
    ("flag", "reason"),
    [
        ("--max-loras", "LoRA adapters are not supported"),
        ("--enable-dp-attention", "one device per server: no data-parallel attention"),
        ("--speculative-algorithm", "speculative decoding is not supported"),
        ("--enable-torch-compile", "ember does not torch.compile"),
    ],
)
def test_features_ember_lacks_are_named_not_misspelt(flag: str, reason: str) -> None:
    """Not "Did you mean '--max-total-tokens'?" for a LoRA flag."""
    result = CliRunner().invoke(cli, ["models", "serve", "m", flag, "1"])
    assert result.exit_code == 2
    assert f"{flag} is an SGLang / vLLM flag ember does not take: {reason}" in result.output
    assert "Did you mean" not in result.output


def test_a_parser_of_another_family_is_refused(glm_dir: Path, kimi_dir: Path) -> None:
    for directory, flags, words in (
        (glm_dir, {"tool_call_parser": "kimi_k2"}, "--tool-call-parser: expected glm45, glm47"),
        (kimi_dir, {"tool_call_parser": "glm47"}, "--tool-call-parser: expected kimi_k2"),
        (kimi_dir, {"reasoning_parser": "glm45"}, "--reasoning-parser: expected kimi, kimi_k2"),
    ):
        settings = server_settings(str(directory), **flags)
        with pytest.raises(ConfigError, match=words), running_server(settings):
            pass


def test_chat_template_file_replaces_the_checkpoints(glm_dir: Path, tmp_path: Path) -> None:
    template = tmp_path / "plain.jinja"
    template.write_text(
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    settings = server_settings(str(glm_dir), served_model_name="g", chat_template=str(template))
    with running_server(settings) as live:
        body = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
        tokens = httpx.post(live.url + "/tokenize", json=body, timeout=30).json()["tokens"]
        text = httpx.post(live.url + "/detokenize", json={"tokens": tokens}, timeout=30)
        assert text.json()["prompt"] == "[user] hi\n[assistant]"


def test_random_seed_makes_unseeded_sampling_reproducible(glm_dir: Path) -> None:
    answers = []
    for _ in range(2):
        settings = server_settings(str(glm_dir), served_model_name="g", random_seed=11)
        with running_server(settings) as live:
            body = {**ASK, "temperature": 1.0, "max_tokens": 16}
            texts = [
                httpx.post(
                    live.url + "/v1/completions", json={**body, "prompt": "def"}, timeout=60
                ).json()["choices"][0]["text"]
                for _ in range(2)
            ]
            answers.append(texts)
    assert answers[0] == answers[1]
    assert answers[0][0] != answers[0][1]  # each request draws its own seed


def test_decode_stats_and_request_lines_are_logged(glm_dir: Path) -> None:
    args = ("--decode-log-interval", "2", "--log-requests", "--kv-cache-bytes", "8MiB")
    with served_process(glm_dir, "g", *args) as served:
        answer = httpx.post(served.url + "/v1/chat/completions", json=ASK, timeout=60)
        assert answer.status_code == 200
        wait_until(lambda: any("Finish: rid=" in line for line in served.log), "the log")
    text = "\n".join(served.log)
    assert "Decode batch. #running-req: 1, #token: " in text
    assert "gen throughput (token/s): " in text and "#queue-req: 0" in text
    assert "completion_tokens=12" in text


def test_the_request_line_names_the_callers_request_id(glm_dir: Path) -> None:
    # The AI gateway sends its cf-ai-req-id as x-request-id: the operator ties the two lines.
    log = io.StringIO()
    settings = server_settings(str(glm_dir), served_model_name="g", log_requests=True)
    with running_server(settings, log=log) as live:
        for caller in ("gw-0123abc", "bad id\twith spaces", None):
            headers = {"x-request-id": caller} if caller else {}
            answer = httpx.post(
                live.url + "/v1/chat/completions", json=ASK, headers=headers, timeout=60
            )
            assert answer.is_success
    lines = [line for line in log.getvalue().splitlines() if "Finish: rid=" in line]
    assert len(lines) == 3
    assert lines[0].endswith(", x_request_id=gw-0123abc")
    assert "x_request_id" not in lines[1] and "x_request_id" not in lines[2]


def test_log_level_warning_keeps_info_lines_out(glm_dir: Path) -> None:
    log = io.StringIO()
    settings = server_settings(
        str(glm_dir), decode_log_interval=1, log_requests=True, log_level="warning"
    )
    with running_server(settings, log=log) as live:
        # The request's line is written before its answer goes out.
        assert httpx.post(live.url + "/v1/chat/completions", json=ASK, timeout=60).is_success
    assert "Decode batch." not in log.getvalue() and "Finish: rid=" not in log.getvalue()


def test_tokenizer_path_is_where_the_tokenizer_comes_from(glm_dir: Path, tmp_path: Path) -> None:
    """Its own tokenizer_config.json (here with another chat template) is the one used."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((glm_dir / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}<<{{ m.content }}>>{% endfor %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    settings = server_settings(str(glm_dir), served_model_name="g", tokenizer_path=str(tmp_path))
    with running_server(settings) as live:
        body = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
        tokens = httpx.post(live.url + "/tokenize", json=body, timeout=30).json()["tokens"]
        text = httpx.post(live.url + "/detokenize", json={"tokens": tokens}, timeout=30)
        assert text.json()["prompt"] == "<<hi>>"
        # SGLang's /get_model_info names the tokenizer's directory, not the model's.
        info = httpx.get(live.url + "/get_model_info", timeout=30).json()
        assert info["tokenizer_path"] == str(tmp_path)
        assert info["model_path"] == str(glm_dir)
