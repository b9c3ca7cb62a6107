"""The README's `ember ...` commands exist with the flags it names (the click tree, not --help).

Every `ember ...` line of a fenced code block and every inline `ember ...` span is walked down the
command tree: each subcommand must exist (`a|b` alternatives each), and each `--flag` / `-f` after
the command must be one of its options. Removing a flag the README shows, or renaming a command,
fails here until the README says the same. docs/*.md (the pages README links to), BENCHMARKS.md,
examples/README.md and the package READMEs get the same check; every command of the tree must
appear in README.md or docs/*.md, and every flag they name must be an ember option.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ember.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# README's pages: what README moved out (operator material, details) is held to README's checks.
USER_DOCS = (README, *sorted((ROOT / "docs").glob("*.md")))
# Other documents whose `ember ...` commands are held to the same check.
OTHER_DOCS = (
    "BENCHMARKS.md",
    "examples/README.md",
    "ember/runtime/README.md",
    "ember/runtime/platform/README.md",
    "ember/bindings/README.md",
    *(str(path.relative_to(ROOT)) for path in USER_DOCS[1:]),
)

# Flags the README shows for programs other than ember (training, bench, SGLang's launcher,
# vLLM's server).
OTHER_PROGRAMS_FLAGS = {
    "--compressed",
    "--install",
    "--record",
    "--plot",
    "--tp",
    "--enable-request-id-headers",
    "--extra-index-url",  # pip's, in the set-up notes
}


@dataclass(frozen=True)
class Invocation:
    line: int
    text: str
    doc: str = "README.md"


def readme_invocations(text: str, doc: str = "README.md") -> list[Invocation]:
    """`ember ...` commands in fenced code blocks (one per line, `\\` continued, or `&&` part)
    and in inline spans (which may wrap across lines of prose)."""
    found: list[Invocation] = []
    prose: list[str] = []  # the text outside code blocks, blocks blanked to keep line numbers
    in_block = False
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.lstrip().startswith("```"):
            in_block = not in_block
            prose.append("")
            continue
        if not in_block:
            prose.append(raw)
            continue
        prose.append("")
        code = pending + raw.split(" #", 1)[0].rstrip()
        if code.endswith("\\"):
            pending = code[:-1] + " "
            continue
        pending = ""
        for part in re.split(r"&&|;|\s\|\s", code):
            found.extend(_commands_in(part, number, doc))
    joined = "\n".join(prose)
    for match in re.finditer(r"`([^`]+)`", joined):
        line = joined.count("\n", 0, match.start()) + 1
        found.extend(_commands_in(" ".join(match.group(1).split()), line, doc))
    return sorted(found, key=lambda inv: inv.line)


def _commands_in(text: str, line: int, doc: str) -> list[Invocation]:
    """`ember ...` (also `.venv/bin/ember ...`), split where the README lists several with ` · `."""
    out = []
    for piece in text.split(" · "):
        match = re.match(r"\s*(?:\S*/)?ember(\s.*)?$", piece)
        if match:
            out.append(Invocation(line, "ember" + (match.group(1) or "").rstrip(), doc))
    return out


def problems(invocation: Invocation, root: click.Group) -> list[str]:
    """What is wrong with one README command against the click tree (empty: nothing)."""
    try:
        tokens = shlex.split(invocation.text)[1:]
    except ValueError:
        tokens = invocation.text.split()[1:]
    where = f"{invocation.doc}:{invocation.line}: `{invocation.text}`"
    return _walk(root, ["ember"], tokens, where)


def _walk(command: click.Command, path: list[str], tokens: list[str], where: str) -> list[str]:
    if isinstance(command, click.Group) and tokens and not tokens[0].startswith("-"):
        head, rest = tokens[0], tokens[1:]
        if head == "...":
            return _flags_of_any_subcommand(command, path, rest, where)
        out = []
        ctx = click.Context(command, info_name=path[-1])
        for name in head.split("|"):
            sub = command.get_command(ctx, name)
            if sub is None:
                out.append(f"{where}: `{' '.join(path)}` has no subcommand {name!r}")
            else:
                out.extend(_walk(sub, [*path, name], rest, where))
        return out
    options = _option_names(command)
    return [
        f"{where}: `{' '.join(path)}` has no option {flag}"
        for flag in _flags(tokens)
        if flag not in options
    ]


def _flags_of_any_subcommand(
    group: click.Group, path: list[str], tokens: list[str], where: str
) -> list[str]:
    ctx = click.Context(group, info_name=path[-1])
    known: set[str] = set()
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is not None:
            known |= _option_names(sub)
    return [
        f"{where}: no `{' '.join(path)}` subcommand has option {flag}"
        for flag in _flags(tokens)
        if flag not in known
    ]


def _option_names(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def _flags(tokens: list[str]) -> list[str]:
    """`--flag`, `-f`, `[--flag VALUE]`, `--flag=VALUE` -> the flag names."""
    out = []
    for token in tokens:
        token = token.strip("[]()")
        match = re.fullmatch(r"(--?[A-Za-z][\w-]*)(=.*)?", token)
        if match:
            out.append(match.group(1))
    return out


def commands_named(invocation: Invocation, root: click.Group) -> set[tuple[str, ...]]:
    """The command paths a README command names (`kv key put|get` names two)."""
    tokens = invocation.text.split()[1:]
    named: set[tuple[str, ...]] = set()
    frontier: list[tuple[click.Command, tuple[str, ...]]] = [(root, ())]
    for token in tokens:
        groups = [(c, p) for c, p in frontier if isinstance(c, click.Group)]
        if not groups or token.startswith("-") or token == "...":
            break
        frontier = []
        for group, path in groups:
            ctx = click.Context(group, info_name=" ".join(("ember", *path)))
            for name in token.split("|"):
                sub = group.get_command(ctx, name)
                if sub is not None:
                    frontier.append((sub, (*path, name)))
    named.update(path for _, path in frontier if path)
    return named


def leaf_commands(root: click.Group) -> set[tuple[str, ...]]:
    leaves: set[tuple[str, ...]] = set()
    stack: list[tuple[click.Command, tuple[str, ...]]] = [(root, ())]
    while stack:
        command, path = stack.pop()
        if not isinstance(command, click.Group):
            leaves.add(path)
            continue
        ctx = click.Context(command, info_name=" ".join(("ember", *path)))
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                stack.append((sub, (*path, name)))
    return leaves


def all_option_names(root: click.Group) -> set[str]:
    names: set[str] = set()
    stack: list[tuple[click.Command, str]] = [(root, "ember")]
    while stack:
        command, name = stack.pop()
        names |= _option_names(command)
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=name)
            for sub_name in command.list_commands(ctx):
                sub = command.get_command(ctx, sub_name)
                if sub is not None:
                    stack.append((sub, sub_name))
    return names


def test_readme_lists_ember_commands() -> None:
    # The walk below must see the README's command lists, not pass on an empty parse.
    texts = {inv.text for inv in readme_invocations(README.read_text())}
    assert "ember serve" in texts
    assert any(t.startswith("ember deploy --dry-run") for t in texts)
    assert any(t.startswith("ember kv bulk put") for t in texts)
    assert any(t.startswith("ember versions deploy") for t in texts)
    assert any(t.startswith("ember models serve") for t in texts)
    # ... and so must the walk over docs/, where the operator's commands live.
    serve_doc = readme_invocations((ROOT / "docs/serve.md").read_text(), "docs/serve.md")
    assert any(inv.text.startswith("ember accounts create") for inv in serve_doc)


def _documented() -> list[Invocation]:
    found = readme_invocations(README.read_text())
    for doc in OTHER_DOCS:
        found += readme_invocations((ROOT / doc).read_text(), doc)
    return found


@pytest.mark.parametrize(
    "invocation",
    _documented(),
    ids=lambda inv: f"{inv.doc}:{inv.line}:{inv.text[:60]}",
)
def test_readme_command_exists_with_its_flags(invocation: Invocation) -> None:
    assert problems(invocation, cli) == []


def test_readme_shows_every_ember_command() -> None:
    named: set[tuple[str, ...]] = set()
    for doc in USER_DOCS:
        for invocation in readme_invocations(doc.read_text(), doc.name):
            named |= commands_named(invocation, cli)
    missing = sorted(" ".join(("ember", *path)) for path in leaf_commands(cli) - named)
    assert missing == [], f"commands neither README.md nor docs/ shows: {missing}"


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_the_readme_names_is_an_ember_option(doc: Path) -> None:
    # Flags in prose ("`--remote`", "Flags: `--host`, ...") belong to some ember command.
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", doc.read_text()))
    missing = named - all_option_names(cli) - OTHER_PROGRAMS_FLAGS
    where = doc.relative_to(ROOT)
    assert missing == set(), f"{where} names flags no ember command has: {sorted(missing)}"


def test_a_removed_flag_or_command_is_reported() -> None:
    @click.group()
    def root() -> None: ...

    @root.group()
    def kv() -> None: ...

    @kv.command()
    @click.option("--binding")
    def get(binding: str | None) -> None: ...

    readme = (
        "```sh\n"
        "ember kv get|put NAME [--binding KV] --remote   # --ignored in a comment\n"
        "```\n"
        "Inline: `ember kv get --binding=KV` · `ember nope`.\n"
    )
    found = [p for inv in readme_invocations(readme) for p in problems(inv, root)]
    assert found == [
        "README.md:2: `ember kv get|put NAME [--binding KV] --remote`: "
        "`ember kv get` has no option --remote",
        "README.md:2: `ember kv get|put NAME [--binding KV] --remote`: "
        "`ember kv` has no subcommand 'put'",
        "README.md:4: `ember nope`: `ember` has no subcommand 'nope'",
    ]
