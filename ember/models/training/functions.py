"""Documented functions pulled out of corpus files: the raw material of the instruction pairs."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from ember.models.training.corpus import SourceFile

MAX_SOURCE_CHARS = 1500
MIN_REQUEST_CHARS = 12


@dataclass(frozen=True, slots=True)
class DocumentedFunction:
    """A function (or method) with a docstring, and its dedented source."""

    module: str  # dotted module name, e.g. "email.feedparser"
    qualname: str  # "Class.method" or "function"
    name: str
    signature: str  # "name(a, b=1)"
    request: str  # first paragraph of the docstring, on one line
    source: str  # the whole def (decorators included), dedented


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _first_paragraph(doc: str) -> str:
    para = doc.strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines()).strip()


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{node.name}({ast.unparse(node.args)})"


def _source_of(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    return textwrap.dedent("".join(lines[first - 1 : node.end_lineno])).rstrip()


def _walk(
    body: list[ast.stmt], prefix: str
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((prefix + node.name, node))
        elif isinstance(node, ast.ClassDef):
            out.extend(_walk(node.body, f"{prefix}{node.name}."))
    return out


def documented_functions(source: SourceFile) -> list[DocumentedFunction]:
    """Module-level functions and class methods with a usable docstring, in file order."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return []
    lines = source.text.splitlines(keepends=True)
    out = []
    for qualname, node in _walk(tree.body, ""):
        doc = ast.get_docstring(node)
        if not doc:
            continue
        request = _first_paragraph(doc)
        code = _source_of(lines, node)
        if len(request) < MIN_REQUEST_CHARS or len(code) > MAX_SOURCE_CHARS:
            continue
        out.append(
            DocumentedFunction(
                module=module_name(source.path),
                qualname=qualname,
                name=node.name,
                signature=_signature(node),
                request=request,
                source=code,
            )
        )
    return out


def module_docstring(source: SourceFile) -> str:
    try:
        doc = ast.get_docstring(ast.parse(source.text))
    except SyntaxError:
        return ""
    return _first_paragraph(doc) if doc else ""


def public_functions(source: SourceFile) -> list[str]:
    """Names of the module-level public functions and classes, in file order."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return []
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [n.name for n in tree.body if isinstance(n, kinds) and not n.name.startswith("_")]
