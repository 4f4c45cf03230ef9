"""``dcb topics create`` against the real broker."""

from __future__ import annotations

import pytest

from streams.kafka.topic_catalog import TopicRole
from tests.integration.cli import dcb
from tests.integration.kafka_helpers import create_topic

pytestmark = pytest.mark.integration


def test_create_twice_gives_the_same_topics(bootstrap_servers: str, topic_prefix: str) -> None:
    args = (
        "topics",
        "create",
        "--json",
        "-b",
        bootstrap_servers,
        "--prefix",
        topic_prefix,
        "--partitions",
        "3",
        "--tag-partitions",
        "5",
    )
    first = dcb(*args)
    assert first.exit_code == 0, first.stderr + first.stdout
    second = dcb(*args)
    assert second.exit_code == 0, second.stderr + second.stdout

    def view(result: list[dict[str, object]]) -> dict[object, tuple[object, object]]:
        return {t["name"]: (t["partitions"], t["cleanupPolicy"]) for t in result}

    assert {t["action"] for t in first.json["topics"]} == {"created"}
    assert {t["action"] for t in second.json["topics"]} == {"exists"}
    assert view(first.json["topics"]) == view(second.json["topics"])
    expected = {f"{topic_prefix}{role.value}" for role in TopicRole}
    assert set(view(second.json["topics"])) == expected
    topics = view(second.json["topics"])
    assert topics[f"{topic_prefix}certificates"] == (3, "compact")
    assert topics[f"{topic_prefix}tag-deliveries"] == (5, "delete")
    assert topics[f"{topic_prefix}events"] == (3, "delete")
    assert first.json["layout"] == second.json["layout"]
    assert first.json["layout"] == {"tagPlacement": "SERVICE", "partitions": 3, "tagPartitions": 5}


def test_the_layout_is_fixed_by_the_first_creation(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    base = ("topics", "create", "--json", "-b", bootstrap_servers, "--prefix", topic_prefix)
    first = dcb(*base, "--tag-placement", "tag")
    assert first.exit_code == 0, first.stderr + first.stdout
    assert first.json["layout"]["tagPlacement"] == "TAG"
    again = dcb(*base, "--tag-placement", "service")
    assert again.exit_code == 1
    assert again.json["error"]["code"] == "topic_layout_mismatch"
    assert "tag_placement=TAG" in again.json["error"]["message"]


def test_existing_topic_with_another_shape_is_reported_not_changed(
    bootstrap_servers: str, topic_prefix: str
) -> None:
    create_topic(
        bootstrap_servers,
        f"{topic_prefix}certificates",
        partitions=1,
        **{"cleanup.policy": "delete"},
    )
    result = dcb("topics", "create", "--json", "-b", bootstrap_servers, "--prefix", topic_prefix)
    assert result.exit_code == 1
    error = result.json["error"]
    assert error["code"] == "topic_config_mismatch"
    (mismatch,) = error["details"]["mismatches"]
    assert mismatch["topic"] == f"{topic_prefix}certificates"
    assert (mismatch["partitions"], mismatch["cleanupPolicy"]) == (1, "delete")
