"""The benches as a user runs them, cut to seconds: they measure, write their report and
leave no topic behind. (What they measure is for ``make bench``, never a timed test.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.kafka import clients
from tests.integration.cli import dcb

pytestmark = pytest.mark.integration


def _env(bootstrap_servers: str, tmp_path: Path) -> dict[str, str]:
    return {"DCB_BOOTSTRAP_SERVERS": bootstrap_servers, "DCB_BROKER__CACHE_DIR": str(tmp_path)}


def _bench_topics(bootstrap_servers: str) -> set[str]:
    topics = clients.admin(bootstrap_servers).list_topics(timeout=15).topics
    return {name for name in topics if name.startswith("dcb-bench-")}


def test_bench_commit_measures_both_systems_under_each_placement_and_cleans_up(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    before = _bench_topics(bootstrap_servers)
    out = tmp_path / "results"
    short = ["--warmup", "0.5", "--measure", "2", "--warm-pass", "1"]
    short += ["--core-events", "256", "--core-batches", "1,64"]
    args = ["--writers", "8", "--tags", "3", "--services", "1", *short, "--out", str(out)]
    env = _env(bootstrap_servers, tmp_path)
    result = dcb("bench", "commit", "--json", *args, env=env, timeout_s=600)
    assert result.exit_code == 0, result.stderr[-3000:]
    report = result.json
    assert report["settings"]["tag_placement"] == "service,tag"
    assert report["settings"]["max_batch_records"] > 0
    assert [(r["system"], r["writers"]) for r in report["raw"]] == [("raw", 8)]
    keys = ["w8-t3-s1-service", "w8-t3-s1-tag"]
    assert [(r["placement"], r["tags"], r["services"]) for r in report["dcb"]] == [
        ("service", 3, 1),
        ("tag", 3, 1),
    ]
    for r in [*report["raw"], *report["dcb"]]:
        assert r["completed"] > 0 and r["failed"] == 0
        assert 0 < r["p50_ms"] <= r["p99_ms"]
    for key, scenario in zip(keys, report["dcb"], strict=True):
        assert report["ratios"][key] == pytest.approx(
            scenario["events_per_s"] / report["raw"][0]["events_per_s"], abs=0.001
        )
    # each placement's worker: its CPU while the scenario ran, per committed event
    assert [cost["scenario"] for cost in report["worker"]] == keys
    for cost in report["worker"]:
        assert cost["cores"] > 0 and cost["cpu_us_per_event"] > 0
    assert (out / "commit-worker-service.log").exists()
    assert (out / "commit-worker-tag.log").exists()
    # what each hop's records carried: at most every writer's attempt, with its tags;
    # under the service placement one worker decides every attempt in the ledger's round,
    # so nothing goes by the tag topics
    assert [b["scenario"] for b in report["batches"]] == keys
    for batches, placement in zip(report["batches"], ("service", "tag"), strict=True):
        hops = {hop["hop"]: hop for hop in batches["hops"]}
        assert list(hops) == ["allocations", "tag-deliveries", "tag-resolutions"]
        for name, hop in hops.items():
            most = 8 if name == "allocations" else 8 * 3
            by_topic = name == "allocations" or placement == "tag"
            assert (hop["records"] > 0) == by_topic, (placement, name)
            if by_topic:
                assert 1 <= hop["p50"] <= hop["p90"] <= hop["max"] <= most
    # a traced pass per placement: three tags in one round under the service placement
    assert [(h["path"], h["attempts"] > 0) for h in report["hops"]] == [
        ("in-round", True),
        ("two-phase", True),
    ]
    # the processors' own code, without Kafka: per placement, a round of one and of 64
    core = {(c["placement"], c["batch"]): c for c in report["core"]}
    assert sorted(core) == [("service", 1), ("service", 64), ("tag", 1), ("tag", 64)]
    for placement in ("service", "tag"):
        alone, batched = core[placement, 1], core[placement, 64]
        assert alone["events"] == batched["events"] == 256 and alone["tags"] == 3
        # CPU is reported, not compared: a shared machine's CPU time varies run to run
        assert batched["cpu_us_per_event"] > 0 and alone["cpu_us_per_event"] > 0
        assert batched["outputs_per_event"] < alone["outputs_per_event"]
        assert batched["writes_per_event"] < alone["writes_per_event"]
    # one-phase in the ledger's round, however many tags: allocation, event, answer,
    # certificate; two-phase: deliveries, votes, decisions and evidence too
    assert core["service", 1]["outputs_per_event"] == 4
    assert core["tag", 1]["outputs_per_event"] > 6
    assert json.loads((out / "commit.json").read_text()) == report
    assert (out / "commit.png").read_bytes().startswith(b"\x89PNG")
    assert _bench_topics(bootstrap_servers) == before


def test_bench_scale_runs_a_layout_of_two_workers_and_counts_their_cpu(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    before = _bench_topics(bootstrap_servers)
    out = tmp_path / "results"
    short = ["--warmup", "0.5", "--measure", "3", "--warm-pass", "2"]
    args = ["--layouts", "2x1x2", "--writers", "2", "--tags", "2", "--services", "2", *short]
    env = _env(bootstrap_servers, tmp_path)
    result = dcb("bench", "scale", "--json", *args, "--out", str(out), env=env, timeout_s=600)
    assert result.exit_code == 0, result.stderr[-3000:]
    assert result.json["tag_placement"] == "service"
    (r,) = result.json["results"]
    assert r["layout"] == {"workers": 2, "partitions": 1, "tag_partitions": 2}
    assert r["result"]["completed"] > 0 and r["result"]["failed"] == 0
    assert len(r["worker_cores"]) == 2 and sum(r["worker_cores"]) > 0
    assert r["broker_cores"] == 0  # a broker the bench did not start is not its to measure
    assert r["cpu_ms_per_event"] > 0
    assert (out / "scale.json").exists()
    assert sorted(p.name for p in out.glob("scale-*.log")) == [
        "scale-w2-p1-tp2-0.log",
        "scale-w2-p1-tp2-1.log",
    ]
    assert _bench_topics(bootstrap_servers) == before


def test_bench_archive_measures_both_backends_sealing_and_the_boundary(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    before = _bench_topics(bootstrap_servers)
    out = tmp_path / "results"
    args = ["--segments", "3", "--records", "50", "--events", "300", "--appends", "10"]
    env = _env(bootstrap_servers, tmp_path)
    result = dcb("bench", "archive", *args, "--out", str(out), "--json", env=env, timeout_s=300)
    assert result.exit_code == 0, result.stderr[-3000:]
    report = result.json
    assert [b["backend"] for b in report["backends"]] == ["directory", "postgres"]
    for backend in report["backends"]:
        assert backend["append_mb_per_s"] > 0 and backend["ranged_read_mb_per_s"] > 0
    assert report["sealing"]["seal_us"] > 0 and report["sealing"]["open_us"] > 0
    # on the broker: the whole history read both ways (the bench asserts the count), half
    # of it from the archive after the cut; appends of both kinds measured
    boundary, appends = report["lifecycle"]["boundary"], report["lifecycle"]["appends"]
    assert boundary["events"] == 300 and boundary["archived"] == 150
    assert boundary["hot_log_s"] > 0 and boundary["across_s"] > 0
    assert appends["appends"] == 10 and 0 < appends["plain_p50_ms"] <= appends["plain_p99_ms"]
    assert 0 < appends["sealed_p50_ms"] <= appends["sealed_p99_ms"]
    assert json.loads((out / "archive.json").read_text()) == report
    assert (out / "archive.png").read_bytes().startswith(b"\x89PNG")
    assert _bench_topics(bootstrap_servers) == before
