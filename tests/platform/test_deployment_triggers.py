"""Each deployment is tagged with what made it, as Cloudflare tags ``workers/triggered_by``:
``upload`` (a deploy), ``deployment`` (``versions deploy``: POST .../deployments), ``rollback``
(back to an older version, also from a split), ``secret``; a version from ``versions upload`` is
``version_upload``. ``ember deployments list`` prints wrangler's label for each."""

from __future__ import annotations

import json
import re

from tests.platform.conftest import RunningPlatform
from tests.platform.test_cli import Ember, ember, project  # noqa: F401 - fixtures

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _sources(listing: str) -> list[str]:
    """The ``Source:`` of each deployment block, oldest first (wrangler's order)."""
    return re.findall(r"^Source:\s+(.+)$", listing, re.M)


def test_every_deployment_says_what_made_it(platform: RunningPlatform, ember: Ember) -> None:  # noqa: F811
    _, issued = platform.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    v1 = json.loads(ember("deploy", "--json").stdout)["version_id"]
    uploaded = ember("versions", "upload", "--message", "two").stdout
    v2 = re.search(rf"Worker Version ID: ({UUID})", uploaded).group(1)  # type: ignore[union-attr]
    version = json.loads(ember("versions", "view", v2, "--json").stdout)
    assert version["annotations"]["workers/triggered_by"] == "version_upload"

    ember("versions", "deploy", f"{v1}@50", f"{v2}@50", "--yes")
    ember("rollback", "--yes", "--message", "back")  # from the split to v1 at 100%
    ember("versions", "deploy", v2, "--yes")
    ember("secret", "put", "KEY", stdin="value\n")

    account = platform.plane.accounts.find("acme")
    assert account is not None
    tags = [
        d.annotations["workers/triggered_by"]
        for d in platform.plane.scripts.deployments(account, "hello")
    ]
    assert tags == ["secret", "deployment", "rollback", "deployment", "upload"]  # newest first
    listing = ember("deployments", "list").stdout
    assert _sources(listing) == ["Upload", "Deployment", "Rollback", "Deployment", "Secret Change"]
