"""ember's model server: ``ember models serve`` (OpenAI-compatible and SGLang-native HTTP over the
embedded engine).

- ``settings``: the flags, validated (torch-free);
- ``loading``: resolve, load, quantize, size the KV cache, start the engine;
- ``request_sampling``: grammar masks for constrained requests behind the engine's
  ``Sampler`` seam;
- ``prompt_intake``: prompts refused by size before tokenizing, large ones taken in off the
  event loop; ``inputs`` / ``generation``: API requests -> engine requests -> text events;
- ``choices``: ``n`` choices of one prompt (one engine request each, the prompt prefilled once);
- ``openai_routes`` (chat, models) / ``completion_routes`` / ``sglang_routes`` / ``app`` /
  ``wire``: the HTTP side;
- ``metrics``: Prometheus text; ``state``: lazy loading behind ``/health``; ``runner``: uvicorn.
"""
