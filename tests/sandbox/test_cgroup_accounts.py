"""An account's workers share one cpu cgroup, so contended CPU is shared between accounts.

Without it each worker was a sibling of every other in the cpu hierarchy: an account running
ten spinning isolates got ten shares of the machine to another account's one. Real cgroups (v1,
as root); skipped where the host lacks the layer. The CPU split itself is measured in
``bench/account_cpu.py``, not asserted here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ember.errors import ConfigError
from ember.runtime.sandbox import Layer, LayerReport, SandboxSpec
from ember.runtime.sandbox import cgroup as cgroups
from tests.sandbox import attacks
from tests.sandbox.cases import BASE, sandbox_spec
from tests.sandbox.conftest import Tenants
from tests.sandbox.harness import Run, run_sandboxed

LIMITS = cgroups.CgroupLimits(64 << 20, 8, None)


@pytest.fixture
def have_cgroups(report: LayerReport) -> None:
    if Layer.CGROUP not in report.available():
        pytest.skip("this host lacks the cgroup layer")


def _by_controller(paths: tuple[str, ...]) -> dict[str, str]:
    parents = cgroups.parents()
    found = {}
    for controller, parent in parents.items():
        inside = [p for p in paths if p.startswith(parent.rstrip("/") + "/")]
        assert len(inside) == 1, (controller, paths)
        found[controller] = inside[0]
    return found


def test_an_accounts_workers_share_its_cpu_group_and_it_goes_with_the_last(
    have_cgroups: None,
) -> None:
    first = cgroups.create(cgroups.group_name("a1", os.getpid()), LIMITS, ("acme",))
    second = cgroups.create(cgroups.group_name("a2", os.getpid()), LIMITS, ("acme",))
    rival = cgroups.create(cgroups.group_name("b1", os.getpid()), LIMITS, ("rival",))
    try:
        one, two, other = (_by_controller(p) for p in (first, second, rival))
        acme = os.path.dirname(one["cpu"])
        assert os.path.basename(acme) == cgroups.shared_group("acme") == "ember@acme"
        assert os.path.dirname(two["cpu"]) == acme  # one group for the account
        assert os.path.dirname(other["cpu"]) != acme  # and another for the next
        assert os.path.dirname(other["cpu"]) == os.path.dirname(acme) + "/ember@rival"
        for controller in ("memory", "pids"):  # only the cpu hierarchy nests
            assert os.path.dirname(one[controller]) == cgroups.parents()[controller].rstrip("/")
        assert cgroups.remove(first) == []
        assert os.path.isdir(acme)  # its other worker is still there
        assert cgroups.remove(second) == []
        assert not os.path.exists(acme)  # gone with the last
    finally:
        for paths in (first, second, rival):
            cgroups.remove(paths)
    assert not os.path.exists(os.path.dirname(other["cpu"]))


def test_a_worker_starting_after_its_account_group_went_makes_it_again(
    have_cgroups: None,
) -> None:
    first = cgroups.create(cgroups.group_name("a1", os.getpid()), LIMITS, ("acme",))
    group = os.path.dirname(_by_controller(first)["cpu"])
    assert cgroups.remove(first) == []
    assert not os.path.exists(group)
    again = cgroups.create(cgroups.group_name("a2", os.getpid()), LIMITS, ("acme",))
    try:
        assert os.path.dirname(_by_controller(again)["cpu"]) == group
    finally:
        assert cgroups.remove(again) == []


def test_remove_stale_sweeps_dead_workers_in_account_groups_and_empty_groups(
    have_cgroups: None,
) -> None:
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    stale_alone = cgroups.create(cgroups.group_name("s1", dead), LIMITS, ("gone",))
    stale_beside = cgroups.create(cgroups.group_name("s2", dead), LIMITS, ("busy",))
    live = cgroups.create(cgroups.group_name("l1", os.getpid()), LIMITS, ("busy",))
    gone_group = os.path.dirname(_by_controller(stale_alone)["cpu"])
    busy_group = os.path.dirname(_by_controller(live)["cpu"])
    try:
        removed = cgroups.remove_stale()
        assert set(stale_alone) | set(stale_beside) <= set(removed)
        assert gone_group in removed and not os.path.exists(gone_group)
        assert all(os.path.isdir(path) for path in live)  # a live monitor's group stays
        assert os.path.isdir(busy_group)  # and so does its account's
    finally:
        assert cgroups.remove(live) == []
        cgroups.remove(stale_alone)
        cgroups.remove(stale_beside)
    assert not os.path.exists(busy_group)


def _cpu_cgroup_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    raise AssertionError(f"no cpu cgroup line for {pid}")


def test_a_sandboxed_worker_runs_in_its_accounts_cpu_group(
    report: LayerReport, have_cgroups: None, tenants: Tenants
) -> None:
    if Layer.PID_NS not in report.available():
        pytest.skip("this host lacks the pid_ns layer")
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        layers=BASE | {Layer.PID_NS, Layer.CGROUP},
        cpu_nest=("acme:1",),
    )
    seen: dict[str, str] = {}

    def look(run: Run) -> None:
        assert run.startup is not None
        seen["cpu"] = _cpu_cgroup_of(run.startup.worker_pid)

    run = run_sandboxed(spec, attacks.self_test, while_alive=look, linger=True)
    parts = seen["cpu"].strip("/").split("/")
    assert parts[-2] == "ember@acme_1"  # the account's group (its id made safe)
    assert parts[-1].startswith("ember-a-")  # the worker's own inside it
    assert run.leftovers == []
    assert not any(os.path.exists(p) for p in run.startup.cgroups)
    parent = cgroups.parents()["cpu"]
    assert not os.path.exists(os.path.join(parent, "ember@acme_1"))


def test_nested_shared_groups_go_from_the_inside_out(have_cgroups: None) -> None:
    # An outer group of this test's own: ember's "temporary-accounts" is the machine's, and an
    # ember serve running beside the test (another suite, a helper's) may hold a group in it.
    nest = (f"temporary-accounts-test{os.getpid()}", "t1")
    first = cgroups.create(cgroups.group_name("t1", os.getpid()), LIMITS, nest)
    other = cgroups.create(cgroups.group_name("t2", os.getpid()), LIMITS, (nest[0], "t2"))
    one, two = _by_controller(first)["cpu"], _by_controller(other)["cpu"]
    outer = os.path.dirname(os.path.dirname(one))
    try:
        assert os.path.basename(outer) == f"ember@{nest[0]}"
        assert os.path.dirname(os.path.dirname(two)) == outer  # both accounts in the one group
        assert cgroups.remove(first) == []
        assert not os.path.exists(os.path.dirname(one))  # t1's group went with its worker
        assert os.path.isdir(outer)  # the outer group stays while t2 is there
        assert cgroups.remove(other) == []
        assert not os.path.exists(outer)
    finally:
        cgroups.remove(first)
        cgroups.remove(other)


def test_the_nest_must_be_names(tenants: Tenants) -> None:
    for bad in (("",), ("a\0b",), "acme"):
        with pytest.raises(ConfigError, match="cpu_nest"):
            SandboxSpec(deployment_id="a", code_dir=tenants.code_a, cpu_nest=bad)  # type: ignore[arg-type]
    spec = SandboxSpec(deployment_id="a", code_dir=tenants.code_a, cpu_nest=("t", "acme"))
    assert SandboxSpec.from_wire(spec.to_wire()).cpu_nest == ("t", "acme")
