"""The topic catalog follows DESIGN.md §3."""

from __future__ import annotations

from streams.codec import SchemaCatalog
from streams.kafka.topic_catalog import TopicRole, topic_specs
from streams.settings import TopicSettings


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
