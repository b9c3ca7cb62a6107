"""The ``platform:`` section of ember.yaml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ember.errors import ConfigError
from ember.runtime.deployments.config import (
    PlatformConfig,
    load_platform_config,
    parse_duration,
    parse_platform_config,
    parse_size,
)


def test_full_section(tmp_path: Path) -> None:
    path = tmp_path / "ember.yaml"
    path.write_text(
        "name: my-worker\n"
        "platform:\n"
        "  public_url: http://127.0.0.1:8787/\n"
        "  max_script_size: 8MiB\n"
        "  max_isolates: 12\n"
        "  proof_of_work: {k: 2000, g: 1000, sample: 12, challenge_ttl: 5m}\n"
        "  temporary:\n"
        "    ttl: 2h\n"
        "    max_workers: 3\n"
        "    max_script_size: 1MiB\n"
        "    max_kv_bytes: 10MB\n"
        "    ai_requests_per_minute: 30\n"
        "    cpu_ms_per_request: 20\n"
    )
    config = load_platform_config(path)
    assert config.public_url == "http://127.0.0.1:8787"
    assert config.max_isolates == 12
    assert config.proof_of_work.k == 2000 and config.proof_of_work.challenge_ttl_seconds == 300
    assert config.temporary.ttl_seconds == 7200 and config.temporary.max_kv_bytes == 10_000_000
    limits = config.limits_for(temporary=True)
    assert limits.max_script_bytes == 1024**2 and limits.max_workers == 3
    assert limits.cpu_ms_per_request == 20 and limits.ai_requests_per_minute == 30
    assert config.limits_for(temporary=False).max_workers == 500  # platform.accounts' default


def test_absent_section_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "ember.yaml"
    path.write_text("name: w\n")
    assert load_platform_config(path) == PlatformConfig()


@pytest.mark.parametrize(
    "section, key",
    [
        ({"temporary": {"tll": "1h"}}, "platform.temporary.tll"),
        ({"proof_of_work": {"k": 10000, "g": 10000}}, "platform.proof_of_work.k*g"),
        ({"proof_of_work": {"k": 0}}, "platform.proof_of_work.k"),
        ({"temporary": {"max_script_size": "lots"}}, "platform.temporary.max_script_size"),
        ({"public_url": "ftp://x"}, "platform.public_url"),
        ({"max_isolates": 0}, "platform.max_isolates"),
        ({"max_isolates": "many"}, "platform.max_isolates"),
        ({"versions_kept_per_worker": 0}, "platform.versions_kept_per_worker"),
        ({"versions_kept_per_worker": "all"}, "platform.versions_kept_per_worker"),
        ({"versions_kept_per_worker": None}, "platform.versions_kept_per_worker"),
        (
            {"temporary": {"versions_kept_per_worker": 1.5}},
            "platform.temporary.versions_kept_per_worker",
        ),
        (
            {"temporary": {"max_stored_script_bytes": "lots"}},
            "platform.temporary.max_stored_script_bytes",
        ),
        ([], "platform"),
    ],
)
def test_bad_values_name_the_key(section: object, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_platform_config(section)
    assert error.value.key == key


def test_units() -> None:
    assert parse_size("5MiB") == 5 * 1024**2 and parse_size(12) == 12 and parse_size("0") is None
    assert parse_duration("90s") == 90 and parse_duration("1h") == 3600
    assert parse_duration(True) is None and parse_duration("1 fortnight") is None


def test_the_default_isolate_cap_fits_the_machine() -> None:
    from ember.runtime.capacity import (
        BYTES_PER_ISOLATE,
        MIN_DEFAULT_ISOLATES,
        default_max_isolates,
        usable_memory,
    )

    assert PlatformConfig().max_isolates is None  # decided by the machine ember serve runs on
    ram = usable_memory(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    assert default_max_isolates() == max(MIN_DEFAULT_ISOLATES, ram // BYTES_PER_ISOLATE)


def test_accounts_section_sets_permanent_accounts_limits(tmp_path: Path) -> None:
    path = tmp_path / "ember.yaml"
    path.write_text(
        "platform:\n"
        "  accounts:\n"
        "    max_workers: 20\n"
        "    max_versions: 400\n"
        "    max_kv_bytes: 2GiB\n"
        "    max_kv_namespaces: 7\n"
        "    ai_requests_per_minute: null\n"  # null: unlimited
        "    cpu_ms_per_request: 1000\n"
    )
    limits = load_platform_config(path).limits_for(temporary=False)
    assert (limits.max_workers, limits.max_versions) == (20, 400)
    assert (limits.max_kv_bytes, limits.max_kv_namespaces) == (2 * 1024**3, 7)
    assert limits.ai_requests_per_minute is None and limits.cpu_ms_per_request == 1000
    # The temporary tier keeps its own.
    assert load_platform_config(path).limits_for(temporary=True).max_workers == 5


def test_permanent_accounts_have_protective_defaults() -> None:
    limits = PlatformConfig().limits_for(temporary=False)
    assert limits.max_workers == 500  # Workers Paid
    assert limits.max_kv_bytes == 1024**3  # KV storage on Workers Free
    assert limits.max_kv_namespaces == 1000
    assert limits.max_versions == 10_000
    assert limits.ai_requests_per_minute == 300  # Workers AI text generation
    assert limits.cpu_ms_per_request == 300_000  # Workers Paid's most
    assert limits.max_script_bytes == PlatformConfig().max_script_bytes


def test_the_older_cpu_key_still_caps_permanent_accounts() -> None:
    config = parse_platform_config({"cpu_ms_per_request": 900})
    assert config.limits_for(temporary=False).cpu_ms_per_request == 900
    with pytest.raises(ConfigError) as error:
        parse_platform_config({"cpu_ms_per_request": 900, "accounts": {"cpu_ms_per_request": 5}})
    assert error.value.key == "platform.cpu_ms_per_request"
    assert "platform.accounts.cpu_ms_per_request" in str(error.value)


@pytest.mark.parametrize(
    "accounts, key",
    [
        ({"max_wokers": 3}, "platform.accounts.max_wokers"),
        ({"max_workers": 0}, "platform.accounts.max_workers"),
        ({"max_versions": "many"}, "platform.accounts.max_versions"),
        ({"max_kv_bytes": "lots"}, "platform.accounts.max_kv_bytes"),
        ({"max_kv_bytes": -1}, "platform.accounts.max_kv_bytes"),
        ({"max_kv_namespaces": True}, "platform.accounts.max_kv_namespaces"),
        ({"ai_requests_per_minute": 1.5}, "platform.accounts.ai_requests_per_minute"),
        ({"cpu_ms_per_request": 300_001}, "platform.accounts.cpu_ms_per_request"),
        ({"max_script_size": "1MiB"}, "platform.accounts.max_script_size"),
        ({"max_stored_script_bytes": "1 pile"}, "platform.accounts.max_stored_script_bytes"),
        ({"max_stored_script_bytes": 0}, "platform.accounts.max_stored_script_bytes"),
        ({"versions_kept_per_worker": 5}, "platform.accounts.versions_kept_per_worker"),
        ([], "platform.accounts"),
    ],
)
def test_bad_accounts_values_name_the_key_and_file(
    tmp_path: Path, accounts: object, key: str
) -> None:
    import json

    path = tmp_path / "ember.yaml"
    path.write_text("platform:\n  accounts: " + json.dumps(accounts) + "\n")
    with pytest.raises(ConfigError) as error:
        load_platform_config(path)
    assert error.value.key == key and error.value.file == str(path)


def test_retention_and_stored_bytes(tmp_path: Path) -> None:
    path = tmp_path / "ember.yaml"
    path.write_text(
        "platform:\n"
        "  versions_kept_per_worker: 20\n"
        "  accounts:\n"
        "    max_stored_script_bytes: 2GiB\n"
        "  temporary:\n"
        "    versions_kept_per_worker: 50\n"  # the lower of the two applies
        "    max_stored_script_bytes: 8MiB\n"
    )
    config = load_platform_config(path)
    permanent, temporary = config.limits_for(temporary=False), config.limits_for(temporary=True)
    assert (permanent.versions_kept_per_worker, permanent.max_stored_script_bytes) == (
        20,
        2 * 1024**3,
    )
    assert (temporary.versions_kept_per_worker, temporary.max_stored_script_bytes) == (
        20,
        8 * 1024**2,
    )
    unlimited = parse_platform_config({"accounts": {"max_stored_script_bytes": None}})
    assert unlimited.limits_for(temporary=False).max_stored_script_bytes is None


def test_retention_and_stored_bytes_defaults() -> None:
    permanent = PlatformConfig().limits_for(temporary=False)
    temporary = PlatformConfig().limits_for(temporary=True)
    assert permanent.versions_kept_per_worker == 100  # Cloudflare's rollback window
    assert permanent.max_stored_script_bytes == 1024**3
    # max_versions / max_workers: a temporary account's history alone never reaches its cap.
    assert temporary.versions_kept_per_worker == 10
    assert temporary.versions_kept_per_worker * temporary.max_workers == temporary.max_versions
    assert temporary.max_stored_script_bytes == 250 * 1024**2


def test_each_account_kind_runs_on_a_share_of_each_models_slots() -> None:
    defaults = PlatformConfig()
    assert defaults.limits_for(temporary=False).ai_running_share == 0.5
    assert defaults.limits_for(temporary=True).ai_running_share == 0.25
    config = parse_platform_config(
        {"accounts": {"ai_running_share": None}, "temporary": {"ai_running_share": 0.1}}
    )
    assert config.limits_for(temporary=False).ai_running_share is None  # every slot
    assert config.limits_for(temporary=True).ai_running_share == 0.1


@pytest.mark.parametrize(
    ("section", "value"),
    [("accounts", 0), ("accounts", 1.5), ("temporary", "half"), ("temporary", None)],
)
def test_a_bad_running_share_names_the_key(section: str, value: object) -> None:
    with pytest.raises(ConfigError) as error:
        parse_platform_config({section: {"ai_running_share": value}})
    assert error.value.key == f"platform.{section}.ai_running_share"
    assert "a number above 0 and at most 1" in str(error.value)


def test_each_account_kind_holds_a_share_of_the_isolates() -> None:
    defaults = PlatformConfig()
    permanent, temporary = defaults.limits_for(temporary=False), defaults.limits_for(True)
    assert (permanent.isolate_share, permanent.total_isolate_share) == (0.5, None)
    assert (temporary.isolate_share, temporary.total_isolate_share) == (0.1, 0.25)
    config = parse_platform_config(
        {
            "accounts": {"isolate_share": None},
            "temporary": {"isolate_share": 0.2, "total_isolate_share": 1},
        }
    )
    assert config.limits_for(temporary=False).isolate_share is None  # every isolate
    limits = config.limits_for(temporary=True)
    assert (limits.isolate_share, limits.total_isolate_share) == (0.2, 1.0)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("accounts", "isolate_share", 0),
        ("accounts", "isolate_share", "half"),
        ("temporary", "isolate_share", None),
        ("temporary", "total_isolate_share", 2),
        ("temporary", "total_isolate_share", True),
    ],
)
def test_a_bad_isolate_share_names_the_key(section: str, key: str, value: object) -> None:
    with pytest.raises(ConfigError) as error:
        parse_platform_config({section: {key: value}})
    assert error.value.key == f"platform.{section}.{key}"
    assert "a number above 0 and at most 1" in str(error.value)


def test_permanent_accounts_have_no_total_isolate_share() -> None:
    with pytest.raises(ConfigError) as error:
        parse_platform_config({"accounts": {"total_isolate_share": 0.5}})
    assert error.value.key == "platform.accounts.total_isolate_share"


def test_claims_default_to_open_and_three_per_client_a_day() -> None:
    temporary = parse_platform_config({}).temporary
    assert (temporary.claim, temporary.claims_per_day) == ("open", 3)
    assert parse_platform_config({}).limits_for(temporary=True).remedy("x") == "claim the account"


@pytest.mark.parametrize("value", ["off", False])  # an unquoted YAML ``off`` reads as false
def test_claims_can_be_turned_off(value: object) -> None:
    config = parse_platform_config({"temporary": {"claim": value, "claims_per_day": 1}})
    assert (config.temporary.claim, config.temporary.claims_per_day) == ("off", 1)
    assert "operator for an account" in config.limits_for(temporary=True).remedy("x")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("claim", "closed", "open or off"),
        ("claim", True, "open or off"),
        ("claims_per_day", 0, "a positive integer"),
        ("claims_per_day", "few", "a positive integer"),
    ],
)
def test_bad_claim_settings_name_the_key(key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_platform_config({"temporary": {key: value}})
    assert error.value.key == f"platform.temporary.{key}"
    assert expected in str(error.value)
