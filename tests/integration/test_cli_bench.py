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


def test_bench_commit_measures_both_systems_and_cleans_up(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    before = _bench_topics(bootstrap_servers)
    out = tmp_path / "results"
    short = ["--warmup", "0.5", "--measure", "2", "--warm-pass", "1", "--floor-steps", "200"]
    short += ["--core-events", "20"]
    args = ["--writers", "2", "--tags", "2", "--services", "2", *short, "--out", str(out)]
    result = dcb("bench", "commit", "--json", *args, env=_env(bootstrap_servers, tmp_path))
    assert result.exit_code == 0, result.stderr[-3000:]
    report = result.json
    assert [(r["system"], r["writers"]) for r in report["raw"]] == [("raw", 2)]
    (scenario,) = report["dcb"]
    assert (scenario["tags"], scenario["services"]) == (2, 2)
    for r in [*report["raw"], scenario]:
        assert r["completed"] > 0 and r["failed"] == 0
        assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert report["ratios"]["w2-t2-s2"] == pytest.approx(
        scenario["events_per_s"] / report["raw"][0]["events_per_s"], abs=0.001
    )
    floor = report["floor"]
    assert (floor["steps"], floor["outputs_per_step"]) == (200, 1)
    assert floor["steps_per_s"] > 0 and floor["cpu_us_per_step"] > 0
    assert (out / "commit-floor.log").exists()
    wide = report["floor_wide"]  # the same with four outputs per step
    assert (wide["steps"], wide["outputs_per_step"]) == (200, 4) and wide["cpu_us_per_step"] > 0
    assert (out / "commit-floor-4-outputs.log").exists()
    (cost,) = report["worker"]  # the worker's CPU while the scenario ran, per agent step
    assert cost["scenario"] == "w2-t2-s2"
    assert cost["cores"] > 0 and cost["cpu_us_per_step"] > 0
    assert cost["times_floor"] == pytest.approx(
        cost["cpu_us_per_step"] / floor["cpu_us_per_step"],
        abs=0.051,  # one decimal
    )
    (core,) = report["core"]  # the commit path's own code for 2-tag events, without Kafka
    assert (core["tags"], core["events"]) == (2, 20) and core["us_per_step"] > 0
    assert cost["core_share"] == pytest.approx(
        core["us_per_step"] / cost["cpu_us_per_step"], abs=0.001
    )
    assert core["records_per_step"] == pytest.approx(28 / 9, abs=0.01)  # 2 tags, 2 phases
    assert core["certain_records_per_step"] == pytest.approx(16 / 9, abs=0.001)
    (ceiling,) = report["ceilings"]  # one worker core: floor per record + own code per step
    further = (wide["cpu_us_per_step"] - floor["cpu_us_per_step"]) / 3
    per_step = floor["cpu_us_per_step"] + (core["certain_records_per_step"] - 1) * further
    assert ceiling["us_per_step"] == pytest.approx(per_step + core["us_per_step"], abs=0.1)
    assert ceiling["events_per_s"] == pytest.approx(1e6 / (9 * ceiling["us_per_step"]), rel=1e-3)
    assert ceiling["of_raw"] == pytest.approx(
        ceiling["events_per_s"] / report["raw"][0]["events_per_s"], abs=0.001
    )
    assert json.loads((out / "commit.json").read_text()) == report
    assert (out / "commit.png").read_bytes().startswith(b"\x89PNG")  # with the ceiling drawn
    assert _bench_topics(bootstrap_servers) == before


def test_bench_scale_runs_a_layout_of_two_workers_and_counts_their_cpu(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    before = _bench_topics(bootstrap_servers)
    out = tmp_path / "results"
    short = ["--warmup", "0.5", "--measure", "3", "--warm-pass", "2"]
    args = ["--layouts", "2x1x2", "--writers", "2", "--tags", "2", "--services", "2", *short]
    result = dcb(
        "bench", "scale", "--json", *args, "--out", str(out), env=_env(bootstrap_servers, tmp_path)
    )
    assert result.exit_code == 0, result.stderr[-3000:]
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
