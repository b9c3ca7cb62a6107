"""Workers KV: ``client.py`` (isolate), ``service.py`` (supervisor), ``store.py`` (SQLite; its
namespaces in ``namespaces.py``), ``limits.py`` (the platform's limits and messages),
``daily.py`` (a platform's daily operation allowances per account), ``spec.py`` (config and
binding type)."""
