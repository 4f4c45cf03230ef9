"""The topic catalog follows docs/CONCEPTS.md, "Topics"."""

from __future__ import annotations

from streams.codec import AvroCodec, SchemaCatalog
from streams.kafka.partitioner import key_partition
from streams.kafka.topic_catalog import (
    TopicRole,
    ledger_partition,
    service_tag_partitions,
    tag_partition,
    topic_specs,
)
from streams.settings import DcbSettings, TopicSettings, WorkerSettings
from streams.worker import build_processors, changelog_layouts


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
        "x.layout",
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
    assert specs[TopicRole.LAYOUT].partitions == 1
    # kept until removed on purpose: the layout, with the topics; the history, by dcb archive
    kept = {r for r, s in specs.items() if s.config().get("retention.ms") == "-1"}
    assert kept == {TopicRole.LAYOUT, TopicRole.EVENTS}
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


def test_the_worker_creates_its_tables_changelogs_itself_partitioned_like_their_sources() -> None:
    settings = DcbSettings(
        topics=TopicSettings(prefix="x.", partitions=4, tag_partitions=16, replication_factor=1),
        worker=WorkerSettings(app_id="w"),
    )
    processors = build_processors(settings, AvroCodec(SchemaCatalog()))
    layouts = {t.name: t for t in changelog_layouts(processors, settings)}
    assert {name: t.partitions for name, t in layouts.items()} == {
        "w-ledger-changelog": 4,  # the tables ledgers, inflight, attempts
        "w-tags-changelog": 16,  # the tables tag-tables, tag-installed
    }
    assert {t.cleanup_policy for t in layouts.values()} == {"compact"}


def test_the_tag_placement_puts_a_services_tags_in_one_partition_or_spreads_them() -> None:
    by_service = TopicSettings(partitions=6, tag_partitions=12, tag_placement="service")
    by_tag = by_service.model_copy(update={"tag_placement": "tag"})
    tags = [f"course:c{i}" for i in range(50)]
    for service in ("shop", "billing", "svc-7"):
        assert {tag_partition(service, t, by_service) for t in tags} == {
            key_partition(service.encode(), 12)
        }
        assert len({tag_partition(service, t, by_tag) for t in tags}) > 6
        assert ledger_partition(service, by_tag) == key_partition(service.encode(), 6)
    # services spread over the tag partitions with the service placement
    assert {tag_partition(f"s{i}", "t", by_service) for i in range(200)} == set(range(12))


def test_a_service_tables_lie_in_its_own_tag_partition_or_in_any() -> None:
    """Where a TRIM for every table of a service goes, by placement."""
    by_service = TopicSettings(prefix="x.", tag_partitions=16, tag_placement="service")
    (own,) = service_tag_partitions("svc", by_service)
    assert {tag_partition("svc", f"t{n}", by_service) for n in range(50)} == {own}
    by_tag = TopicSettings(prefix="x.", tag_partitions=16, tag_placement="tag")
    spread = {tag_partition("svc", f"t{n}", by_tag) for n in range(200)}
    assert spread == set(service_tag_partitions("svc", by_tag)) == set(range(16))
