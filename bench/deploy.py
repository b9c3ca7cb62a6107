"""Platform benchmarks: proof-of-work cost on both sides, and deploy command durations.

    PYTHONPATH=. python -m bench.deploy [--quick] [--out bench/results/platform.json]

1. Server verification (``verify_sampled``, the code the API runs) against the full reference and
   against the Python client solver, for several difficulties, in this process.
2. wrangler's solving time: ``wrangler deploy --temporary`` (the real wrangler 4.164, in a
   loopback-only network namespace) against a platform set to difficulty D, minus the same command
   at the trivial difficulty k=g=1; medians over repeated runs, fresh HOME each run.
3. Deploy durations against the real ``ember serve``, from command start to the first 200 from
   the new version at the worker's URL (and to command exit): ``wrangler deploy --temporary``
   and ``ember deploy --temporary`` cold (new temporary account) and warm (redeploy), and a
   logged-in ``ember deploy`` (first deploy of a worker, then a redeploy).
All figures are wall-clock on this machine; compare them as ratios within one run.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a file, bench/ would come first on sys.path: put the repo root there instead.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from ember.runtime.deployments import pow  # noqa: E402
from ember.runtime.deployments.plane import ControlPlane  # noqa: E402
from tests.platform.netns import (  # noqa: E402
    LoopbackNamespace,
    unavailable_reason,
    wrangler_argv,
    wrangler_env,
)

DIFFICULTIES = [(2000, 500), (4000, 1000), (8000, 2000)]  # 1M (ember default), 4M, 16M
SAMPLE = 16  # what the client-side runs use; the server-side table also tries 4 and 8
WRANGLER_TOML = (
    'name = "bench"\nmain = "src/entry.py"\ncompatibility_date = "2026-11-01"\n'
    'compatibility_flags = ["python_workers"]\n'
)


def server_side(k: int, g: int, repeats: int) -> dict[str, float]:
    seed = os.urandom(32)
    started = time.perf_counter()
    raw = pow.solve(seed, k, g)
    python_solve = time.perf_counter() - started
    verify: dict[str, float] = {}
    for sample in (4, 8, 16):
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            assert pow.verify_sampled(seed, k, g, raw, sample)
            times.append(time.perf_counter() - started)
        verify[f"sample_{sample}_ms_median"] = statistics.median(times) * 1e3
    started = time.perf_counter()
    assert pow.verify_full(seed, k, g, raw)
    full = time.perf_counter() - started
    return {
        "k": k,
        "g": g,
        "hashes": k * g,
        "server_verify": verify,
        "full_verify_ms": full * 1e3,
        "python_client_solve_ms": python_solve * 1e3,
    }


ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    return Response("{tag}")
"""


def _project(base: Path) -> Path:
    project = base / "project"
    (project / "src").mkdir(parents=True)
    (project / "wrangler.toml").write_text(WRANGLER_TOML)
    return project


class Deployer:
    """Times deploy commands inside the namespace, from start to the first 200 at the worker."""

    def __init__(self, ns: LoopbackNamespace, project: Path, origin: str) -> None:
        self.ns = ns
        self.project = project
        self.origin = origin
        self.tags = 0

    def timed(
        self, argv: list[str], env: dict[str, str], host_of: Callable[[str], str]
    ) -> dict[str, float]:
        """Write a new entry, run ``argv``, then GET the worker (by the Host ``host_of`` makes
        from the command's output) until it answers 200 with the new entry's text."""
        self.tags += 1
        tag = f"deploy-{self.tags}"
        (self.project / "src" / "entry.py").write_text(ENTRY.format(tag=tag))
        started = time.perf_counter()
        result = self.ns.run(argv, env, self.project, timeout=600)
        exited = time.perf_counter() - started
        if result.returncode != 0:
            raise RuntimeError(result.stdout + result.stderr)
        host = host_of(result.stdout + result.stderr)
        for _ in range(2000):
            status, body = self.ns.fetch(self.origin + "/", host=host)
            if status == 200 and body == tag:
                return {"exit_s": exited, "first_200_s": time.perf_counter() - started}
        raise RuntimeError(f"{host} never answered {tag!r}")


def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def _wrangler_host(output: str) -> str:
    return re.search(r"\n  (bench\.[a-z0-9-]+\.localhost)\n", output).group(1)  # type: ignore[union-attr]


def _ember_host(output: str) -> str:
    url = json.JSONDecoder().raw_decode(output[output.index("{") :])[0]["url"]
    return url.split("//", 1)[1].split(":", 1)[0].split("/", 1)[0]


def client_side(difficulties: list[tuple[int, int]], runs: int) -> dict[str, object]:
    """Deploy command durations per difficulty, in a loopback-only namespace, against the real
    ``ember serve``: command start to exit, and to the first 200 from the new version."""
    out: dict[str, object] = {"wrangler": [], "ember": [], "ember_logged_in": {}}
    ns = LoopbackNamespace()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            base = Path(scratch)
            project = _project(base)
            for index, (k, g) in enumerate([(1, 1), *difficulties]):
                config = base / f"ember-{k}-{g}.yaml"
                config.write_text(
                    f"platform:\n  proof_of_work: {{k: {k}, g: {g}, sample: "
                    f"{min(SAMPLE, k)}}}\n  temporary: "
                    "{creations_per_client_per_hour: 1000}\n"
                )
                state = base / f"state-{k}-{g}"
                port = ns.start_platform(state, config)
                origin = f"http://127.0.0.1:{port}"
                deployer = Deployer(ns, project, origin)
                rows: dict[str, list[dict[str, float]]] = {
                    name: []
                    for name in ("w_cold", "w_warm", "e_cold", "e_warm", "l_cold", "l_warm")
                }
                for run in range(runs):
                    home = base / f"home-{k}-{g}-{run}"
                    home.mkdir()
                    env = wrangler_env(home, origin + "/client/v4")
                    argv = wrangler_argv("deploy", "--temporary")
                    rows["w_cold"].append(deployer.timed(argv, env, _wrangler_host))
                    rows["w_warm"].append(deployer.timed(argv, env, _wrangler_host))
                    ember_env = {
                        **os.environ,
                        "PYTHONPATH": str(ROOT),
                        "EMBER_CREDENTIALS": str(home / "ember.json"),
                        "EMBER_PLATFORM": origin,
                    }
                    ember_env.pop("EMBER_API_TOKEN", None)
                    argv = [sys.executable, "-m", "ember", "deploy", "--temporary", "--json"]
                    rows["e_cold"].append(deployer.timed(argv, ember_env, _ember_host))
                    rows["e_warm"].append(deployer.timed(argv, ember_env, _ember_host))
                    if index == 0:  # a logged-in deploy does no proof of work: measure it once
                        plane = ControlPlane(state)
                        _, issued = plane.accounts.create_permanent(f"bench-{run}")
                        plane.close()
                        logged_in = {**ember_env, "EMBER_API_TOKEN": issued.token}
                        argv = [sys.executable, "-m", "ember", "deploy", "--json"]
                        rows["l_cold"].append(deployer.timed(argv, logged_in, _ember_host))
                        rows["l_warm"].append(deployer.timed(argv, logged_in, _ember_host))
                for tool, prefix in (("wrangler", "w"), ("ember", "e")):
                    out[tool].append(
                        {
                            "k": k,
                            "g": g,
                            "cold": _median(rows[f"{prefix}_cold"]),
                            "warm": _median(rows[f"{prefix}_warm"]),
                            "runs": runs,
                        }
                    )
                if index == 0:
                    out["ember_logged_in"] = {
                        "cold": _median(rows["l_cold"]),
                        "warm": _median(rows["l_warm"]),
                        "runs": runs,
                    }
    finally:
        ns.close()
    for tool in ("wrangler", "ember"):
        tool_rows = out[tool]
        baseline = tool_rows[0]["cold"]["exit_s"]  # type: ignore[index]
        for row in tool_rows:  # type: ignore[union-attr]
            row["solve_s_estimate"] = row["cold"]["exit_s"] - baseline
    return out


def plot(results: dict[str, object], path: Path) -> None:
    """Client solve time vs server verify time per difficulty (log scale); needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    server = results["pow_server"]
    labels = [f"{row['hashes'] / 1e6:g}M\n(k={row['k']}, g={row['g']})" for row in server]
    series = {
        "server verify, 16 segments (ms)": [
            row["server_verify"]["sample_16_ms_median"] for row in server
        ],
        "Python solve, ember CLI (ms)": [row["python_client_solve_ms"] for row in server],
    }
    clients = results.get("clients", {})
    if "wrangler" in clients:
        by_hashes = {r["k"] * r["g"]: r["solve_s_estimate"] * 1e3 for r in clients["wrangler"]}
        series["wrangler solve, measured (ms)"] = [
            by_hashes.get(row["hashes"], float("nan")) for row in server
        ]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("milliseconds (log)")
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels)
    ax.axhline(10, color="grey", linestyle="--", linewidth=1)
    ax.set_title("Temporary-account proof of work: client cost vs server cost")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M and 4M only, 2 runs each")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "platform.json")
    parser.add_argument(
        "--plot-only", action="store_true", help="only redraw the plot from an existing --out file"
    )
    args = parser.parse_args()
    png = args.out.with_name("platform_pow.png")
    if args.plot_only:
        plot(json.loads(args.out.read_text()), png)
        return
    difficulties = DIFFICULTIES[:2] if args.quick else DIFFICULTIES
    runs = 2 if args.quick else 3
    results: dict[str, object] = {
        "machine": {
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            "system": " ".join(os.uname()[::2]),
            "loadavg_before": os.getloadavg(),
        },
        "pow_server": [server_side(k, g, repeats=50) for k, g in difficulties],
    }
    print(json.dumps(results["pow_server"], indent=2))
    reason = unavailable_reason()
    if reason:
        results["clients"] = {"skipped": reason}
    else:
        results["clients"] = client_side(difficulties, runs)
    print(json.dumps(results["clients"], indent=2))
    results["machine"]["loadavg_after"] = os.getloadavg()  # type: ignore[index]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    try:
        plot(results, png)
        print(f"wrote {png}")
    except ImportError:
        print("matplotlib is not installed: no plot")


if __name__ == "__main__":
    main()
