"""Pyodide's top-level package, as far as Workers scripts use it inside ember isolates."""
