"""``ember versions deploy``'s percentage rules, and the layout wrangler's tests pin for
``deployments status`` and ``versions list``."""

from __future__ import annotations

import pytest

from ember.cli.versions_deploy import parse_traffic, split_traffic
from ember.cli.versions_output import deployment_summary, labelled, version_summary
from ember.errors import UserError

A = "10000000-0000-0000-0000-000000000000"
B = "20000000-0000-0000-0000-000000000000"


def split(*specs: str, ids: tuple[str, ...] = (), pcts: tuple[float, ...] = ()) -> dict:
    return split_traffic(parse_traffic(specs, ids, pcts))


def test_percentages_given_shared_and_defaulted() -> None:
    assert split(A) == {A: 100}  # a single version id means 100%
    assert split(f"{A}@30%", B) == {A: 30, B: 70}  # the rest goes to the other
    assert split(f"{A}@40", f"{B}@60%") == {A: 40, B: 60}
    assert split(A, B) == {A: 50, B: 50}
    assert split(f"{A}@100", f"{B}@0") == {A: 100, B: 0}
    assert split(f"{A}@33.3", f"{B}@66.7") == {A: 33.3, B: 66.7}
    assert split(ids=(A, B), pcts=(25, 75)) == {A: 25, B: 75}
    assert split(f"{A}@30", ids=(B,)) == {A: 30, B: 70}


@pytest.mark.parametrize(
    ("specs", "ids", "pcts", "message"),
    [
        ((), (), (), "no version to deploy"),
        ((A, B, "30000000-0000-0000-0000-000000000000"), (), (), "3 versions named"),
        ((f"{A}@50", f"{B}@40"), (), (), "add up to 90%"),
        ((f"{A}@80",), (), (), "add up to 80%"),
        ((f"{A}@70", f"{B}@70"), (), (), "add up to 140%"),
        ((f"{A}@fifty",), (), (), "'fifty' is not a percentage"),
        ((f"{A}@101",), (), (), "101% is out of range"),
        ((f"{A}@-1",), (), (), "-1% is out of range"),
        ((), ("not-a-uuid",), (), "--version-id 'not-a-uuid' is not a version id"),
        ((), (A,), (101,), "--percentage 101 is out of range"),
        ((), (A,), (50, 50), "--percentage given 2 times for 1 --version-id"),
    ],
)
def test_bad_splits_say_what_is_wrong(
    specs: tuple[str, ...], ids: tuple[str, ...], pcts: tuple[float, ...], message: str
) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        split(*specs, ids=ids, pcts=pcts)


def _version(version_id: str, created: str, **annotations: str) -> dict:
    return {
        "id": version_id,
        "metadata": {"created_on": created, "author_email": "a@b.c", "source": "wrangler"},
        "annotations": annotations,
    }


def test_deployment_status_layout_is_wranglers() -> None:
    versions = {
        A: _version(A, "2021-01-01T00:00:00.000Z"),
        B: _version(B, "2021-01-01T00:00:00.000Z", **{"workers/tag": "t"}),
    }
    deployment = {
        "created_on": "2021-01-04T00:00:00.000Z",
        "author_email": "Jean-Luc-Picard@federation.org",
        "source": "api",
        "annotations": {"workers/triggered_by": "rollback"},
        "versions": [{"version_id": A, "percentage": 10}, {"version_id": B, "percentage": 90}],
    }
    assert deployment_summary(deployment, versions) == (
        "Created:     2021-01-04T00:00:00.000Z\n"
        "Author:      Jean-Luc-Picard@federation.org\n"
        "Source:      Rollback\n"
        "Message:     -\n"
        f"Version(s):  (10%) {A}\n"
        "                 Created:  2021-01-01T00:00:00.000Z\n"
        "                     Tag:  -\n"
        "                 Message:  -\n"
        "\n"
        f"             (90%) {B}\n"
        "                 Created:  2021-01-01T00:00:00.000Z\n"
        "                     Tag:  t\n"
        "                 Message:  -"
    )


def test_version_list_layout_and_sources() -> None:
    version = _version(A, "2021-01-01T00:00:00.000Z", **{"workers/message": "hi"})
    assert labelled(version_summary(version)) == (
        f"Version ID:  {A}\n"
        "Created:     2021-01-01T00:00:00.000Z\n"
        "Author:      a@b.c\n"
        "Source:      Wrangler 🤠\n"
        "Tag:         -\n"
        "Message:     hi"
    )
    secret = _version(A, "x", **{"workers/triggered_by": "secret"})
    assert version_summary(secret)["Source"] == "Secret Change"
    odd = _version(A, "x", **{"workers/triggered_by": "magic"})
    assert version_summary(odd)["Source"] == "Unknown (magic)"
