"""Regex constraints per decode step, beside the plain JSON schema in the same run.

Same vocabulary and replay as ``bench/constrained.py`` (whose helpers this reuses): realistic
outputs are tokenized and replayed through a ConstrainedDecoder, timing ``allowed_token_mask()``
and ``advance()``, fresh (empty grammar cache) and warm. Scenarios: SGLang's ``regex`` as the
whole output (a phone number, a free sentence, an ISO timestamp list), and the benchmark's JSON
schema with ``pattern`` and ``format`` on its strings, next to the same schema without them (the
ratio is the regex's cost; the plain schema's own figures are ``bench/constrained.py``'s), and
GLM-4.7 tool calls whose raw string arguments carry ``maxLength``/``minLength``, a ``pattern``
and a ``format``, next to the same tool with bare strings and to Kimi's JSON arguments under the
same bounds. The slow reference mask is timed
against the fast one on states of the pattern schema.

    python bench/constrained_regex.py [--tokenizer tokenizer.json]
        [--out bench/results/constrained_regex.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.constrained import (  # noqa: E402
    DOCS,
    SCHEMA,
    load_vocabulary,
    reference_ratio,
    scenario,
    train_vocabulary,
)
from ember.models.constrain.session import ConstraintSpec  # noqa: E402
from ember.models.constrain.tool_grammars import ToolSignature  # noqa: E402

PATTERN_SCHEMA = json.loads(json.dumps(SCHEMA))
PATTERN_SCHEMA["properties"]["name"]["pattern"] = r"^\S(.*\S)?$"
PATTERN_SCHEMA["properties"]["capital"]["pattern"] = r"^[^\d\n]{1,40}$"
PATTERN_SCHEMA["properties"]["languages"]["items"]["pattern"] = r"^[^\s,;]+( [^\s,;]+)*$"
PATTERN_SCHEMA["properties"]["leader"]["properties"]["title"]["pattern"] = r"[A-Za-z]"
PATTERN_SCHEMA["properties"]["founded"] = {"type": "string", "format": "date"}
PATTERN_SCHEMA["properties"]["contact"] = {"type": "string", "format": "email"}
FOUNDED = ["1947-08-15", "1848-09-12", "1821-07-28", "1947-05-03"]
CONTACTS = ["info@india.gov.in", "info@admin.ch", "contacto@gob.pe", "info@kantei.go.jp"]

GLM_NAMES = ("city", "station", "day", "note")
GLM_PLAIN = ToolSignature(
    "get_weather",
    {
        "type": "object",
        "properties": {n: {"type": "string"} for n in GLM_NAMES},
        "required": ["city"],
    },
)
GLM_BOUNDED = ToolSignature(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "station": {"type": "string", "pattern": r"^[A-Z]{2}\d{3}$"},
            "day": {"type": "string", "format": "date"},
            "note": {"type": "string", "minLength": 3, "maxLength": 80},
        },
        "required": ["city"],
    },
)
GLM_VALUES = [
    ("Paris, France", "FR075", "2025-06-01", "metric units, three days"),
    ("東京", "JP013", "2024-02-29", "rain expected?"),
    ("Lima", "PE150", "1999-12-31", "coastal fog in the morning"),
]
GLM_CALLS = [
    f"<tool_call>get_weather<arg_key>city</arg_key><arg_value>{city}</arg_value>"
    f"<arg_key>station</arg_key><arg_value>{station}</arg_value>"
    f"<arg_key>day</arg_key><arg_value>{day}</arg_value>"
    f"<arg_key>note</arg_key><arg_value>{note}</arg_value></tool_call>"
    for city, station, day, note in GLM_VALUES
]

# The same calls as Kimi writes them (JSON arguments), for the JSON path's cost at equal bounds.
KIMI_CALLS = [
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>"
    + json.dumps(dict(zip(GLM_NAMES, values, strict=True)), ensure_ascii=False)
    + "<|tool_call_end|><|tool_calls_section_end|>"
    for values in GLM_VALUES
]

PHONE = r"\(\d{3}\) \d{3}-\d{4}"
SENTENCE = r"[A-Z][^\n]{0,300}[.!?]"
STAMPS = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)(, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ){0,7}"


def glm_spec(tool: ToolSignature) -> ConstraintSpec:
    return ConstraintSpec(tools=(tool,), tools_required=True, tool_format="glm47")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", help="a byte-level BPE tokenizer.json to use")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "constrained_regex.json"))
    args = parser.parse_args()
    if args.tokenizer:
        tokenizer, vocab, origin = load_vocabulary(args.tokenizer)
    else:
        tokenizer, vocab, origin = train_vocabulary(args.vocab_size)
    docs = [dict(d) for d in DOCS]
    pattern_docs = [
        {**d, "founded": f, "contact": c} for d, f, c in zip(docs, FOUNDED, CONTACTS, strict=True)
    ]
    plain = [json.dumps(d, ensure_ascii=False) for d in docs]
    patterned = [json.dumps(d, ensure_ascii=False) for d in pattern_docs]
    sentences = [
        "The quick brown fox jumps over the lazy dog, then naps in the sun.",
        "Perú's capital, Lima, sits on the Pacific coast; 東京 is Japan's capital!",
    ]
    stamps = ["2024-06-01T12:30:00Z, 2024-06-02T08:00:00Z, 2025-01-31T23:59:59Z"]
    schema_spec = ConstraintSpec(json="schema", schema=SCHEMA)
    kimi_spec = ConstraintSpec(tools=(GLM_BOUNDED,), tools_required=True, tool_format="kimi")
    pattern_spec = ConstraintSpec(json="schema", schema=PATTERN_SCHEMA)
    scenarios = [
        scenario("json_schema_plain", schema_spec, plain, tokenizer, vocab),
        scenario("json_schema_pattern_format", pattern_spec, patterned, tokenizer, vocab),
        scenario("regex_phone", ConstraintSpec(regex=PHONE), ["(555) 123-4567"], tokenizer, vocab),
        scenario("regex_sentence", ConstraintSpec(regex=SENTENCE), sentences, tokenizer, vocab),
        scenario("regex_timestamps", ConstraintSpec(regex=STAMPS), stamps, tokenizer, vocab),
        scenario("glm47_tool_bare_strings", glm_spec(GLM_PLAIN), GLM_CALLS, tokenizer, vocab),
        scenario("glm47_tool_bounded_strings", glm_spec(GLM_BOUNDED), GLM_CALLS, tokenizer, vocab),
        scenario("kimi_tool_bounded_strings", kimi_spec, KIMI_CALLS, tokenizer, vocab),
    ]
    results = {
        "vocabulary": {**origin, "size": vocab.size},
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
        "scenarios": scenarios,
        "reference": reference_ratio(pattern_spec, patterned[2], tokenizer, vocab, samples=12),
    }
    base = scenarios[0]
    for s in scenarios:
        s["fresh_mask_mean_over_plain_schema"] = round(
            s["fresh"]["mask_ms"]["mean"] / base["fresh"]["mask_ms"]["mean"], 2
        )
        s["warm_mask_mean_over_plain_schema"] = round(
            s["warm"]["mask_ms"]["mean"] / base["warm"]["mask_ms"]["mean"], 2
        )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    for s in scenarios:
        fresh, warm = s["fresh"], s["warm"]
        print(
            f"{s['name']:28s} steps {fresh['steps']:4d} states {s['states']:5d}  mask ms: fresh "
            f"mean {fresh['mask_ms']['mean']:7.3f} p99 {fresh['mask_ms']['p99']:7.3f} | warm mean "
            f"{warm['mask_ms']['mean']:6.4f} | advance {warm['advance_ms']['mean']:.4f} | "
            f"fresh x{s['fresh_mask_mean_over_plain_schema']} warm "
            f"x{s['warm_mask_mean_over_plain_schema']} of the plain schema"
        )
    ref = results["reference"]
    print(f"reference / fast (fresh) = {ref['reference_over_fast_cold']}x, {ref['states']} states")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
