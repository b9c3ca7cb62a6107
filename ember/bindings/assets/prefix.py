"""An assets redirect under the path prefix its request came by.

``ember serve``'s shared ``/w/<account>/<worker>/`` form hands the worker (and its assets) the
path after the prefix, so a redirect the assets answer (``/blog`` -> ``/blog/``) is to a path
of the worker's: the prefix goes back on, or every trailing-slash link under that form would
leave the worker. The assets in front of the worker (``ember/runtime/assets_front.py``) and
``env.ASSETS.fetch`` (``service.py``) both answer through here.
"""

from __future__ import annotations

import dataclasses

from ember.bindings.assets.serving import AssetAnswer


def under_prefix(found: AssetAnswer, prefix: str) -> AssetAnswer:
    """``found`` with a redirect's path-only Location under ``prefix`` ("" leaves it)."""
    if not prefix or not 300 <= found.status < 400:
        return found
    headers = tuple(
        (k, prefix + v if k == "location" and v.startswith("/") else v) for k, v in found.headers
    )
    return dataclasses.replace(found, headers=headers)
