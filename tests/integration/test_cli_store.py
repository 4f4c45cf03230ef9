"""`dcb append / read / certificate / reconcile` against a running worker: exit codes and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.settings import DcbSettings
from tests.integration.cli import dcb
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def test_cli_appends_reads_and_reports_structured_errors(
    worker: WorkerProcess, pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    env = {
        "DCB_BOOTSTRAP_SERVERS": pipeline_settings.resolved_bootstrap_servers,
        "DCB_TOPICS__PREFIX": pipeline_settings.topics.prefix,
    }
    events = tmp_path / "events.json"
    events.write_text(
        json.dumps([{"eventType": "UserRegistered", "payload": {"n": "ann"}, "tags": ["user:ann"]}])
    )
    free = json.dumps({"failIfEventsMatch": [{"types": ["UserRegistered"], "tags": ["user:ann"]}]})
    common = ["--service", "cli", "--json"]

    first = dcb("append", *common, "--events", str(events), "--condition", free, env=env)
    assert first.exit_code == 0, first.stdout + first.stderr
    (suid,) = first.json["suids"]

    again = dcb("append", *common, "--events", str(events), "--condition", free, env=env)
    assert again.exit_code == 3
    assert again.json["error"]["code"] == "append_condition_failed"

    bad_inputs = {
        "not json": "validation_error",
        "[]": "empty_attempt",
        json.dumps([{"eventType": "X", "tags": [f"t{i}" for i in range(33)]}]): "too_many_tags",
        json.dumps([{"eventType": "X", "tags": ["t"], "colour": "red"}]): "validation_error",
        json.dumps([{"eventType": "X", "tags": ["x" * 257]}]): "tag_too_long",
        json.dumps([{"eventType": "X", "tags": ["  "]}]): "tags_empty",
    }
    for text, code in bad_inputs.items():
        events.write_text(text)
        result = dcb("append", *common, "--events", str(events), env=env)
        assert result.exit_code == 2, (text, result.stdout, result.stderr)
        assert result.json["error"]["code"] == code, text
        assert "Traceback" not in result.stderr

    read = dcb("read", *common, "--query", '[{"tags": ["user:ann"]}]', env=env)
    assert read.exit_code == 0
    assert [e["position"] for e in read.json] == [suid]  # nothing bad was written
    assert dcb("read", *common, "--after", suid, env=env).json == []

    certificate = dcb("certificate", *common, env=env)
    assert certificate.exit_code == 0
    assert certificate.json["closedPrefixSuid"] >= suid  # the refused attempt settled too
    assert dcb("reconcile", *common, "--now", env=env).exit_code == 0
