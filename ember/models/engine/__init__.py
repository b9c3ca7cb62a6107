"""The serving engine, on nano-vllm's seams.

- ``sequence.py``: one request's tokens, block table and token chain (torch-free);
- ``block_manager.py``: pages, reference counts, the validated prefix cache (torch-free);
- ``scheduler.py``: waiting/running queues, chunked prefill, preemption, abort (torch-free);
- ``integrity.py``: when KV pages are checked and what a failure means (torch-free);
- ``model_runner.py``: a step's tensors, the forward over the flat batch, checks, sampling;
- ``runner_types.py``: its seams (``CausalLM``, ``Sampler``) and what a step returns;
- ``sampling.py``: per-request sampling through ``ember.models.sampling`` (greedy fast path);
- ``prompt_logprobs.py``: the extra rows a step scores for requests that ask for prompt logprobs;
- ``llm_engine.py``: ``LLMEngine`` (``add_request`` / ``step`` / ``abort``);
- ``engine_types.py``: what it hands out (``RequestOutput``, ``Usage``, stats, flush results);
- ``async_engine.py``: ``AsyncEngine``, the engine loop in its own thread behind asyncio;
- ``intake_hold.py``: when a step waits for requests still arriving, and for how long.

Shape letters as in ``ember/models/attention/backend.py``; ``S`` is the page size.
"""
