"""Code that runs inside an isolate process (forked from the zygote, never in the supervisor).

``main`` runs the isolate's event loop and speaks the protocol; ``api`` is the Workers API
(Request, Response, Headers, fetch) and ``entrypoints`` what handlers subclass or call
(WorkerEntrypoint, the scheduled controller, wait_until), which the ``workers``/``js``/``pyodide``
modules in ``ember/runtime/isolate_path`` re-export; ``handlers`` finds and calls the user's
handler; ``scope`` tracks which request the running code belongs to.
"""
