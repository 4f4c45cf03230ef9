"""Configuration precedence: env vars over the config file over defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.settings import DcbSettings


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = DcbSettings()
    assert settings.topics.prefix == "dcb."
    assert settings.resolved_bootstrap_servers == "127.0.0.1:9092"
    assert settings.broker.resolved_data_dir() == settings.broker.cache_dir / "broker-9092"


def test_env_overrides_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text(
        'bootstrap_servers = "10.0.0.1:9092"\n[topics]\nprefix = "file."\npartitions = 9\n'
        "[broker]\nport = 29092\n"
    )
    monkeypatch.setenv("DCB_CONFIG_FILE", str(config))
    from_file = DcbSettings()
    assert from_file.bootstrap_servers == "10.0.0.1:9092"
    assert (from_file.topics.prefix, from_file.topics.partitions) == ("file.", 9)
    assert from_file.broker.port == 29092

    monkeypatch.setenv("DCB_TOPICS__PREFIX", "env.")
    monkeypatch.setenv("DCB_BOOTSTRAP_SERVERS", "127.0.0.1:1234")
    from_env = DcbSettings()
    assert from_env.topics.prefix == "env."
    assert from_env.topics.partitions == 9, "unset env keeps the file's value"
    assert from_env.resolved_bootstrap_servers == "127.0.0.1:1234"


def test_dcb_toml_in_the_working_directory_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dcb.toml").write_text("[topics]\ntag_partitions = 24\n")
    assert DcbSettings().topics.tag_partitions == 24
