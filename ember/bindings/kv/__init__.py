"""Workers KV: ``client.py`` (isolate), ``service.py`` (supervisor), ``store.py`` (SQLite; its
namespaces in ``namespaces.py``), ``limits.py`` (the platform's limits and messages), ``spec.py``
(config and binding type)."""
