"""Attention backends: where the KV cache lives and how attention over it is computed.

Architectures (``ember.models.arch``) compute projections, norms and rotary embeddings, then hand
the per-layer quantities to an ``AttentionBackend``; the backend stores the new tokens' cache
entries and attends over each sequence's whole context. ``backend.py`` is the seam; each
implementation (a dense reference, the engine's paged FP8 cache) lives in its own module.
"""
