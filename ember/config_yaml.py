"""Reading one YAML config file (ember.yaml) so that every failure is a ``ConfigError``.

PyYAML's ``safe_load`` leaves a few ways out besides ``yaml.YAMLError``, each of which a config
file can take: a scalar the YAML 1.1 resolver types but its constructor cannot build
(``2026-13-01`` matches the timestamp pattern, then ``datetime.date`` raises ValueError; an
integer of more digits than Python converts; ``!!timestamp nonsense``), nesting deeper than the
recursive composer (RecursionError), aliases that expand to billions of nodes (the "billion
laughs": cheap to construct as shared references, then json.dumps of a var or the env merge
walks every one) or refer to themselves. Duplicate keys are silently last-wins in PyYAML;
here they are an error, as in wrangler.jsonc (jsonc-parser) and TOML.

A scalar that cannot be built keeps the text the user wrote, so the key's own validation names
it (``compatibility_date: expected a date as YYYY-MM-DD, found '2026-13-01'``) and a var
``RELEASE: 2026-13-01`` is the string as typed.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ember.errors import ConfigError

# Nodes a document may hold once every alias is expanded: configs are small; a billion-laughs
# document passes this within a few anchors, before anything is built from it.
MAX_EXPANDED_NODES = 100_000


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader with duplicate keys refused and unbuildable typed scalars kept as text."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # merge keys (<<) may repeat what they merge; that is their point
            identity = (key_node.tag, key_node.value)
            if identity in seen:
                raise ConstructorError(
                    None, None, f"found duplicate key {key_node.value!r}", key_node.start_mark
                )
            seen.add(identity)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _keep_text_on_failure(tag: str) -> None:
    built = _ConfigLoader.yaml_constructors[tag]

    def construct(loader: _ConfigLoader, node: Node) -> object:
        try:
            return built(loader, node)
        except (ValueError, TypeError, AttributeError, OverflowError):
            # The resolver's guess (a date, a number) was wrong for this text: keep the text.
            return loader.construct_scalar(node)  # type: ignore[arg-type]

    _ConfigLoader.add_constructor(tag, construct)


for _tag in ("timestamp", "int", "float"):
    _keep_text_on_failure(f"tag:yaml.org,2002:{_tag}")


def load_yaml(text: str, fname: str) -> object:
    """The one document in ``text`` (None when empty); any failure a ConfigError naming
    ``fname`` and, where the parser knows it, the line and column."""
    try:
        loader = _ConfigLoader(text)  # the reader refuses control characters right here
    except yaml.YAMLError as exc:
        raise ConfigError(fname, _where(exc), _problem(exc), "valid YAML") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, fname)
        return loader.construct_document(node)
    except ConstructorError as exc:
        if exc.problem and exc.problem.startswith("found duplicate key"):
            raise ConfigError(fname, _where(exc), exc.problem[6:], "each key once") from None
        raise ConfigError(fname, _where(exc), _problem(exc), "valid YAML") from None
    except yaml.YAMLError as exc:
        raise ConfigError(fname, _where(exc), _problem(exc), "valid YAML") from None
    except RecursionError:
        raise ConfigError(fname, None, "nesting too deep to read", "valid YAML") from None
    finally:
        loader.dispose()


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "document"


def _problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem and context:
        return f"{context}, {problem}"
    return problem or str(exc)


def _check_expansion(root: Node, fname: str) -> None:
    """Refuse a document whose aliases expand past MAX_EXPANDED_NODES or into themselves.

    Each distinct node's expanded size is counted once (memoised by identity), so this is linear
    in the document as written however far the aliases would expand; iterative, so a deep
    document cannot overflow the stack here."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_EXPANDED_NODES:
                raise ConfigError(
                    fname,
                    f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}",
                    f"aliases expanding to more than {MAX_EXPANDED_NODES:,} values",
                    "a config without alias bombs",
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError(
                fname,
                f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}",
                "a recursive alias (an anchor that contains itself)",
                "values that do not contain themselves",
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
