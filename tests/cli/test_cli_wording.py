"""Small things an agent reading the CLI tripped on: times left never rounded up, a bad
``--max-tokens`` named as the flag it typed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ember.cli.credentials import distance
from ember.cli.main import main


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (128, "2m08s"),  # was "2 minutes"; 2m38s was "3 minutes"
        (158.9, "2m38s"),
        (60, "1m00s"),
        (45, "45 seconds"),
        (1, "1 second"),
        (599.9, "9m59s"),
        (3599.5, "60 minutes"),  # a fresh 60-minute account, as wrangler words it
        (3 * 3600, "3 hours"),
    ],
)
def test_time_left_is_never_more_than_is_left(seconds: float, said: str) -> None:
    assert distance(seconds) == said


def test_max_tokens_is_named_as_the_flag() -> None:
    with CliRunner().isolation() as (stdout, stderr, _):
        with pytest.raises(SystemExit) as exited:
            main(["ai", "run", "@cf/zai-org/glm-4.7-flash", "hi", "--max-tokens", "-5"])
        said = stderr.getvalue().decode()
    assert exited.value.code == 2, said
    assert "'--max-tokens'" in said and "max_completion_tokens" not in said, said
