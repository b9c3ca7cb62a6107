"""The request/response protocol of ember's model side: OpenAI ``/v1/chat/completions``,
``/v1/completions`` and ``/v1/responses`` (``responses_*``: translated to and from chat), SGLang
``/generate``, and Workers AI family-B ``env.AI.run`` inputs;
response objects and SSE streams for both platforms; Workers AI error codes; parsers that turn
Kimi's and GLM's output (reasoning, tool calls) into OpenAI fields.

Torch-free: the AI binding in the supervisor validates requests with it. Import the modules
you need (``chat_request``, ``responses``, ``sse``, ``output_parser``...); this package
imports nothing eagerly.
"""
