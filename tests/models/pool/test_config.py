"""Pool config: shorthand and per-replica forms, defaults per backend, errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.errors import ConfigError
from ember.models.catalog import SHIPPED, SHIPPED_CHECKPOINTS
from ember.models.pool.config import PoolConfig, ReplicaConfig, parse_pool_config

GLM = "@cf/zai-org/glm-4.7-flash"


def test_an_unconfigured_id_gets_one_ember_cpu_replica() -> None:
    serving = PoolConfig().serving(GLM)
    assert serving.replicas == (ReplicaConfig(),)
    assert serving.replicas[0].launched and serving.replicas[0].device == "cpu"


def test_shorthand_count_repeats_the_model_settings() -> None:
    config = parse_pool_config(
        {GLM: {"replicas": 2, "kv_cache_dtype": "fp8_e4m3", "quantization": "int4"}}
    )
    replicas = config.serving(GLM).replicas
    assert len(replicas) == 2
    assert all(r.kv_cache_dtype == "fp8_e4m3" and r.quantization == "int4" for r in replicas)


def test_replica_list_overrides_model_settings_and_sglang_defaults_to_cuda() -> None:
    config = parse_pool_config(
        {
            GLM: {
                "backend": "sglang",
                "kv_cache_dtype": "fp8_e4m3",
                "model_path": "/models/GLM-4.7",
                "replicas": [{"device": "cuda:0,1"}, {"device": "cuda:2,3", "tp": 2}, {}],
            }
        }
    )
    first, second, third = config.serving(GLM).replicas
    assert (first.device, first.tp) == ("cuda:0,1", 2)  # tp follows the GPU list
    assert second.tp == 2
    assert (third.device, third.tp, third.backend) == ("cuda", 1, "sglang")


def test_attached_replicas_are_not_launched() -> None:
    config = parse_pool_config({GLM: {"url": "http://127.0.0.1:30000/"}})
    (replica,) = config.serving(GLM).replicas
    assert not replica.launched and replica.url == "http://127.0.0.1:30000"


def test_relative_checkpoint_is_relative_to_the_config_file(tmp_path: Path) -> None:
    config = parse_pool_config({GLM: {"checkpoint": "ckpt/glm"}}, base=tmp_path)
    assert config.serving(GLM).checkpoint == tmp_path / "ckpt/glm"


def test_a_shipped_checkpoint_is_named_by_its_name_unless_the_project_has_that_directory(
    tmp_path: Path,
) -> None:
    """``checkpoint: kimi-tiny`` is ember's shipped checkpoint (what ``ember ai models`` shows
    under SERVED FROM), without spelling where ember is installed; a directory of that name
    beside the config is the project's own and wins."""
    for name in SHIPPED:
        config = parse_pool_config({GLM: {"checkpoint": name}}, base=tmp_path)
        assert config.serving(GLM).checkpoint == SHIPPED_CHECKPOINTS / name
    (tmp_path / "kimi-tiny").mkdir()
    config = parse_pool_config({GLM: {"checkpoint": "kimi-tiny"}}, base=tmp_path)
    assert config.serving(GLM).checkpoint == tmp_path / "kimi-tiny"
    config = parse_pool_config({GLM: {"checkpoint": "./glmdsa-tiny"}}, base=tmp_path)
    assert config.serving(GLM).checkpoint == tmp_path / "glmdsa-tiny"  # a path is a path


def test_pool_settings() -> None:
    config = parse_pool_config(None, {"start": "eager", "startup_timeout_s": 30})
    assert config.settings.start == "eager" and config.settings.startup_timeout_s == 30.0


@pytest.mark.parametrize(
    ("models", "pool", "key"),
    [
        ({GLM: {"replicas": 0}}, None, f'ai.models."{GLM}".replicas'),
        ({GLM: {"device": "gpu"}}, None, f'ai.models."{GLM}".device'),
        ({GLM: {"kv_cache_dtype": "fp4"}}, None, f'ai.models."{GLM}".kv_cache_dtype'),
        ({GLM: {"quantization": "awq"}}, None, f'ai.models."{GLM}".quantization'),
        ({GLM: {"backend": "vllm"}}, None, f'ai.models."{GLM}".backend'),
        ({GLM: {"tp": 2}}, None, f'ai.models."{GLM}".tp'),
        ({GLM: {"backend": "sglang", "device": "cpu"}}, None, f'ai.models."{GLM}".device'),
        # SGLang loads a checkpoint directory or an HF id; the catalog's tiny ones are ember's.
        ({GLM: {"backend": "sglang"}}, None, f'ai.models."{GLM}".checkpoint'),
        ({GLM: {"replicas": [{"backend": "sglang"}]}}, None, f'ai.models."{GLM}".checkpoint'),
        ({GLM: {"replicas": [{"colour": 1}]}}, None, f'ai.models."{GLM}".replicas[0].colour'),
        ({GLM: {"url": "ftp://x"}}, None, f'ai.models."{GLM}".url'),
        ({GLM: {"spare": True}}, None, f'ai.models."{GLM}".spare'),
        ({GLM: []}, None, f'ai.models."{GLM}"'),
        ([], None, "ai.models"),
        (None, {"start": "soon"}, "ai.pool.start"),
        (None, {"health_interval_s": 0}, "ai.pool.health_interval_s"),
        (None, {"warp": 1}, "ai.pool.warp"),
        ({GLM: {"max_account_requests": 0}}, None, f'ai.models."{GLM}".max_account_requests'),
        ({GLM: {"max_account_requests": True}}, None, f'ai.models."{GLM}".max_account_requests'),
        (None, {"account_share": 0}, "ai.pool.account_share"),
        (None, {"account_share": 1.5}, "ai.pool.account_share"),
    ],
)
def test_errors_name_the_key(models: object, pool: object, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_pool_config(models, pool, file="ember.yaml")
    assert caught.value.key == key
    assert str(caught.value).startswith(f"ember.yaml: {key}: expected ")


def test_sglang_accepts_its_own_quantization_names() -> None:
    config = parse_pool_config(
        {GLM: {"backend": "sglang", "quantization": "w4afp8", "model_path": "/models/GLM-4.7"}}
    )
    assert config.serving(GLM).replicas[0].quantization == "w4afp8"


def test_an_operator_can_serve_configured_ids_only() -> None:
    from ember.errors import ModelNotFound
    from ember.models.pool.pool import ModelPool

    config = parse_pool_config({GLM: {"url": "http://127.0.0.1:9"}}, {"serve_unconfigured": False})
    pool = ModelPool(config, progress=lambda line: None)
    assert pool.model_ids() == [GLM]
    with pytest.raises(ModelNotFound):
        pool.group("@cf/moonshotai/kimi-k2.6")


@pytest.mark.parametrize("serve_unconfigured", [True, False])
def test_knows_is_membership_in_model_ids(serve_unconfigured: bool) -> None:
    """``knows`` (the gateway's per-request check) against its reference, ``model_ids``."""
    import random

    from ember.models.catalog import default_catalog
    from ember.models.pool.pool import ModelPool

    rng = random.Random()
    catalog_ids = default_catalog().ids()
    configured = rng.sample(catalog_ids, rng.randrange(len(catalog_ids) + 1))
    configured += [f"@cf/test/custom-{i}" for i in range(rng.randrange(3))]
    models = {model: {"url": "http://127.0.0.1:9"} for model in configured}
    config = parse_pool_config(models, {"serve_unconfigured": serve_unconfigured})
    pool = ModelPool(config, progress=lambda line: None)
    probes = catalog_ids + configured + ["@cf/test/unknown", "", "@cf/zai-org/glm-4.7-flash "]
    for model in probes:
        assert pool.knows(model) == (model in pool.model_ids()), (model, configured)


@pytest.mark.parametrize(
    "args",
    [
        ["--max-running-requests", "1"],
        ["--max-running-requests=1"],
        ["--max-num-seqs", "1"],  # vLLM's name, which ember models serve takes too
        ["--torch-threads", "1", "--max-running-requests", "1"],
    ],
)
def test_a_slot_limit_in_args_is_the_pools_slot_count(args: list[str]) -> None:
    # The pool sends a replica as many requests as its slots; with the flag only in args it
    # sent 128 to a replica that ran one, so rejectIfBusy waited instead of a 3040.
    replica = parse_pool_config({GLM: {"args": args}}).serving(GLM).replicas[0]
    assert replica.slots == 1 and replica.max_running_requests == 1
    assert not any("max-running" in a or "max-num-seqs" in a for a in replica.args)
    assert "--max-running-requests" not in " ".join(replica.args)


def test_a_slot_limit_in_args_and_in_the_key_must_agree() -> None:
    config = {GLM: {"max_running_requests": 4, "args": ["--max-running-requests", "2"]}}
    with pytest.raises(ConfigError) as bad:
        parse_pool_config(config)
    assert "max_running_requests" in str(bad.value) and "2" in str(bad.value)
    same = {GLM: {"max_running_requests": 2, "args": ["--max-running-requests", "2"]}}
    assert parse_pool_config(same).serving(GLM).replicas[0].slots == 2


def test_a_bad_slot_limit_in_args_is_named() -> None:
    with pytest.raises(ConfigError) as bad:
        parse_pool_config({GLM: {"args": ["--max-running-requests", "many"]}})
    assert "args" in str(bad.value) and "many" in str(bad.value)


KIMI = "@cf/moonshotai/kimi-k2.6"


def test_the_status_of_an_sglang_id_names_what_sglang_loads_not_the_tiny_checkpoint() -> None:
    """``ember ai models`` on an id served by SGLang from ``model_path``: the shipped tiny
    checkpoint and its 4,096 positions say nothing about that model."""
    from ember.models.pool.pool import ModelPool

    config = parse_pool_config(
        {
            KIMI: {"backend": "sglang", "model_path": "/models/Kimi-K2.6"},
            GLM: {"replicas": 1},
        }
    )
    rows = {row.model_id: row for row in ModelPool(config).status()}
    sglang = rows[KIMI]
    assert (sglang.checkpoint, sglang.shipped) == ("/models/Kimi-K2.6", None)
    assert sglang.max_context == sglang.context_window > 4096
    assert rows[GLM].shipped and rows[GLM].max_context == 4096
