"""Constrained decoding, valid by construction: JSON Schema (a documented subset), any JSON
object, and the Kimi / GLM tool-call syntax, compiled to grammar nodes, matched byte by byte
by a lazily determinised pushdown machine, and turned into per-step token masks over any
byte-level vocabulary.

Torch-free except ``torch_masks`` (applying masks to logits). Entry points:
``session.compile_grammar`` (the model server runs it off the engine thread) or
``session.GrammarCache``, then ``session.ConstrainedDecoder`` per request,
``schema.compile_schema`` for request validation.
"""
