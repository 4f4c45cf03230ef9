"""The commit path on the real broker: `dcb worker` processes, the SDK, an independent fold."""

from __future__ import annotations

import io
import json
import random
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import fastavro
import fastavro.schema
import pytest
from confluent_kafka import TopicPartition

from streams.codec import AvroCodec
from streams.codec.catalog import crc64_avro_fingerprint
from streams.demo.courses import define_courses, run_subscriptions
from streams.errors import (
    AnswerTimeoutError,
    AppendConditionFailed,
    KafkaUnavailableError,
    ReservationExpiredError,
    StaleFenceError,
    TooManyTagsError,
)
from streams.kafka import clients
from streams.kafka.store_layout import ensure_layout
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import (
    AllocationBatch,
    AppendCondition,
    Certificate,
    Command,
    CommitAttempt,
    CommitResult,
    CommittedEvent,
    DeadLetter,
    EventData,
    QueryItem,
)
from streams.sdk import DcbClient
from streams.settings import DcbSettings
from tests.integration.kafka_helpers import create_topic, produce_all, read_all, records_on
from tests.integration.load import registered
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration


def name_is_free(name: str, after: str | None = None) -> AppendCondition:
    query = [QueryItem(types=["UserRegistered"], tags=[f"username:{name}"])]
    return AppendCondition(fail_if_events_match=query, after=after)


def settled_certificate(
    client: DcbClient, timeout_s: float = 60, covering: str | None = None
) -> Certificate:
    """The certificate once nothing is unresolved (rejected attempts settle after their
    answer) and its prefix reaches ``covering`` (certificates follow a round late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        certificate = client.certificate()
        if (
            certificate is not None
            and certificate.unresolved_count == 0
            and (certificate.closed_prefix_suid or "") >= (covering or "")
        ):
            return certificate
        assert time.monotonic() < deadline, f"never settled: {certificate}"
        time.sleep(0.2)


def test_append_read_certificate_and_a_failed_condition(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    with DcbClient(service_id="shop", settings=pipeline_settings, timeout_s=60) as client:
        assert client.certificate() is None
        first = client.append([registered("bob", "org:acme")], name_is_free("bob"))
        assert len(first.suids) == 1
        events = client.read([QueryItem(tags=["username:bob"])])
        assert [e.position for e in events] == first.suids
        assert events[0].event.tags == ["org:acme", "username:bob"]
        # the certificate follows in the worker's next round (ARCHITECTURE.md)
        certificate = settled_certificate(client, timeout_s=10, covering=first.suids[0])
        assert certificate.status == "READY"
        assert certificate.closed_prefix_suid == first.suids[0]
        with pytest.raises(AppendConditionFailed) as info:
            client.append([registered("bob")], name_is_free("bob"))
        assert info.value.code == "append_condition_failed"
        assert info.value.details["conflictingSuid"] == first.suids[0]
        # the same condition after the position read succeeds (DCB optimistic locking)
        second = client.append([registered("bob")], name_is_free("bob", after=first.suids[0]))
        assert second.suids[0] > first.suids[0]
        assert [e.position for e in client.read([QueryItem(tags=["org:acme"])])] == first.suids
        with pytest.raises(TooManyTagsError):  # refused before anything is sent
            client.append([registered("x", *[f"t{i}" for i in range(40)])])


def test_no_user_name_is_taken_twice_under_concurrent_writers(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    names = [f"user{i}" for i in range(6)]
    claimed: list[tuple[str, str]] = []
    refused = Counter[str]()
    lock = threading.Lock()
    client = DcbClient(service_id="names", settings=pipeline_settings, timeout_s=90)

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        for name in rng.sample(names, len(names)):
            try:
                result = client.append([registered(name)], name_is_free(name))
            except AppendConditionFailed:
                with lock:
                    refused[name] += 1
                continue
            with lock:
                claimed.append((name, result.suids[0]))

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    try:
        log = client.read()
        certificate = settled_certificate(client, covering=log[-1].position)
    finally:
        client.close()
    # The independent fold: every name at most once in the whole log...
    taken = Counter(e.event.payload for e in log)
    assert all(count == 1 for count in taken.values()), taken
    # ...every acknowledged commit is in it, nothing else is, positions strictly increase.
    assert sorted(suid for _, suid in claimed) == [e.position for e in log]
    assert [e.position for e in log] == sorted({e.position for e in log})
    assert len(claimed) == len(names) and sum(refused.values()) == 8 * len(names) - len(names)
    # once everything settles, the prefix covers every event and the fenced attempts after it
    assert certificate.closed_prefix_suid is not None
    assert certificate.closed_prefix_suid >= log[-1].position


def test_certificate_coverage_names_the_events_offsets_it_certifies(
    worker: WorkerProcess, pipeline_settings: DcbSettings, codec: AvroCodec
) -> None:
    """Reading dcb.events up to the coverage offsets yields every certified event."""
    settings = pipeline_settings
    with DcbClient(service_id="covered", settings=settings) as client:
        last = [client.append([registered(f"c{i}")]) for i in range(3)][-1]
        certificate = settled_certificate(client, covering=last.suids[0])
        log = client.read()
    (coverage,) = certificate.coverage
    consumer = clients.consumer(settings.resolved_bootstrap_servers, f"cov-{uuid.uuid4()}")
    topic = topic_name(settings.topics, TopicRole.EVENTS)
    consumer.assign([TopicPartition(topic, coverage.partition, 0)])
    below: list[str] = []
    deadline = time.monotonic() + 60

    def position() -> int:
        return consumer.position([TopicPartition(topic, coverage.partition)])[0].offset or -1

    try:
        while position() < coverage.offset:
            assert time.monotonic() < deadline, f"never reached offset {coverage.offset}"
            message = consumer.poll(1.0)
            if message is None or message.error() or (message.offset() or 0) >= coverage.offset:
                continue
            record = CommittedEvent.from_avro(
                codec.decode(message.value(), CommittedEvent.schema_name).value
            )
            if record.service_id == "covered":
                below.append(record.suid)
    finally:
        consumer.close()
    assert certificate.closed_prefix_suid is not None
    assert below == [e.position for e in log]
    assert all(suid <= certificate.closed_prefix_suid for suid in below)


def bad_command(
    attempt_id: str, events: list[EventData], condition: AppendCondition | None = None
) -> Command:
    """A COMMIT command the SDK would refuse, built without validation."""
    return Command.model_construct(
        service_id="bad",
        command_id=attempt_id,
        issued_at=datetime.now(UTC),
        kind="COMMIT",
        commit=CommitAttempt.model_construct(
            attempt_id=attempt_id,
            writer_epoch=0,
            events=events,
            condition=condition,
        ),
        reconcile=None,
    )


def fuzzed_bad_records(codec: AvroCodec, seed: int) -> list[tuple[bytes, str]]:
    """Bad ``dcb.commands`` values, each with the dead-letter code it must get."""
    rng = random.Random(seed)
    out: list[tuple[bytes, str]] = []
    for n in (0, 1, 9, 200):  # random bytes, some after a single-object marker
        noise = bytes(rng.randrange(256) for _ in range(n))
        out.append((b"not avro at all" + noise, "malformed_record"))
        # with 8 bytes or more after the marker, they read as an unknown schema fingerprint
        out.append((b"\xc3\x01" + noise, "unknown_schema" if n >= 8 else "malformed_record"))
    valid = codec.encode(Command.schema_name, bad_command("ok", [registered("x")]).to_avro())
    out.append((valid[: len(valid) // 2], "malformed_record"))  # truncated body
    unknown = b"\xc3\x01" + bytes(rng.randrange(256) for _ in range(8)) + valid[10:]
    out.append((unknown, "unknown_schema"))  # a fingerprint no schema has
    result = CommitResult(
        service_id="bad", attempt_id="r", outcome="REJECTED", suids=[], decided_at=datetime.now(UTC)
    )
    out.append((codec.encode(CommitResult.schema_name, result.to_avro()), "unexpected_schema"))
    no_tag_item = AppendCondition(fail_if_events_match=[QueryItem(types=["UserRegistered"])])
    refused = {
        "too_many_tags": [registered("x", *[f"t{i}" for i in range(33)])],
        "tag_too_long": [registered("x", "y" * 257)],
        "empty_attempt": [],
        "attempt_too_large": [registered(f"n{i}") for i in range(257)],
    }
    for code, events in refused.items():
        command = bad_command(f"bad-{code}", events)
        out.append((codec.encode(Command.schema_name, command.to_avro()), code))
    command = bad_command("bad-condition", [registered("x")], condition=no_tag_item)
    out.append((codec.encode(Command.schema_name, command.to_avro()), "invalid_condition"))
    rng.shuffle(out)
    return out


def test_fuzzed_bad_commands_go_to_dead_letters_whole_and_the_next_commit_is_served(
    worker: WorkerProcess, pipeline_settings: DcbSettings, codec: AvroCodec
) -> None:
    settings = pipeline_settings
    bad = fuzzed_bad_records(codec, seed=3)
    produce_all(
        settings.resolved_bootstrap_servers,
        topic_name(settings.topics, TopicRole.COMMANDS),
        [(b"bad", value) for value, _ in bad],
    )
    with DcbClient(service_id="bad", settings=settings, timeout_s=60) as client:
        good = client.append([registered("alice")])
        # nothing of a refused command was written: the log is the good commit alone
        assert [e.position for e in client.read()] == good.suids
    letters = read_all(
        settings.resolved_bootstrap_servers,
        topic_name(settings.topics, TopicRole.DEAD_LETTERS),
        expect_at_least=len(bad),
        timeout_s=60,
    )
    decoded = [
        DeadLetter.from_avro(codec.decode(m.value(), DeadLetter.schema_name).value) for m in letters
    ]
    got = sorted((d.source_value or b"", d.error.code) for d in decoded)
    assert got == sorted(bad)
    assert {d.processor for d in decoded} == {"ledger"}


def test_an_attempt_nobody_answers_raises_answer_timeout(pipeline_settings: DcbSettings) -> None:
    client = DcbClient(service_id="alone", settings=pipeline_settings, timeout_s=2)
    with client, pytest.raises(AnswerTimeoutError) as info:
        client.append([registered("nobody")])  # no worker runs
    assert info.value.code == "answer_timeout"


def test_a_stale_writer_epoch_cannot_commit(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    with DcbClient(service_id="epochs", settings=pipeline_settings, writer_epoch=5) as current:
        committed = current.append([registered("new")])
        with DcbClient(service_id="epochs", settings=pipeline_settings, writer_epoch=3) as zombie:
            with pytest.raises(StaleFenceError) as info:
                zombie.append([registered("old")])
            assert info.value.code == "stale_fence"
            assert info.value.details["stale"] == 3 and info.value.details["current"] == 5
            assert "epochs" in info.value.details["fenced"]
        assert [e.position for e in current.read()] == committed.suids


def test_a_writer_dying_between_allocation_and_delivery_is_fenced_by_the_reconciler(
    pipeline_settings: DcbSettings, tmp_path: Path
) -> None:
    faulty = WorkerProcess(
        pipeline_settings,
        tmp_path,
        "faulty",
        grace_ms=2_000,
        env={"DCB_WORKER__FAULT_INJECTION": "after-allocation-before-delivery"},
    ).start()
    try:
        with DcbClient(service_id="faults", settings=pipeline_settings, timeout_s=60) as client:
            started = time.monotonic()
            with pytest.raises(ReservationExpiredError) as info:
                # its PREPARE to fault:lost is lost; username:zed gets one and reserves
                client.append([registered("zed", "fault:lost")], name_is_free("zed"))
            assert info.value.code == "reservation_expired"
            assert time.monotonic() - started >= 2.0  # not before the grace window
            # username:zed's reservation was fenced, not left to block: the name is free
            after = client.append([registered("zed")], name_is_free("zed"))
            log = client.read()
            assert [e.position for e in log] == after.suids
            assert not any("fault:lost" in e.event.tags for e in log)  # in all tags or none
            settled = settled_certificate(client, covering=after.suids[0])
            assert settled.closed_prefix_suid is not None
            # one tag only: the one-phase path; its PREPARE is lost, the reconciler asks the
            # tag to fence and the tag's tombstone decides
            solo = EventData(
                event_id=str(uuid.uuid4()),
                event_type="Solo",
                payload="{}",
                tags=["fault:solo"],
                timestamp=datetime.now(UTC),
            )
            with pytest.raises(ReservationExpiredError):
                client.append([solo])
            assert not any(e.event.event_id == solo.event_id for e in client.read())
    finally:
        faulty.stop()


def test_a_reconcile_request_that_never_lands_is_an_error_not_a_silent_return(
    settings: DcbSettings, bootstrap_servers: str
) -> None:
    """Only the answers' topic exists (a write never creates a topic here): the request
    cannot land, and the call says so within the client's timeout."""
    create_topic(bootstrap_servers, topic_name(settings.topics, TopicRole.COMMIT_RESULTS))
    with DcbClient(service_id="ops", settings=settings, timeout_s=3) as client:
        started = time.monotonic()
        with pytest.raises(KafkaUnavailableError, match="reconcile request"):
            client.reconcile(skip_grace=True)
        assert 3 <= time.monotonic() - started < 10


def test_an_attempt_the_broker_refuses_is_an_error_at_once_not_a_timeout(
    settings: DcbSettings, bootstrap_servers: str
) -> None:
    """The commands' topic takes records of at most 1 KB, and the attempt is larger: the
    broker refuses it. The client hears only of failed sends (it asks librdkafka for no
    other report), so this is the path that must still settle the call, with why; without
    it the append would wait out its timeout twice and say nothing was answered."""
    create_topic(bootstrap_servers, topic_name(settings.topics, TopicRole.COMMIT_RESULTS))
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    create_topic(
        bootstrap_servers, commands, settings.topics.partitions, **{"max.message.bytes": "1024"}
    )
    big = EventData(
        event_id=str(uuid.uuid4()),
        event_type="Big",
        payload=json.dumps({"text": "x" * 4096}),
        tags=["size:big"],
        timestamp=datetime.now(UTC),
    )
    with (
        DcbClient(service_id="ops", settings=settings, timeout_s=20) as client,
        pytest.raises(KafkaUnavailableError, match="sending the attempt") as caught,
    ):
        client.append([big])
    assert "MSG_SIZE_TOO_LARGE" in str(caught.value) or "too large" in str(caught.value).lower()


def test_invoice_numbers_have_no_gap_and_no_duplicate_under_concurrent_writers(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    series = QueryItem(types=["InvoiceCreated"], tags=["invoices:2026"])
    client = DcbClient(service_id="billing", settings=pipeline_settings, timeout_s=90)

    def create_invoices(count: int) -> None:
        for _ in range(count):
            while True:
                seen = client.read([series])
                number = len(seen) + 1
                last = seen[-1].position if seen else None
                event = EventData(
                    event_id=str(uuid.uuid4()),
                    event_type="InvoiceCreated",
                    payload=f'{{"number": {number}}}',
                    tags=["invoices:2026", f"invoice:{uuid.uuid4().hex[:8]}"],
                    timestamp=datetime.now(UTC),
                )
                condition = AppendCondition(fail_if_events_match=[series], after=last)
                try:
                    client.append([event], condition)
                    break
                except AppendConditionFailed:
                    continue

    threads = [threading.Thread(target=create_invoices, args=(4,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    try:
        numbers = [json.loads(e.event.payload)["number"] for e in client.read([series])]
    finally:
        client.close()
    assert numbers == list(range(1, 33))  # in SUID order: consecutive, no gap, no repeat


def test_course_capacity_and_student_limit_hold_under_12_writers(
    worker: WorkerProcess, pipeline_settings: DcbSettings
) -> None:
    """The DCB course example outside the demo: conditions spanning a course and a student."""
    capacity_of = {"c1": 4, "c2": 4, "c3": 4}
    limit = 2
    rng = random.Random(11)
    wishes = [(f"s{s}", c) for s in range(18) for c in rng.sample(sorted(capacity_of), 3)]
    rng.shuffle(wishes)
    service = f"courses-{uuid.uuid4().hex[:6]}"
    with DcbClient(service_id=service, settings=pipeline_settings, timeout_s=90) as client:
        define_courses(client, capacity_of)
        report = run_subscriptions(client, wishes, capacity_of, limit, 12, lambda _: None)
    assert len(report.outcomes) == len(wishes)
    # The oracle: a fresh client folds the whole certified log by itself.
    with DcbClient(service_id=service, settings=pipeline_settings) as reader:
        log = reader.read()
        settled_certificate(reader)
    positions = [e.position for e in log]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    subscribed = [
        (json.loads(e.event.payload)["student"], json.loads(e.event.payload)["course"])
        for e in log
        if e.event.event_type == "StudentSubscribed"
    ]
    assert len(subscribed) == len(set(subscribed)), "a student subscribed twice to a course"
    per_course = Counter(course for _, course in subscribed)
    per_student = Counter(student for student, _ in subscribed)
    assert all(per_course[c] <= capacity_of[c] for c in capacity_of), per_course
    assert all(n <= limit for n in per_student.values()), per_student
    # 18 students x 2 allowed > 12 seats: every seat is taken, none by a refused wish.
    assert per_course == Counter(capacity_of), per_course
    acknowledged = {(o.student, o.course): o.position for o in report.committed}
    assert acknowledged == {
        (json.loads(e.event.payload)["student"], json.loads(e.event.payload)["course"]): e.position
        for e in log
        if e.event.event_type == "StudentSubscribed"
    }


def test_attempts_queued_in_one_batch_conflict_exactly_as_if_they_came_one_by_one(
    pipeline_settings: DcbSettings, tmp_path: Path, codec: AvroCodec
) -> None:
    """200 attempts for one seat wait while no worker runs; the first round takes them as
    one batch, and the first of them in SUID order takes the seat, the others are refused."""
    settings = pipeline_settings
    seat = QueryItem(types=["SeatTaken"], tags=["seat:1"])
    outcomes: list[str] = []
    lock = threading.Lock()
    client = DcbClient(service_id="seats", settings=settings, timeout_s=90)

    def take(person: int) -> None:
        event = EventData(
            event_id=str(uuid.uuid4()),
            event_type="SeatTaken",
            payload=json.dumps({"person": person}),
            tags=["seat:1", f"person:{person}"],
            timestamp=datetime.now(UTC),
        )
        try:
            client.append([event], AppendCondition(fail_if_events_match=[seat]))
            outcome = "committed"
        except AppendConditionFailed as exc:
            outcome = exc.code
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(200)]
    for thread in threads:
        thread.start()
    commands = topic_name(settings.topics, TopicRole.COMMANDS)
    deadline = time.monotonic() + 60
    while records_on(settings.resolved_bootstrap_servers, commands) < 200:
        assert time.monotonic() < deadline, "the attempts were not all sent"
        time.sleep(0.2)
    worker = WorkerProcess(settings, tmp_path, "late", grace_ms=3_000).start()
    try:
        for thread in threads:
            thread.join(120)
        log = client.read([seat])
    finally:
        client.close()
        worker.stop()
    assert Counter(outcomes) == {"committed": 1, "append_condition_failed": 199}
    assert len(log) == 1
    allocations = read_all(
        settings.resolved_bootstrap_servers,
        topic_name(settings.topics, TopicRole.ALLOCATIONS),
        expect_at_least=1,
    )
    batches = [
        AllocationBatch.from_avro(codec.decode(m.value(), AllocationBatch.schema_name).value)
        for m in allocations
    ]
    assert max(len(b.allocations) for b in batches) >= 100, "the attempts came in small rounds"


# The records of the first protocol (one target per record), as a worker of that version
# wrote them: their schemas are not in this version's catalog.
OLD_DELIVERY: dict[str, object] = {
    "type": "record",
    "name": "TagDelivery",
    "namespace": "dcb.streams",
    "fields": [
        {"name": "serviceId", "type": "string"},
        {"name": "tag", "type": "string"},
        {"name": "suid", "type": "string"},
        {"name": "soleTarget", "type": "boolean"},
        {"name": "sentAt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def old_format(schema: dict[str, object], record: dict[str, object]) -> bytes:
    parsed = fastavro.parse_schema(schema)
    canonical = fastavro.schema.to_parsing_canonical_form(parsed)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, parsed, record)
    return b"\xc3\x01" + crc64_avro_fingerprint(canonical) + body.getvalue()


def test_a_record_of_the_earlier_format_is_dead_lettered_not_misread(
    worker: WorkerProcess, pipeline_settings: DcbSettings, codec: AvroCodec
) -> None:
    settings = pipeline_settings
    bootstrap = settings.resolved_bootstrap_servers
    old = old_format(
        OLD_DELIVERY,
        {"serviceId": "old", "tag": "t", "suid": "0" * 30, "soleTarget": True, "sentAt": 0},
    )
    produce_all(bootstrap, topic_name(settings.topics, TopicRole.TAG_DELIVERIES), [(b"old", old)])
    produce_all(bootstrap, topic_name(settings.topics, TopicRole.TAG_RESOLUTIONS), [(b"old", old)])
    with DcbClient(service_id="old", settings=settings, timeout_s=60) as client:
        good = client.append([registered("after-the-old-records")])
        assert [e.position for e in client.read()] == good.suids
    letters = read_all(
        bootstrap, topic_name(settings.topics, TopicRole.DEAD_LETTERS), expect_at_least=2
    )
    decoded = [
        DeadLetter.from_avro(codec.decode(m.value(), DeadLetter.schema_name).value) for m in letters
    ]
    assert sorted((d.processor, d.error.code, d.source_value) for d in decoded) == [
        ("ledger", "unknown_schema", old),
        ("tags", "unknown_schema", old),
    ]


def test_a_worker_with_another_placement_than_the_topics_refuses_to_start(
    pipeline_settings: DcbSettings, tmp_path: Path, codec: AvroCodec
) -> None:
    settings = pipeline_settings
    ensure_layout(settings.resolved_bootstrap_servers, settings.topics, codec)
    other = "tag" if settings.topics.tag_placement == "service" else "service"
    topics = settings.topics.model_copy(update={"tag_placement": other})
    wrong = WorkerProcess(
        settings.model_copy(update={"topics": topics}), tmp_path, "wrong", grace_ms=3_000
    ).start(wait=False)
    assert wrong.wait_exit(60) == 2  # a usage error: its supervisor does not start it again
    log = wrong.log.read_text()
    assert "topic_layout_mismatch" in log and f"tag_placement={other.upper()}" in log
    assert "starting it again" not in log
