"""Compile a JSON Schema (the subset below) into grammar nodes.

Supported, enforced while generating:
- ``type`` (one or a list): ``object``, ``array``, ``string``, ``number``, ``integer``,
  ``boolean``, ``null``; ``nullable: true`` (OpenAPI) adds ``null``.
- objects: ``properties`` (generated in schema order; optional ones may be skipped),
  ``required``, ``additionalProperties`` (``false`` or absent: only declared properties are
  generated; ``true`` or a schema: extra keys, without escapes, after the declared ones).
- arrays: ``items`` (one schema), ``minItems``, ``maxItems``.
- strings: ``minLength``, ``maxLength`` (in characters); any UTF-8 text, all JSON escapes
  except ``\\u`` escapes of surrogates; ``pattern`` (searched in the decoded value, as JSON
  Schema says: anchor with ``^...$``; the regex subset is in regex_syntax.py); ``format``
  ``date``, ``time``, ``date-time``, ``email``, ``uuid``, ``ipv4``, ``ipv6`` (formats.py).
- numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers, or
  draft 4's booleans), enforced by construction (number_ranges.py): ``integer`` exactly;
  ``number`` exactly too, written without an exponent and with at most 15 digits in all, so
  the float a client parses compares with the bound as the decimal does. A range holding no
  such value is an error naming the keyword (lenient too: only malformed bounds are ignored).
  Bounds alone imply ``type: number``; beside ``enum``/``const`` they drop the out-of-range
  values.
- ``enum`` and ``const`` (any JSON values, generated in compact form; both: the values both
  allow; arrays and objects checked against the schema around them, literal_check.py),
  ``anyOf``, ``oneOf`` (treated as ``anyOf``: the output matches at least one alternative),
  ``allOf`` with one
  element, local ``$ref`` (``#``, ``#/$defs/...``, ``#/definitions/...``), recursion.
- ignored as annotations: ``title``, ``description``, ``default``, ``examples``, other
  ``format`` values (an annotation in JSON Schema 2020-12), ``$schema``, ``$id``,
  ``$comment``, and any keyword JSON Schema does not define.

Not supported (``strict``: a clear error naming the keyword; lenient, for tool parameters and
``response_format`` ``strict: false``: ignored, so the output keeps structure and types but not
that constraint; the same for a ``pattern`` outside the regex subset):
``multipleOf``, ``patternProperties``, ``propertyNames``, ``minProperties``/``maxProperties``,
``dependentRequired``/``dependentSchemas``/``dependencies``, ``if``/``then``/``else``, ``not``,
``contains``, ``uniqueItems``, ``prefixItems`` and tuple ``items``, ``unevaluated*``,
``allOf`` with several elements, remote ``$ref``. Lenient, the keywords beside an
``anyOf``/``oneOf`` are intersected with each alternative, one left with no value left out
(schema_merge.py, schema_intersect.py); a property whose schema is ``false`` is never
generated, and a ``required`` name only ``additionalProperties`` covers takes its schema.

Unbounded numbers are generated with at most 15 integer digits, 15 fraction digits and 2
exponent digits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata
from ember.models.constrain.json_nodes import JAny, JArray, JLiteralSet, JObject
from ember.models.constrain.json_values import compact_json, type_allows
from ember.models.constrain.literal_check import LiteralCheck
from ember.models.constrain.nodes import NO_GUARD, Choice, Node, Ref, SubstringGuard
from ember.models.constrain.number_schema import BOUND_KEYWORDS, literals_in_range, number_node
from ember.models.constrain.productive import unproductive_refs
from ember.models.constrain.schema_depth import MAX_DEPTH, check_depth
from ember.models.constrain.schema_keywords import (
    SHAPING,
    TYPES,
    UNSUPPORTED,
    listed_values,
    pointer_part,
)
from ember.models.constrain.schema_merge import compile_combinator
from ember.models.constrain.string_schema import (
    count_keyword,
    length_bounds,
    literals_fitting,
    string_node,
)
from ember.models.constrain.tool_root import resolve_pointer

MAX_NODES = 5000
# enum and const values across one schema, and the bytes of their JSON: an enum of 50,000
# strings took 14.6 s to compile (and its first token mask as long again), during which the
# engine decoded nobody else's tokens. OpenAI's structured outputs bound enum values across a
# schema (1000) and the characters of names, enum and const values (120,000); so does ember
# (property names and enum/const JSON, in bytes).
MAX_LITERALS = 1000
MAX_LITERAL_BYTES = 120_000
DEFAULT_WHITESPACE = 20


class SchemaCompiler:
    """One schema -> one node graph. ``path`` is the schema's JSON pointer in the request, so
    errors name the offending keyword (``/response_format/json_schema/schema/properties/a``)."""

    def __init__(
        self,
        root: object,
        *,
        path: str,
        strict: bool = True,
        ws: int = DEFAULT_WHITESPACE,
        guard: SubstringGuard = NO_GUARD,
        automata: Automata | None = None,
    ):
        self.root = root
        self.guard = guard
        self.path = path
        self.strict = strict
        self.ws = ws
        self.refs: dict[str, Ref] = {}
        self.ref_sites: dict[str, str] = {}  # each reference's first $ref, for errors
        self.nodes = 0
        self.literals = 0  # enum and const values so far (MAX_LITERALS)
        self.literal_bytes = 0  # and the bytes of their JSON (MAX_LITERAL_BYTES)
        self.any = JAny(ws, guard)
        # Each distinct bound or pattern built once, and bounded; a caller compiling one
        # schema in parts (GLM's properties) passes one for all of them.
        self.automata = Automata() if automata is None else automata
        self.seen: dict[int, tuple[object, Node]] = {}  # id -> (schema, its node)
        self.check = LiteralCheck(lambda pointer: resolve_pointer(root, pointer), self.automata)

    def compile(self, schema: object = None, path: str | None = None) -> Node:
        """The root's node, or with ``path`` the node of ``schema`` (a part of the root found
        at ``path``, a GLM tool's property), whose ``$ref``s resolve against the root."""
        node = self._compile(self.root, self.path) if path is None else self._compile(schema, path)
        unbound = [p for p, r in self.refs.items() if r.target is None]
        while unbound:  # compiling one target may discover further references
            for pointer in unbound:
                # Every pointer in refs was resolved once where its $ref is: this cannot fail.
                target = self._compile(self._resolve(pointer, ""), self.path + pointer[1:])
                if isinstance(target, Ref) and target is self.refs[pointer]:
                    raise self._fail(
                        self.path + pointer[1:], "a $ref that leads to a schema", pointer
                    )
                self.refs[pointer].target = target
            unbound = [p for p, r in self.refs.items() if r.target is None]
        dead = unproductive_refs(self.refs.values())
        if dead:
            raise self._fail(
                self.ref_sites[dead[0].name],
                "a $ref some finite value can match (this one only leads through references "
                "back to itself)",
                dead[0].name,
            )
        return node

    def _fail(self, path: str, expected: str, found: object) -> InvalidRequestField:
        shown = found if isinstance(found, str) else json.dumps(found)[:80]
        return InvalidRequestField(path, expected, shown)

    def _resolve(self, pointer: str, where: str) -> object:
        """The schema ``pointer`` leads to; ``where`` is the ``$ref``'s own path, for errors."""
        target = resolve_pointer(self.root, pointer)
        if target is None:  # no such part (a null there is no schema either)
            raise self._fail(where, "a $ref to a part of this schema", pointer)
        return target

    def _compile(self, schema: object, path: str) -> Node:
        # A subschema object compiled before (the siblings a lenient combinator merges into
        # each alternative) is the same grammar: its node is shared, counted once.
        seen = self.seen.get(id(schema)) if isinstance(schema, Mapping) else None
        if seen is not None and seen[0] is schema:
            return seen[1]
        node = self._compile_new(schema, path)
        if isinstance(schema, Mapping):
            self.seen[id(schema)] = (schema, node)  # the schema kept alive: its id stays its
        return node

    def _compile_new(self, schema: object, path: str) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self._fail(path, f"a schema of at most {MAX_NODES} subschemas", "a larger one")
        if path.count("/") - self.path.count("/") > MAX_DEPTH:
            raise self._fail(
                path, f"a schema nested at most {MAX_DEPTH} levels deep", "a deeper one"
            )
        if schema is True or schema == {}:
            return self.any
        if schema is False:
            raise self._fail(path, "a schema some value can satisfy", "false")
        if not isinstance(schema, Mapping):
            raise self._fail(path, "a JSON schema object", schema)
        if self.strict:
            for keyword in UNSUPPORTED:
                if keyword in schema:
                    raise InvalidRequestField(
                        f"{path}/{keyword}",
                        "a schema keyword ember can enforce while generating (see the "
                        "supported JSON Schema subset; ember refuses one it cannot enforce "
                        "rather than miss it silently, even where OpenAI's strict mode takes "
                        "it: drop it, or set strict to false)",
                        f"'{keyword}'",
                        code="unsupported_value",
                    )
        ref = schema.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                raise self._fail(path + "/$ref", "a local reference like '#/$defs/Name'", ref)
            self._resolve(ref, path + "/$ref")  # fails here, where the bad $ref is
            self.ref_sites.setdefault(ref, path + "/$ref")
            return self.refs.setdefault(ref, Ref(ref))
        for combinator in ("anyOf", "oneOf", "allOf"):
            if combinator in schema:
                return self._combinator(schema, combinator, path)
        node = self._typed(schema, path)
        if schema.get("nullable") is True:
            return Choice([node, JLiteralSet((b"null",))])
        return node

    def _combinator(self, schema: Mapping, combinator: str, path: str) -> Node:
        return compile_combinator(
            schema,
            combinator,
            path,
            strict=self.strict,
            shaping=SHAPING,
            compile_part=self._compile,
        )

    def _typed(self, schema: Mapping, path: str) -> Node:
        declared = schema.get("type")
        if declared is None:
            types: list[str] | None = None
        elif isinstance(declared, str):
            types = [declared]
        elif isinstance(declared, list) and declared and all(isinstance(t, str) for t in declared):
            types = list(dict.fromkeys(declared))
        else:
            raise self._fail(path + "/type", "a type name or a non-empty list of them", declared)
        for t in types or []:
            if t not in TYPES:
                raise self._fail(path + "/type", "one of " + ", ".join(TYPES), t)
        if "enum" in schema or "const" in schema:
            return self._literals(schema, path, set(types) if types else None)
        if types is None:
            if any(k in schema for k in ("properties", "required", "additionalProperties")):
                types = ["object"]
            elif any(k in schema for k in ("items", "minItems", "maxItems")):
                types = ["array"]
            elif any(k in schema for k in ("minLength", "maxLength", "pattern")):
                types = ["string"]
            elif any(k in schema for k in BOUND_KEYWORDS):
                types = ["number"]
            else:
                return self.any
        nodes = [self._one_type(t, schema, path) for t in types]
        return nodes[0] if len(nodes) == 1 else Choice(nodes)

    def _literals(self, schema: Mapping, path: str, types: set[str] | None) -> Node:
        values, where = listed_values(schema, path)
        if values is None:
            raise self._fail(where, "a non-empty array of values", schema["enum"])
        if not values:  # both enum and const: the values both allow
            raise self._fail(where, "one of the enum values", schema["const"])
        if types is not None:
            values = [v for v in values if type_allows(types, v)]
            if not values:
                raise self._fail(where, f"values of type {sorted(types)}", schema.get("enum"))
        values = literals_in_range(values, schema, path, strict=self.strict)
        values = literals_fitting(values, schema, path, self.automata)
        # An array's items, an object's properties: each value checked against them too.
        values = [v for v in values if not isinstance(v, list | dict) or self.check.fits(v, schema)]
        if not values:
            raise self._fail(
                where,
                "values the schema's bounds, lengths and pattern allow",
                schema.get("enum", schema.get("const")),
            )
        self.literals += len(values)
        if self.literals > MAX_LITERALS:
            raise self._fail(
                where,
                f"at most {MAX_LITERALS} enum and const values in the whole schema",
                f"{self.literals} so far",
            )
        encoded = [compact_json(v) for v in values]
        self._spend(where, sum(len(e) for e in encoded))
        return JLiteralSet(encoded)

    def _spend(self, where: str, size: int) -> None:
        """Count ``size`` bytes of property names or enum/const JSON against the schema's
        budget (OpenAI's 120,000 characters of names and values)."""
        self.literal_bytes += size
        if self.literal_bytes > MAX_LITERAL_BYTES:
            raise self._fail(
                where,
                f"property names, enum and const values of at most {MAX_LITERAL_BYTES:,} bytes "
                "of JSON in the whole schema",
                f"{self.literal_bytes:,} bytes so far",
            )

    def _one_type(self, kind: str, schema: Mapping, path: str) -> Node:
        if kind == "null":
            return JLiteralSet((b"null",))
        if kind == "boolean":
            return JLiteralSet((b"true", b"false"))
        if kind in ("integer", "number"):
            return number_node(
                schema, path, integer=kind == "integer", strict=self.strict, automata=self.automata
            )
        if kind == "string":
            low, high = length_bounds(schema, path)
            return string_node(
                schema,
                path,
                low=low,
                high=high,
                strict=self.strict,
                guard=self.guard,
                automata=self.automata,
            )
        if kind == "array":
            return self._array(schema, path)
        return self._object(schema, path)

    def _array(self, schema: Mapping, path: str) -> Node:
        items = schema.get("items", True)
        if isinstance(items, list):
            if self.strict:
                raise InvalidRequestField(
                    path + "/items",
                    "one schema for every item",
                    "a list of schemas",
                    "unsupported_value",
                )
            items = True
        low = count_keyword(schema, "minItems", path) or 0
        high = count_keyword(schema, "maxItems", path)
        if high is not None and high < low:
            raise self._fail(path + "/maxItems", f"at least minItems ({low})", high)
        return JArray(self._compile(items, path + "/items"), low, high, self.ws)

    def _object(self, schema: Mapping, path: str) -> Node:
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise self._fail(path + "/properties", "an object mapping names to schemas", properties)
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self._fail(path + "/required", "an array of property names", required)
        extra_schema = schema.get("additionalProperties", False)
        undeclared = [(i, n) for i, n in enumerate(required) if n not in properties]
        if undeclared and (self.strict or schema.get("additionalProperties", True) is False):
            i, name = undeclared[0]
            expected = "the name of a property declared in 'properties'"
            if not self.strict:
                expected += " (additionalProperties is false: no object can have another)"
            raise self._fail(f"{path}/required/{i}", expected, name)
        # Lenient: a required name only additionalProperties (absent: any value) covers is
        # declared with that schema, as JSON Schema reads it.
        extra_any = schema.get("additionalProperties", True)
        declared = {**properties, **{name: extra_any for _, name in undeclared}}
        compiled = []
        forbidden = False
        for name, sub in declared.items():
            where = f"{path}/properties/{pointer_part(name)}"
            if sub is False and not self.strict and name not in required:
                forbidden = True  # the property must be absent: it is never generated
                continue
            key = json.dumps(name, ensure_ascii=False)[1:-1].encode()
            self._spend(where, len(key))
            node = self._compile(sub, where)
            compiled.append((key, node, name in required))
        extra = None
        # Extra keys could spell a forbidden name: with one, none are generated (a subset).
        if extra_schema is not False and not forbidden:
            extra = self._compile(extra_schema, path + "/additionalProperties")
        return JObject(compiled, extra, self.ws, self.guard)


def compile_schema(
    schema: object,
    *,
    path: str = "",
    strict: bool = True,
    ws: int = DEFAULT_WHITESPACE,
    forbidden: tuple[str, ...] = (),
    within: tuple[object, str] | None = None,
    automata: Automata | None = None,
) -> Node:
    """The node for ``schema``; raises ``InvalidRequestField`` naming the offending keyword.
    ``forbidden``: marker spellings no string may contain (inside tool calls). ``within``:
    the whole schema ``schema`` is a part of and its path, against which ``$ref`` resolves.
    ``automata``: the budget and built regexes to share with other parts of that whole (None:
    this schema's own)."""
    root, root_path = (schema, path) if within is None else within
    check_depth(root, root_path)  # before any walk of it recurses per level (schema_depth.py)
    if within is not None:
        check_depth(schema, path)  # a part made apart from the root (GLM's) is walked too
    guard = SubstringGuard([f.encode() for f in forbidden]) if forbidden else NO_GUARD
    compiler = SchemaCompiler(
        root, path=root_path, strict=strict, ws=ws, guard=guard, automata=automata
    )
    return compiler.compile() if within is None else compiler.compile(schema, path)


def any_json_object(ws: int = DEFAULT_WHITESPACE, forbidden: tuple[str, ...] = ()) -> Node:
    """``response_format: json_object``: any JSON object."""
    guard = SubstringGuard([f.encode() for f in forbidden]) if forbidden else NO_GUARD
    return JObject((), JAny(ws, guard), ws, guard)
