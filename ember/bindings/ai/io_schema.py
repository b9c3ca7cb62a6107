"""JSON Schemas of what a model id takes and answers here: ``GET .../ai/models/schema``.

The platform's endpoint (the cloudflare SDK's ``client.ai.models.schema.get(model=...)``)
answers ``{input, output}``, each a JSON Schema object with ``type``, ``description`` and
``additionalProperties`` at the top (the SDK's ``SchemaGetResponse``). ember's schemas say what
ember itself reads, with ember's ranges and defaults, in its two answer schemas
(``model_schema.py``): where ember's limits differ from the platform's, a worker validated
against this schema is accepted here. Unknown fields are ignored as on the platform
(``additionalProperties: true``). Tests hold each range against the request parser.
"""

from __future__ import annotations

from typing import Any

from ember.bindings.ai.classic import CLASSIC_MAX_TEMPERATURE, DEFAULT_MAX_TOKENS
from ember.bindings.ai.classic import DEFAULT_TEMPERATURE as CLASSIC_TEMPERATURE
from ember.bindings.ai.classic_schema import NOT_CLASSIC, RANGES
from ember.bindings.ai.model_schema import Schema
from ember.models.api.chat_request import INT64, REASONING_EFFORTS, WORKERS_AI_MAX_TEMPERATURE
from ember.models.api.request_options import MAX_CHOICES


def _number(low: float, high: float, default: float, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "number",
        "minimum": low,
        "maximum": high,
        "default": default,
        "description": text,
        **extra,
    }


def _sampling(classic: bool) -> dict[str, Any]:
    max_temperature = CLASSIC_MAX_TEMPERATURE if classic else WORKERS_AI_MAX_TEMPERATURE
    temperature = CLASSIC_TEMPERATURE if classic else 1.0
    max_tokens: dict[str, Any] = {"type": "integer", "minimum": 1}
    if classic:
        max_tokens["default"] = DEFAULT_MAX_TOKENS
    return {
        "max_tokens": {**max_tokens, "description": "Most tokens to generate."},
        "max_completion_tokens": {
            "type": "integer",
            "minimum": 1,
            "description": "Most tokens to generate, reasoning included (wins over max_tokens).",
        },
        "temperature": _number(0, max_temperature, temperature, "0 is greedy."),
        "top_p": _number(0, 1, 1, "Nucleus sampling: the smallest set of tokens this likely."),
        "top_k": {"type": "integer", "minimum": -1, "description": "-1 or 0: off."},
        "min_p": _number(0, 1, 0, "Drop tokens less likely than this times the top token."),
        "seed": {
            "type": "integer",
            "minimum": -INT64,
            "maximum": 2 * INT64 - 1,
            "description": "The same seed and request give the same output.",
        },
        "stop": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "Text that ends the output (not included in it).",
        },
        "frequency_penalty": _number(-2, 2, 0, "Lowers a token's logit per earlier use."),
        "presence_penalty": _number(-2, 2, 0, "Lowers the logit of every token used before."),
        "repetition_penalty": _number(
            0, 2, 1, "Divides (multiplies) the logits of seen tokens.", exclusiveMinimum=0
        ),
        "logit_bias": {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100},
            "description": "Token id (as a string) to a bias added to its logit.",
        },
        "logprobs": {"type": "boolean", "default": False},
        "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20, "default": 0},
        "n": {"type": "integer", "minimum": 1, "maximum": MAX_CHOICES, "default": 1},
        "stream": {
            "type": "boolean",
            "default": False,
            "description": "Answer as server-sent events, ending with usage and [DONE].",
        },
        "response_format": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                "json_schema": {"type": "object"},
            },
            "required": ["type"],
            "description": "JSON mode: the output is valid by construction, streamed too.",
        },
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {
            "anyOf": [{"type": "string", "enum": ["auto", "none", "required"]}, {"type": "object"}]
        },
        "parallel_tool_calls": {"type": "boolean", "default": True},
        "chat_template_kwargs": {
            "type": "object",
            "properties": {"enable_thinking": {"type": "boolean", "default": True}},
        },
        "reasoning_effort": {"type": "string", "enum": list(REASONING_EFFORTS)},
    }


MESSAGE = {
    "type": "object",
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
        "tool_calls": {"type": "array"},
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
    },
    "required": ["role"],
}


RESPONSES_INPUT = {
    "title": "Responses",
    "properties": {
        "input": {
            "anyOf": [{"type": "string"}, {"type": "array"}],
            "description": "The Responses API's input: a string or input items.",
        },
        "instructions": {"type": "string"},
        "reasoning": {
            "type": "object",
            "properties": {"effort": {"type": "string", "enum": list(REASONING_EFFORTS)}},
        },
        "max_output_tokens": {"type": "integer", "minimum": 1},
        "stream": {"type": "boolean", "default": False},
        "text": {"type": "object", "description": "text.format: json_object or json_schema."},
        "tools": {"type": "array", "items": {"type": "object"}},
        "previous_response_id": {"type": "string"},
    },
    "required": ["input"],
}


def _classic(fields: dict[str, Any]) -> dict[str, Any]:
    """The classic schema's own ranges, and without the fields it lacks (classic_schema.py);
    an exclusive bound of ember's own (repetition_penalty > 0) stays."""
    out = {name: spec for name, spec in fields.items() if name not in NOT_CLASSIC}
    for name, low, high, integer in RANGES:
        kind = "integer" if integer else "number"
        out[name] = {**out[name], "type": kind, "minimum": low, "maximum": high}
    return out


def input_schema(schema: Schema) -> dict[str, Any]:
    classic = schema == "classic"
    common = _classic(_sampling(classic)) if classic else _sampling(classic)
    if classic:
        common["raw"] = {
            "type": "boolean",
            "default": False,
            "description": "Send the prompt as is, without the chat template.",
        }
        common["lora"] = {"type": "string"}
    prompt = {"type": "string", "minLength": 1}
    messages = {"type": "array", "items": MESSAGE, "minItems": 1}
    return {
        "type": "object",
        "description": f"The input of a {schema} text-generation model, as ember reads it.",
        "additionalProperties": True,
        "oneOf": [
            {
                "title": "Prompt",
                "properties": {"prompt": prompt, **common},
                "required": ["prompt"],
            },
            {
                "title": "Messages",
                "properties": {"messages": messages, **common},
                "required": ["messages"],
            },
            *([RESPONSES_INPUT] if schema == "responses" else []),
        ],
    }


USAGE = {
    "type": "object",
    "properties": {
        "prompt_tokens": {"type": "integer"},
        "completion_tokens": {"type": "integer"},
        "total_tokens": {"type": "integer"},
    },
}
EVENT_STREAM = {
    "type": "string",
    "format": "binary",
    "description": "With stream: server-sent events, then data: [DONE].",
}


CLASSIC_ANSWER = {
    "type": "object",
    "properties": {
        "response": {"type": "string"},
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            },
        },
        "usage": USAGE,
    },
}
CHAT_COMPLETION = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["chat.completion"]},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "items": {"type": "object"}},
        "usage": USAGE,
    },
}
RESPONSE_OBJECT = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["response"]},
        "status": {"type": "string"},
        "output": {"type": "array", "items": {"type": "object"}},
        "usage": {"type": "object"},
    },
    "required": ["object", "output"],
}


def output_schema(schema: Schema) -> dict[str, Any]:
    answers: list[dict[str, Any]] = {
        "classic": [CLASSIC_ANSWER],
        "chat-completions": [CHAT_COMPLETION],
        "responses": [RESPONSE_OBJECT, CHAT_COMPLETION],  # for input; for prompt or messages
    }[schema]
    return {
        "type": "object",
        "description": f"The answer of a {schema} text-generation model.",
        "additionalProperties": True,
        "oneOf": [*answers, EVENT_STREAM],
    }


def model_io_schema(schema: Schema) -> dict[str, Any]:
    """``{input, output}`` for a model answering in ``schema``."""
    return {"input": input_schema(schema), "output": output_schema(schema)}
