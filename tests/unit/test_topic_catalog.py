"""The topic catalog follows DESIGN.md §3."""

from __future__ import annotations

from pathlib import Path

from streams.codec import SchemaCatalog
from streams.kafka.faust_app import changelog_layouts
from streams.kafka.topic_catalog import TopicRole, key_partition, topic_specs
from streams.settings import DcbSettings, TopicSettings, WorkerSettings
from streams.worker import build_worker


def test_every_topic_of_the_design_with_its_policy_and_schema() -> None:
    specs = {
        s.role: s for s in topic_specs(TopicSettings(prefix="x.", partitions=4, tag_partitions=16))
    }
    assert [s.name for s in specs.values()] == [
        "x.commands",
        "x.allocations",
        "x.tag-deliveries",
        "x.tag-resolutions",
        "x.events",
        "x.certificates",
        "x.commit-results",
        "x.dead-letters",
    ]
    assert {r for r, s in specs.items() if s.cleanup_policy == "compact"} == {
        TopicRole.CERTIFICATES
    }
    # one service's ledger lives in one partition: the ledger-side topics are co-partitioned
    ledger_side = [
        TopicRole.COMMANDS,
        TopicRole.ALLOCATIONS,
        TopicRole.TAG_RESOLUTIONS,
        TopicRole.EVENTS,
        TopicRole.CERTIFICATES,
        TopicRole.COMMIT_RESULTS,
    ]
    assert {specs[r].partitions for r in ledger_side} == {4}
    assert specs[TopicRole.TAG_DELIVERIES].partitions == 16
    catalog = SchemaCatalog()
    assert all(catalog.has(s.schema_name) for s in specs.values())


# Kafka's own murmur2 test vectors (org.apache.kafka.common.utils.UtilsTest), as signed ints.
MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "abc": 479470107,
}


def test_key_partition_is_kafkas_default_partitioner() -> None:
    for key, signed in MURMUR2.items():
        assert key_partition(key.encode(), 12) == (signed & 0x7FFFFFFF) % 12
    assert {key_partition(f"svc-{i}".encode(), 6) for i in range(100)} == set(range(6))


def test_the_worker_creates_its_tables_changelogs_itself_partitioned_like_their_sources(
    tmp_path: Path,
) -> None:
    settings = DcbSettings(
        bootstrap_servers="127.0.0.1:1",  # never contacted: the app is only built
        topics=TopicSettings(prefix="x.", partitions=4, tag_partitions=16, replication_factor=1),
        worker=WorkerSettings(app_id="w", data_dir=tmp_path),
    )
    layouts = {t.name: t for t in changelog_layouts(build_worker(settings), 1)}
    assert {name: t.partitions for name, t in layouts.items()} == {
        "w-ledgers-changelog": 4,
        "w-inflight-changelog": 4,
        "w-attempts-changelog": 4,
        "w-tag-tables-changelog": 16,
        "w-tag-installed-changelog": 16,
    }
    assert {t.cleanup_policy for t in layouts.values()} == {"compact"}
