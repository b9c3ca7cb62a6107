"""Which of Workers AI's two text-generation schemas a model id answers in.

The platform's catalog (cloudflare-docs ``src/content/workers-ai-models/*.json``) has two
families. Classic models (Llama, Mistral, Hermes, Qwen 1.5, Gemma 3...) take ``prompt`` or
``messages`` with ``max_tokens`` 256 and ``temperature`` 0.6 by default and answer
``{response, usage, tool_calls}``; the newer ones (Kimi, GLM, gpt-oss, Gemma 4, Nemotron) take
and answer OpenAI chat completions. A script written for one reads the other's answer wrong
(``result["response"]`` on a ``chat.completion``), so an id mapped to a local checkpoint
answers in its platform schema: classic for the ids below, chat completions for the rest
(ember's catalog, the OpenAI-compatible ids, and ids the platform does not have).
``ai.models."<id>".schema`` says it explicitly.

gpt-oss takes a third form beside prompt and messages: the Responses API's ``{input,
instructions, reasoning}``, answered with a Responses object (python-workers-examples' Workers
AI example reads ``response.output``). Its ids have the ``responses`` schema: an ``input`` is
answered as ``/ai/v1/responses`` answers it, prompt and messages as chat completions.
"""

from __future__ import annotations

from typing import Literal

Schema = Literal["classic", "chat-completions", "responses"]
SCHEMAS: tuple[Schema, ...] = ("classic", "chat-completions", "responses")

# Text-generation ids whose catalog file takes the Responses API's input (``input``, required).
RESPONSES_IDS = frozenset({"@cf/openai/gpt-oss-120b", "@cf/openai/gpt-oss-20b"})

# Text-generation ids whose catalog file has the classic input (``max_tokens`` default 256,
# ``raw``, ``lora``) and output (``response``, ``tool_calls`` with object ``arguments``).
CLASSIC_IDS = frozenset(
    {
        "@cf/meta/llama-2-7b-chat-fp16",
        "@cf/meta/llama-2-7b-chat-int8",
        "@cf/meta-llama/llama-2-7b-chat-hf-lora",
        "@hf/thebloke/llama-2-13b-chat-awq",
        "@cf/meta/llama-3-8b-instruct",
        "@cf/meta/llama-3-8b-instruct-awq",
        "@hf/meta-llama/meta-llama-3-8b-instruct",
        "@cf/meta/llama-3.1-8b-instruct",
        "@cf/meta/llama-3.1-8b-instruct-awq",
        "@cf/meta/llama-3.1-8b-instruct-fp8",
        "@cf/meta/llama-3.1-8b-instruct-fast",
        "@cf/meta/llama-3.1-70b-instruct",
        "@cf/meta/llama-3.2-1b-instruct",
        "@cf/meta/llama-3.2-3b-instruct",
        "@cf/meta/llama-3.2-11b-vision-instruct",
        "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
        "@cf/meta/llama-4-scout-17b-16e-instruct",
        "@cf/mistral/mistral-7b-instruct-v0.1",
        "@hf/thebloke/mistral-7b-instruct-v0.1-awq",
        "@hf/mistral/mistral-7b-instruct-v0.2",
        "@cf/mistral/mistral-7b-instruct-v0.2-lora",
        "@cf/mistralai/mistral-small-3.1-24b-instruct",
        "@hf/nousresearch/hermes-2-pro-mistral-7b",
        "@hf/thebloke/openhermes-2.5-mistral-7b-awq",
        "@hf/thebloke/neural-chat-7b-v3-1-awq",
        "@hf/thebloke/zephyr-7b-beta-awq",
        "@cf/openchat/openchat-3.5-0106",
        "@cf/tinyllama/tinyllama-1.1b-chat-v1.0",
        "@cf/microsoft/phi-2",
        "@cf/qwen/qwen1.5-0.5b-chat",
        "@cf/qwen/qwen1.5-1.8b-chat",
        "@cf/qwen/qwen1.5-7b-chat-awq",
        "@cf/qwen/qwen1.5-14b-chat-awq",
        "@cf/qwen/qwen2.5-coder-32b-instruct",
        "@cf/qwen/qwq-32b",
        "@cf/google/gemma-2b-it-lora",
        "@cf/google/gemma-7b-it-lora",
        "@hf/google/gemma-7b-it",
        "@cf/google/gemma-3-12b-it",
        "@cf/deepseek-ai/deepseek-r1-distill-qwen-32b",
        "@hf/thebloke/deepseek-coder-6.7b-base-awq",
        "@hf/thebloke/deepseek-coder-6.7b-instruct-awq",
        "@cf/deepseek-ai/deepseek-math-7b-instruct",
        "@cf/tiiuae/falcon-7b-instruct",
        "@cf/thebloke/discolm-german-7b-v1-awq",
        "@cf/defog/sqlcoder-7b-2",
        "@cf/fblgit/una-cybertron-7b-v2-bf16",
        "@hf/nexusflow/starling-lm-7b-beta",
    }
)


def default_schema(model_id: str) -> Schema:
    """The schema ``model_id`` answers in on the platform (chat completions when it is not
    one of the classic ids)."""
    if model_id in CLASSIC_IDS:
        return "classic"
    return "responses" if model_id in RESPONSES_IDS else "chat-completions"


def schema_of(model_id: str, configured: str | None) -> Schema:
    """``ai.models."<id>".schema`` when set, else the id's platform schema."""
    for schema in SCHEMAS:
        if configured == schema:
            return schema
    return default_schema(model_id)
