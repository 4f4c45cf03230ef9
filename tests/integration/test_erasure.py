"""Crypto-shredding on the real broker: erase a subject under load.

Writers append events of several subjects under conditions; one subject is erased
(``dcb erase``) while they run. Afterwards no reader crashes, the erased subject's
payloads read as the shredded marker everywhere, the others are untouched, no plain
text was ever written to ``dcb.events`` (a raw consumer checks the bytes), and the
archive's digests, over ciphertext, still verify.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from streams.erasure import SubjectErasedError
from streams.erasure.sealing import SHREDDED
from streams.kafka.topic_catalog import TopicRole, topic_name
from streams.model.records import AppendCondition, QueryItem
from streams.projections.api import ProjectedEvent, ProjectorRegistry, Row, TagProjector
from streams.projections.runner import run_projections
from streams.sdk import DcbClient, Event
from streams.settings import DcbSettings
from tests.integration.cli import dcb, lifecycle_env
from tests.integration.oracle import read_to_end
from tests.integration.test_projections import committed_rows
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.integration
SUBJECTS = [f"user:{n}" for n in range(4)]
ERASED = "user:1"


def secret(subject: str, n: int) -> str:
    return f"secret-{subject}-{n}-{uuid.uuid4().hex}"


def _last_name(row: Row, event: ProjectedEvent) -> Row:
    return {"name": event.data.get("name"), "shredded": bool(event.data.get(SHREDDED))}


def check_projection(settings: DcbSettings, service: str, written: dict[str, list[str]]) -> None:
    names = TagProjector(
        id=f"names-{uuid.uuid4().hex[:6]}",
        query=(QueryItem(tags=["people"]),),
        tag_prefix="user:",
        fold=_last_name,
    )
    expected = {
        f"{service}/{s}": {"name": None, "shredded": True}
        if s == ERASED
        else {"name": written[s][-1], "shredded": False}
        for s in SUBJECTS
    }
    port0 = settings.projections.model_copy(update={"http_port": 0})
    stop = threading.Event()
    runner = threading.Thread(
        target=run_projections,
        args=(ProjectorRegistry([names]), settings.model_copy(update={"projections": port0}), stop),
    )
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while (rows := committed_rows(settings, names.id)) != expected:
            assert time.monotonic() < deadline, f"rows {rows} never became {expected}"
            time.sleep(0.5)
    finally:
        stop.set()
        runner.join(30)


def test_erasing_a_subject_under_load(
    lifecycle_settings: DcbSettings, lifecycle_worker: WorkerProcess
) -> None:
    sealed = lifecycle_settings
    service = f"people-{uuid.uuid4().hex[:8]}"
    written: dict[str, list[str]] = {s: [] for s in SUBJECTS}  # secrets committed
    refused: list[str] = []
    stop = threading.Event()

    def writer(client: DcbClient, subject: str) -> None:
        n = 0
        while not stop.is_set():
            query = [QueryItem(types=["Renamed"], tags=[subject])]
            head = client.read(query).head  # the conditional workload: read, then append
            text = secret(subject, n)
            try:
                client.append(
                    [Event("Renamed", {"name": text}, [subject, "people"])],
                    AppendCondition(fail_if_events_match=query, after=head),
                )
            except SubjectErasedError:
                refused.append(subject)
                return
            written[subject].append(text)
            n += 1

    with DcbClient(service_id=service, settings=sealed) as client:
        threads = [threading.Thread(target=writer, args=(client, s)) for s in SUBJECTS]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while min(len(v) for v in written.values()) < 5:
            assert time.monotonic() < deadline, "the writers made no progress"
            time.sleep(0.1)
        done = dcb("erase", "--subject", ERASED, "--json", env=lifecycle_env(sealed))
        assert done.exit_code == 0, done.stderr
        time.sleep(1.0)  # the others go on past the erasure
        stop.set()
        for t in threads:
            t.join(60)
        report = json.loads(done.stdout)
        assert report["key_destroyed"] is True and report["services"] == [service]
        # Counted at the erasure; a writer of the subject may have had one more in flight.
        assert report["unreadable_events"] in (len(written[ERASED]), len(written[ERASED]) - 1)
        assert refused == [ERASED]  # its writer was refused a key afterwards, the others not

        # Every reader keeps working: the erased subject reads as shredded, others in full.
        fresh = DcbClient(service_id=service, settings=sealed)
        for reader in (client, fresh):
            seen: dict[str, int] = dict.fromkeys(SUBJECTS, 0)
            for e in reader.read([QueryItem(tags=["people"])]):
                (subject,) = [t for t in e.event.tags if t.startswith("user:")]
                seen[subject] += 1
                body = json.loads(e.event.payload)
                if subject == ERASED:
                    assert body == {SHREDDED: True, "subject": ERASED}
                else:
                    assert body["name"] in written[subject]
            assert seen == {s: len(v) for s, v in written.items()}  # every event, once
        fresh.close()
        shown = dcb("read", "--service", service, "--json", env=lifecycle_env(sealed))
        assert shown.exit_code == 0, shown.stderr
        printed = json.loads(shown.stdout)
        assert len(printed) == sum(len(v) for v in written.values())
        for e in printed:
            if ERASED in e["tags"]:
                assert json.loads(e["payload"]) == {SHREDDED: True, "subject": ERASED}
        assert not any(t in shown.stdout for t in written[ERASED])
        again = dcb("erase", "--subject", ERASED, "--json", env=lifecycle_env(sealed))
        assert json.loads(again.stdout)["key_destroyed"] is False  # idempotent

        # A projection started now folds the same: the erased subject's events as the
        # marker, the others' in the clear.
        check_projection(sealed, service, written)

        # No plain text ever reached the log: every payload of a subject is ciphertext.
        topic = topic_name(sealed.topics, TopicRole.EVENTS)
        raw = [m.value() or b"" for m in read_to_end(sealed.resolved_bootstrap_servers, topic)]
        texts = [t.encode() for v in written.values() for t in v]
        assert raw and not any(t in value for value in raw for t in texts)

        # The archive's digests cover the stored (sealed) bytes: archiving and auditing
        # after the erasure still verify.
        cert = client.certificate()
        assert cert is not None and cert.closed_prefix_suid is not None
        archived = dcb(
            "archive",
            "--service",
            service,
            "--through",
            cert.closed_prefix_suid,
            "--json",
            env=lifecycle_env(sealed),
        )
        assert archived.exit_code == 0, archived.stderr
        audit = dcb("archive", "audit", "--service", service, "--json", env=lifecycle_env(sealed))
        assert audit.exit_code == 0, audit.stderr
        assert json.loads(audit.stdout)["archived_events"] == json.loads(archived.stdout)["events"]

        # What the log dropped (archived) still counts: an erasure reports each event once,
        # from the log or the archive.
        assert json.loads(archived.stdout)["dropped"] > 0
        recount = dcb("erase", "--subject", ERASED, "--json", env=lifecycle_env(sealed))
        recounted = json.loads(recount.stdout)
        assert recounted["unreadable_events"] == len(written[ERASED])
        assert 0 < recounted["archived_events"] <= len(written[ERASED])
