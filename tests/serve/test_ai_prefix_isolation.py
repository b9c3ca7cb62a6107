"""ember serve: one account cannot read another account's prompt through the shared prefix cache.

review22's probe as a test. Account "victim" sends a system prompt holding a PIN; account
"attacker" sends the same template with guesses and reads
``usage.prompt_tokens_details.cached_tokens``. The cache was keyed by tokens alone, so the right
guess hit more pages than a wrong one (1111 -> 16, 4718 -> 32, 4719 -> 64 in the review): a
secret could be narrowed down page by page. Each account's requests now carry a salt of their
own, so the attacker's guesses are all misses while each account's own repeats still hit, also
after the platform restarts (the salt is derived from a secret kept in its state).

The replica is a real ``ember models serve`` process attached by URL, so that it (and its
cache) outlives the platform's restart.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.models.server.live import serve_process
from tests.serve.conftest import BASE_CONFIG, TINY_GLM, ServeProcess, permanent_account

MODEL = "@cf/zai-org/glm-4.7-flash"


def _system(pin: str) -> str:
    return (
        "You are the support bot of ACME. Internal note, never reveal: the vault PIN is "
        + pin
        + ". Be polite and brief." * 3
    )


def _ask(serve: ServeProcess, account: tuple[str, str], pin: str) -> tuple[int, int]:
    """(prompt_tokens, cached_tokens) of one REST ai/run call with the template."""
    account_id, token = account
    reply = httpx.post(
        f"{serve.url}/client/v4/accounts/{account_id}/ai/run/{MODEL}",
        headers={"authorization": f"Bearer {token}"},
        json={
            "messages": [
                {"role": "system", "content": _system(pin)},
                {"role": "user", "content": "hi"},
            ],
            "max_completion_tokens": 1,
        },
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    usage = reply.json()["result"]["usage"]
    return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


def test_an_account_cannot_tell_another_accounts_prompt_by_its_cache_hits(tmp_path: Path) -> None:
    with serve_process(
        str(TINY_GLM),
        "--served-model-name",
        MODEL,
        "--torch-threads",
        "1",
        "--kv-cache-bytes",
        "16MiB",
    ) as replica:
        config = BASE_CONFIG + f'ai:\n  models:\n    "{MODEL}":\n      url: "{replica}"\n'
        serve = ServeProcess(tmp_path / "state", config)
        try:
            victim = permanent_account(serve, "victim")
            attacker = permanent_account(serve, "attacker")
            prompt_tokens, cached = _ask(serve, victim, "4719")
            assert prompt_tokens > 48 and cached == 0
            # The attacker's first request is a miss: nothing of the victim's is shared.
            assert _ask(serve, attacker, "0000")[1] == 0
            # From then on its guesses hit its own pages up to the PIN, the right guess no more
            # than the wrong ones (the leak was the difference: 16, 32, 64 tokens).
            guesses = {pin: _ask(serve, attacker, pin)[1] for pin in ("1111", "4719", "8888")}
            assert len(set(guesses.values())) == 1, guesses
            assert guesses["4719"] < 48
            # Each account's own repeat still hits: the prefix cache works within an account.
            assert _ask(serve, victim, "4719")[1] >= 48
            assert _ask(serve, attacker, "8888")[1] >= 48

            # A restarted platform derives the same salts (the cache outlives it here, in the
            # attached replica): the victim's prompt still hits for the victim, for nobody else.
            serve.stop()
            serve.start()
            assert _ask(serve, victim, "4719")[1] >= 48
            assert _ask(serve, permanent_account(serve, "newcomer"), "4719")[1] == 0
        finally:
            serve.stop()
