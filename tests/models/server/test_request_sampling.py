"""The server's sampler: without a grammar it is exactly the engine's sampler; with one, the
tokens it picks are the grammar's, and its incremental matcher agrees with a fresh one."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest
import torch

from ember.models.constrain.grammar import Grammar
from ember.models.constrain.session import ConstraintSpec, build_root, compile_grammar
from ember.models.engine.sampling import RequestSampler
from ember.models.sampling import SamplingParams, SamplingState
from ember.models.server.request_sampling import ServerSampler, reference_masks
from tests.models.constrain.fixtures import small_vocab

VOCAB = small_vocab()
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 22, 333]}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
SPEC = ConstraintSpec(json="schema", schema=SCHEMA)


def built(spec: ConstraintSpec) -> Grammar:
    """What the server registers: the grammar built off the engine thread (grammar_builds)."""
    return compile_grammar(spec, VOCAB)


@dataclass
class FakeSequence:
    """The fields the samplers read of an engine ``Sequence`` (their typed seam)."""

    request_id: str
    token_ids: list[int]
    num_prompt_tokens: int
    sampling: object = None


def _seqs(count: int, seed: int, params: SamplingParams | None) -> list[FakeSequence]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        prompt = [rng.randrange(VOCAB.size) for _ in range(rng.randint(1, 8))]
        state = SamplingState.create(params, VOCAB.size, prompt) if params else None
        out.append(FakeSequence(f"r{i}", prompt, len(prompt), state))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_without_a_grammar_it_is_the_engines_sampler(seed: int) -> None:
    torch.manual_seed(seed)
    logits = torch.randn(6, VOCAB.size)
    params = SamplingParams(temperature=0.8, seed=seed, top_k=20)
    ours = ServerSampler(VOCAB).sample(logits, _seqs(6, seed, params))
    theirs = RequestSampler().sample(logits, _seqs(6, seed, params))
    assert ours.tokens == theirs.tokens


def _generate(sampler: ServerSampler, seq: FakeSequence, rng: torch.Generator, drop: bool):
    """Sample until EOS; with ``drop``, every third step is discarded (as an integrity retry)."""
    for step in range(400):
        logits = torch.randn(1, VOCAB.size, generator=rng)
        token = sampler.sample(logits, [seq]).tokens[0]
        if token in VOCAB.eos_ids:
            return
        if drop and step % 3 == 2:
            continue
        seq.token_ids.append(token)
    raise AssertionError("the grammar never finished")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("drop", [False, True])
def test_constrained_rows_follow_the_grammar(seed: int, drop: bool) -> None:
    sampler = ServerSampler(VOCAB)
    seq = FakeSequence("c", [0], 1)
    plain = FakeSequence("p", [0], 1)
    sampler.constrain("c", built(SPEC))
    rng = torch.Generator().manual_seed(seed)
    _generate(sampler, seq, rng, drop)
    text = b"".join(VOCAB.tokens[t] or b"" for t in seq.token_ids[1:]).decode()
    value = json.loads(text)
    assert value["ok"] in (True, False) and value["n"] in (1, 22, 333)
    # An unconstrained row in the same batch is untouched by the mask.
    logits = torch.randn(2, VOCAB.size, generator=rng)
    logits[1, 7] = 100.0
    assert sampler.sample(logits, [seq, plain]).tokens[1] == 7
    sampler.release("c")
    sampler.sample(logits[1:], [plain])
    assert sampler._matchers == {}, "released matchers are dropped at the next step"


def test_incremental_masks_equal_fresh_matchers() -> None:
    sampler = ServerSampler(VOCAB)
    seq = FakeSequence("c", [0], 1)
    sampler.constrain("c", built(SPEC))
    rng = torch.Generator().manual_seed(11)
    prefixes, masks = [], []
    for _ in range(12):
        mask = sampler._mask(seq)
        masks.append(set(mask.token_ids()))
        prefixes.append(list(seq.token_ids[1:]))
        logits = torch.randn(1, VOCAB.size, generator=rng)
        token = sampler.sample(logits, [seq]).tokens[0]
        if token in VOCAB.eos_ids:
            break
        seq.token_ids.append(token)
    assert masks == reference_masks(VOCAB, SPEC, prefixes)


def test_a_grammar_failure_fails_only_its_own_row() -> None:
    """A constrained row whose matcher cannot go on (here: its sequence holds a token the
    grammar refuses, as a grammar bug would leave it) is reported as that row's failure,
    naming the request; the other rows of the batch are sampled as usual."""
    sampler = ServerSampler(VOCAB)
    broken = FakeSequence("broken", [0, ord("x")], 1)  # a JSON object cannot start with 'x'
    fine = FakeSequence("fine", [0], 1)
    plain = FakeSequence("plain", [0], 1)
    sampler.constrain("broken", built(SPEC))
    sampler.constrain("fine", built(SPEC))
    logits = torch.randn(3, VOCAB.size, generator=torch.Generator().manual_seed(3))
    logits[2, 7] = 100.0
    result = sampler.sample(logits, [broken, fine, plain])
    assert set(result.failed) == {0}
    assert "broken" in str(result.failed[0]) and "not allowed by the grammar" in str(
        result.failed[0]
    )
    assert result.tokens[1] in set(sampler._mask(fine).token_ids())
    assert result.tokens[2] == 7


def test_a_reused_request_id_gets_its_own_grammar() -> None:
    """A request released and a new one registered under the same id before the next step
    (a client reusing /generate's ``rid``): the new one is matched against its own grammar
    from its first token, not the old matcher and the old request's progress."""
    sampler = ServerSampler(VOCAB)
    old = FakeSequence("r", [0, *b'{"ok'], 1)
    sampler.constrain("r", built(SPEC))
    sampler._mask(old)
    sampler.release("r")
    other = ConstraintSpec(json="schema", schema={"enum": ["yes", "no"]})
    sampler.constrain("r", built(other))
    new = FakeSequence("r", [0], 1)
    assert set(sampler._mask(new).token_ids()) == reference_masks(VOCAB, other, [[]])[0]


def test_an_unexpected_grammar_error_fails_only_its_own_row() -> None:
    """Advancing a request's matcher may fail in ways no ConstraintViolation names (a bug in a
    grammar node, a schema deep enough for a RecursionError): the row fails with an error
    naming the request and saying it is ember's fault, and the batch's other rows go on."""

    class Failing(Grammar):
        def next(self, sid: int, sym: int) -> int:
            raise RecursionError("maximum recursion depth exceeded")

    sampler = ServerSampler(VOCAB)
    broken = FakeSequence("broken", [0, ord("{")], 1)  # one token to advance over
    fine = FakeSequence("fine", [0], 1)
    sampler.constrain("broken", Failing(build_root(SPEC, VOCAB.special_ids)))
    sampler.constrain("fine", built(SPEC))
    logits = torch.randn(2, VOCAB.size, generator=torch.Generator().manual_seed(5))
    result = sampler.sample(logits, [broken, fine])
    assert set(result.failed) == {0}
    message = str(result.failed[0])
    assert "broken" in message and "RecursionError" in message, message
    assert result.tokens[1] in set(sampler._mask(fine).token_ids())
    # The failed request's grammar is gone: a later step does not try it again.
    assert "broken" not in sampler._specs
