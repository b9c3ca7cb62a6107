"""``ember ai``: the models behind ``env.AI`` and a quick way to run one.

``ember ai models`` lists each id with its architecture, context window, quantization, KV cache
dtype, replicas and whether one is loaded: live from a running ``ember dev`` with ``--url``, else
as the project's config (``ai.models`` in ember.yaml) would serve them. ``ember ai run MODEL
"prompt"`` answers on the terminal, token by token with ``--stream``: through a running server
with ``--url``, else by starting the model here (its loading progress goes to stderr).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from ember.cli.environment import chosen_env, env_option
from ember.cli.failure import json_option
from ember.errors import ConfigError, UserError

URL_HELP = (
    "A running ember to ask: ember dev, or ember serve with your saved login, e.g. "
    "http://127.0.0.1:8787 (env: EMBER_AI_URL)."
)
PROJECT_HELP = "Project whose ember.yaml configures the models (default: the current directory)."


@click.group()
def ai() -> None:
    """Workers AI models served by ember: list them, run one."""


def _project_config(project: Path | None) -> Any:
    """The GatewayConfig of the project's ``ai`` section (defaults when there is none)."""
    from ember.bindings.ai.gateway import GatewayConfig
    from ember.bindings.ai.spec import gateway_config
    from ember.config import find_config_file, load_project

    root = project or Path(".")
    try:
        find_config_file(root)
    except ConfigError:
        if project is not None:
            raise
        return GatewayConfig()
    config = load_project(root, env=chosen_env().name)
    section = next((s for s in config.binding_sections if s.key == "ai"), None)
    if section is None or not isinstance(section.value, dict):
        return GatewayConfig()
    try:
        return gateway_config(section.value, section.file)
    except ConfigError as exc:
        raise section.relocate(exc) from None  # env.NAME.ai... when an environment set it


@ai.command("models")
@click.option("--url", envvar="EMBER_AI_URL", help=URL_HELP)
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help=PROJECT_HELP)
@env_option
@json_option("Print JSON.")
def models(url: str | None, project: Path | None, as_json: bool) -> None:
    """Model ids, architecture, what serves them, context, quantization, KV dtype, replicas.

    SERVED FROM is ember's checkpoint for the id: the shipped ones are ~10M-parameter models
    trained in this repo (the real architecture, text only, not the real model's answers).

    CONTEXT is what a request may use here (prompt and answer together): the id's window on
    Workers AI, capped by what the checkpoint serves; the id's window follows when larger.
    """
    if url:
        from ember.cli.ai_remote import list_models

        rows = list_models(url)
    else:
        rows = asyncio.run(_static_rows(project))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows and url:
        click.echo(_none_served(url))
        return
    header = ("ID", "ARCHITECTURE", "SERVED FROM", "CONTEXT", "QUANT", "KV", "REPLICAS", "LOADED")
    table = [header]
    for row in rows:
        replicas = row.get("replicas") or []
        states = ", ".join(f"{r['describe']} ({r['state']})" for r in replicas)
        table.append(
            (
                row["id"],
                row["architecture"],
                _served_from(row),
                _context(row),
                row["quantization"],
                row["kv_cache_dtype"],
                states,
                "yes" if row["loaded"] else "no",
            )
        )
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    for line in table:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    if not url:
        click.echo("(as configured; nothing is loaded here: pass --url to ask a running ember)")


def _none_served(url: str) -> str:
    """Why the list is empty, and what makes it not (as ``ember serve``'s banner says)."""
    return (
        f"No AI models are served at {url}: env.AI.run there answers 5007. Its ai.models "
        "section names none: ember serve serves what its --config file's ai: {models: {ID: "
        "{}}} names, ember dev what the project's ember.yaml does (`ember ai models` without "
        "--url lists ember's catalog; an id it lacks also needs checkpoint: DIR)."
    )


def _served_from(row: dict[str, Any]) -> str:
    """What answers here: the shipped tiny checkpoints are not the platform's models (they
    read text only, and write text shaped like their training data)."""
    here = row.get("ember") or {}
    if here.get("shipped"):
        return f"{here['checkpoint']} (~10M params, text only)"
    return str(here.get("checkpoint", ""))


def _context(row: dict[str, Any]) -> str:
    """The tokens a request may use here, and the id's own window when that is larger."""
    window = int(row["context_window"])
    served = int(row.get("max_context") or window)
    return f"{served:,}" if served >= window else f"{served:,} (id: {window:,})"


async def _static_rows(project: Path | None) -> list[dict[str, Any]]:
    from ember.bindings.ai.gateway import AIGateway

    gateway = AIGateway(_project_config(project), progress=lambda line: None)
    try:
        return gateway.models()
    finally:
        await gateway.aclose()


@ai.command("run")
@click.argument("model")
@click.argument("prompt")
@click.option("--stream", is_flag=True, help="Print the answer as it is generated.")
@json_option("Print the whole result (or events) as JSON.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Tokens to generate.",
)
@click.option("--system", help="A system message before the prompt.")
@click.option("--temperature", type=float, help="Sampling temperature (default 1).")
@click.option("--no-thinking", is_flag=True, help="Ask the model not to think first.")
@click.option("--ignore-eos", is_flag=True, help="Generate exactly --max-tokens (benchmarks).")
@click.option("--url", envvar="EMBER_AI_URL", help=URL_HELP)
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help=PROJECT_HELP)
@env_option
def run(
    model: str,
    prompt: str,
    stream: bool,
    as_json: bool,
    max_tokens: int,
    system: str | None,
    temperature: float | None,
    no_thinking: bool,
    ignore_eos: bool,
    url: str | None,
    project: Path | None,
) -> None:
    """Ask MODEL (an @cf/... id) PROMPT and print the answer."""
    messages = [{"role": "system", "content": system}] if system else []
    inputs: dict[str, Any] = {
        "messages": [*messages, {"role": "user", "content": prompt}],
        "max_completion_tokens": max_tokens,
    }
    if temperature is not None:
        inputs["temperature"] = temperature
    if no_thinking:
        inputs["chat_template_kwargs"] = {"enable_thinking": False}
    if ignore_eos:
        inputs["ignore_eos"] = True
    if stream:
        inputs["stream"] = True
    printer = _Printer(as_json)
    if url:
        from ember.cli.ai_remote import run_model

        run_model(url, model, inputs, printer.result, printer.event)
    else:
        asyncio.run(_run_local(project, model, inputs, printer))
    printer.end()
    if printer.thought_out:
        _no_answer(model, max_tokens, as_json)


def _no_answer(model: str, max_tokens: int, as_json: bool) -> None:
    """The model spent all of --max-tokens thinking: say so in the CLI's words, the same
    through --url as here (the gateway's own note names the worker's fields and reaches only
    its console). Without --json that is a failure (exit 1): the command prints the answer, and
    a script reading stdout must not take an empty one for it. With --json the result is
    printed whole (finish_reason "length", content null), so the note goes to stderr alone."""
    text = (
        f"no answer: {model} spent all {max_tokens} tokens of --max-tokens thinking (the "
        "thinking is above, on stderr); pass --no-thinking, or raise --max-tokens"
    )
    if as_json:
        click.echo(f"ember: {text}", err=True)
        return
    raise UserError(text)


class _Printer:
    """Reasoning dimmed on stderr, the answer on stdout, each piece as soon as it arrives."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.thinking = False
        self.reasoned = False  # some reasoning arrived
        self.answered = False  # some content or a tool call arrived
        self.finish_reason: str | None = None

    @property
    def thought_out(self) -> bool:
        """The budget ran out while the model was still thinking: no answer at all."""
        return self.finish_reason == "length" and self.reasoned and not self.answered

    def event(self, payload: Any) -> None:
        if isinstance(payload, dict) and payload.get("choices"):
            self._observe(payload["choices"][0], payload["choices"][0].get("delta"))
        if self.as_json:
            click.echo(json.dumps(payload))
            return
        if isinstance(payload, dict) and "response" in payload:  # a classic model's event
            self._classic(payload)
            return
        if not isinstance(payload, dict) or not payload.get("choices"):
            return
        delta = payload["choices"][0].get("delta") or {}
        self._text(delta.get("reasoning_content"), delta.get("content"))
        for call in delta.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name"):
                sys.stdout.write(f"\n[tool call] {function['name']}(")
            sys.stdout.write(function.get("arguments") or "")
        sys.stdout.flush()

    def result(self, result: Any) -> None:
        if isinstance(result, dict) and result.get("choices"):
            self._observe(result["choices"][0], result["choices"][0].get("message"))
        if self.as_json:
            click.echo(json.dumps(result, indent=2))
            return
        if "choices" not in result:  # a classic model: {response, tool_calls, usage}
            self._classic(result)
            return
        message = result["choices"][0]["message"]
        self._text(message.get("reasoning_content"), message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call["function"]
            sys.stdout.write(f"\n[tool call] {function['name']}({function['arguments']})")

    def _observe(self, choice: Any, part: Any) -> None:
        """Note what a choice (whole, or a stream's delta) carried, for ``thought_out``."""
        if not isinstance(choice, dict):
            return
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        if isinstance(part, dict):
            self.reasoned = self.reasoned or bool(part.get("reasoning_content"))
            self.answered = self.answered or bool(part.get("content") or part.get("tool_calls"))

    def _classic(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        self._text(None, response if isinstance(response, str) else json.dumps(response))
        for call in payload.get("tool_calls") or []:
            arguments = json.dumps(call.get("arguments"))
            sys.stdout.write(f"\n[tool call] {call.get('name')}({arguments})")
        sys.stdout.flush()

    def _text(self, reasoning: str | None, content: str | None) -> None:
        if reasoning:
            self.thinking = True
            click.echo(click.style(reasoning, dim=True), err=True, nl=False)
        if content:
            if self.thinking:
                click.echo("", err=True)
                self.thinking = False
            sys.stdout.write(content)
            sys.stdout.flush()

    def end(self) -> None:
        if self.thinking:  # the thinking ended the output: close its line on stderr
            click.echo("", err=True)
            self.thinking = False
        if not self.as_json:
            sys.stdout.write("\n")
            sys.stdout.flush()


def _remote_event(payload: Any, printer: _Printer) -> None:
    from ember.cli.ai_remote import ai_refusal

    if isinstance(payload, dict) and payload.get("errors"):
        error = payload["errors"][0]
        raise ai_refusal(200, int(error.get("code") or 0) or None, str(error.get("message")))
    if payload != "[DONE]":
        printer.event(payload)


async def _run_local(
    project: Path | None, model: str, inputs: dict[str, Any], printer: _Printer
) -> None:
    from ember.bindings.ai.gateway import AIGateway, AIRequestFailed
    from ember.bindings.ai.options import RunOptions
    from ember.bindings.ai.tenant import Tenant
    from ember.bindings.ai.thinking import cut_short_note
    from ember.cli.ai_remote import ai_refusal
    from ember.models.api.sse import parse_sse
    from ember.models.pool.pool import stderr_progress

    quiet = os.environ.get("EMBER_AI_QUIET") == "1"
    gateway = AIGateway(
        _project_config(project), progress=(lambda line: None) if quiet else stderr_progress
    )
    budget_note = cut_short_note(model, inputs)

    def note(line: str) -> None:
        # The CLI says this one itself, in its flags' words (``_no_answer``), both ways.
        if line != budget_note:
            stderr_progress(line)

    try:
        try:
            answer = await gateway.run(
                Tenant.alone("cli"), model, inputs, RunOptions(), note=None if quiet else note
            )
        except AIRequestFailed as exc:
            failure = exc.failure
            raise ai_refusal(failure.status, failure.code.code, failure.description) from None
        if answer.stream is None:
            printer.result(answer.json())
            return
        async for chunk in answer.stream:
            for payload in parse_sse(chunk):
                _remote_event(payload, printer)
    finally:
        await gateway.aclose()
