"""Workers Static Assets: ``files.py`` (an assets directory read live, manifests, limits),
``ignore.py`` (``.assetsignore``), ``intent.py`` (html_handling and not_found_handling),
``serving.py`` (a request -> an answer, or the worker), ``spec.py`` (binding type),
``client.py`` (``env.ASSETS`` in the isolate), ``service.py`` (its supervisor half)."""
