"""The garbage collector's settings for a serving process (``ember dev``, ``ember serve``,
``ember models serve``).

CPython collects its youngest generation every 700 net container allocations. A burst of N
requests keeps N times ~100 such objects alive at once (protocol, parser state, futures, frames
to and from the isolate, the binding call, the pool's lease and stream), so with the default the
supervisor collected every few requests during a burst: each collection walks the young objects,
and those still in flight move to older generations, until a full collection walks everything
the supervisor holds (~50k objects: 30-60 ms with every request stopped). Measured with a 64-
request burst (``bench/ai_start.py``'s stub replica): 278 young collections and 2 full ones per
2,560 requests, 0.06-0.08 ms of CPU per request, 12-15% of the supervisor's.

A request's objects are freed by reference counting when it ends (the request path keeps no
reference cycle; ``tests/runtime/test_fasthttp_streams.py`` checks it), so the collector has
little to find. A higher young threshold lets a burst's live objects stay young: at 10,000, one
young collection and no full one in the same 2,560 requests. Cycles elsewhere are still
collected, only later (after 10,000 net allocations instead of 700).

The model server holds far more long-lived objects (torch, the model's modules, the tokenizer,
the chat template): a full collection there walked all of them, 140 ms with every request
stopped (``bench.ai_burst_probe``'s ``gc`` field: one in about every ten bursts of 64). What
exists once the model is loaded lives as long as the process, so it is moved out of the
collector's sight (``freeze_long_lived``, after loading): later collections walk only what
requests create.
"""

from __future__ import annotations

import gc

SERVING_THRESHOLDS = (10_000, 20, 20)


def tune_for_serving() -> None:
    """Set the serving thresholds (process-wide: called by the serving commands, not a library)."""
    gc.set_threshold(*SERVING_THRESHOLDS)


def freeze_long_lived() -> None:
    """Collect once, then exempt every object alive now from later collections (``gc.freeze``):
    call it when a server has built what it keeps for its lifetime."""
    gc.collect()
    gc.freeze()
