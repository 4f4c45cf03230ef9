"""The peer bench's outputs under ``bench/results/``: JSON, a PNG plot and a Markdown table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams.bench.peers.bench import PeerBenchReport
from streams.bench.peers.runner import PeerScenario
from streams.bench.report import rate_and_p99_plot


def markdown(report: PeerBenchReport) -> str:
    m = report.machine
    lines = [
        f"Peer bench, {report.started_at:%Y-%m-%d %H:%M} UTC, on {m['cpus']} CPUs "
        f"({m['platform']}, Python {m['python']}); per system first a "
        f"{report.plan.warm_pass_s:g} s warm pass at {max(report.plan.writers)} writers (not "
        f"reported), then {report.plan.warmup_s:g} s warm-up and "
        f"{report.plan.measure_s:g} s measured per row. Latencies in ms; server CPU is the "
        "server processes' share of one core, client CPU the bench process's (its writers "
        "and the system's client library); CPU per command is both, in ms, over every "
        "command (appends, condition failures and no's): on a machine whose cores are all "
        "busy, appends/s can only grow as it shrinks.",
        "",
        "| system | writers | appends/s | condition failures/s | no/s | append p50 / p99 "
        "| command p50 / p99 | server CPU | client CPU | CPU per command | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report.scenarios:
        lines.append(
            f"| {s.system} | {s.writers} | {s.appends_per_s:g} | {s.condition_failures_per_s:g} "
            f"| {s.no_per_s:g} | {s.append_p50_ms:g} / {s.append_p99_ms:g} "
            f"| {s.command_p50_ms:g} / {s.command_p99_ms:g} | {s.server_cpu_pct:g}% "
            f"| {s.client_cpu_pct:g}% | {cpu_per_command(s):.2f} | {s.errors} |"
        )
    lines += ["", "| system | durability of an acknowledged append | events in log | oracle |"]
    lines += ["|---|---|---|---|"]
    for run in report.systems:
        if not run.available:
            lines.append(f"| {run.name} | {run.durability} | — | not run: {run.reason} |")
            continue
        verdict = "all rules hold" if not run.violations else "; ".join(run.violations[:3])
        durability = f"{run.durability}; {run.detail}" if run.detail else run.durability
        lines.append(f"| {run.name} | {durability} | {run.events} | {verdict} |")
    if report.ratios:
        lines += ["", "dcb-streams appends/s relative to each peer:", ""]
        for writers, peers in report.ratios.items():
            parts = [f"{p} {r:.3g}x" if r is not None else f"{p} n/a" for p, r in peers.items()]
            lines.append(f"- {writers.removeprefix('w')} writers: " + ", ".join(parts))
    if report.hops is not None:
        lines += [
            "",
            f"dcb-streams, one commit's hops ({report.hops.scenario}, "
            f"{report.hops.path}, {report.hops.attempts} commits):",
            "",
        ]
        lines += ["| hop | p50 ms | p99 ms |", "|---|---|---|"]
        lines += [f"| {h.name} | {h.p50_ms:.0f} | {h.p99_ms:.0f} |" for h in report.hops.hops]
    if report.profile is not None:
        lines += [
            "",
            f"dcb-streams worker profile ({report.profile.samples} samples, "
            f"`{report.profile.file}`):",
            "",
        ]
        lines += ["| function | where | self % | total % |", "|---|---|---|---|"]
        lines += [
            f"| `{f.function}` | {f.where} | {f.self_pct:g} | {f.total_pct:g} |"
            for f in report.profile.frames
        ]
    return "\n".join(lines) + "\n"


def write_markdown(report: PeerBenchReport, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "peers.md"
    path.write_text(markdown(report))
    return path


def write_plot(report: PeerBenchReport, out_dir: Path) -> Path:
    """Appends/s, p99 command latency and CPU per command against writers, one line per
    system."""
    by_system = {
        run.name: sorted(
            (s for s in report.scenarios if s.system == run.name), key=lambda s: s.writers
        )
        for run in report.systems
    }

    def draw(rate: Any, p99: Any) -> None:
        for name, rows in by_system.items():
            if rows:
                writers = [s.writers for s in rows]
                appends = [max(s.appends_per_s, 0.01) for s in rows]
                rate.plot(writers, appends, marker="o", label=name)
                p99.plot(writers, [s.command_p99_ms for s in rows], marker="o", label=name)

    def draw_cpu(cpu: Any) -> None:
        for rows in by_system.values():
            measured = [(s.writers, ms) for s in rows if (ms := cpu_per_command(s))]
            if measured:
                cpu.plot(*zip(*measured, strict=True), marker="o")

    m = report.machine
    return rate_and_p99_plot(
        out_dir / "peers.png",
        f"dcb bench peers (course subscriptions): {m['cpus']} CPUs, {m['platform']}",
        ("successful appends/s", "appends/s"),
        ("p99 of a read-decide-append command", "ms"),
        100,
        draw,
        (("CPU per command, servers and client", "ms"), draw_cpu),
    )


def cpu_per_command(s: PeerScenario) -> float:
    """Milliseconds of CPU (servers and client together) per command; 0 when unmeasured."""
    commands = s.appends_per_s + s.condition_failures_per_s + s.no_per_s
    if not commands or not s.client_cpu_pct:
        return 0.0
    return (s.server_cpu_pct + s.client_cpu_pct) * 10 / commands
