"""ember: a local, Workers-AI-like edge runtime in Python.

Handlers run in sandboxed isolate processes (``ember.runtime``), see bindings on ``env``
(``ember.bindings``), and call local Kimi/GLM models served by ``ember.models``. The CLI lives in
``ember.cli``. Imports point one way: cli -> runtime -> bindings -> models -> core.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
