"""The bench's outputs under ``bench/results/``: JSON reports and PNG plots.

Both benches plot the same picture: a rate and a p99 latency against concurrent writers,
on log scales, with the latency target drawn (:func:`rate_and_p99_plot`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from streams.bench.archive import ArchiveBenchReport
from streams.bench.commit import CommitBenchReport
from streams.bench.projections import ProjectionBenchReport
from streams.bench.scale import ScaleBenchReport
from streams.errors import DcbError


class PlotUnavailableError(DcbError):
    """matplotlib is an optional extra (``pip install -e .[bench]``)."""

    code = "plot_unavailable"


def write_json(report: BaseModel, out_dir: Path, name: str = "commit.json") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(report.model_dump_json(indent=2) + "\n")
    return path


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailableError(
            "matplotlib is not installed: pip install -e '.[bench]' (JSON written anyway)"
        ) from exc
    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def rate_and_p99_plot(
    path: Path,
    title: str,
    rate_axis: tuple[str, str],
    p99_axis: tuple[str, str],
    p99_target_ms: float,
    draw: Callable[[Any, Any], None],
    extra: tuple[tuple[str, str], Callable[[Any], None]] | None = None,
) -> Path:
    """Two panels against writers; ``draw(rate_ax, p99_ax)`` plots the lines; ``extra``, a
    third panel's (title, unit) and what draws on it."""
    plt = _pyplot()
    panels = 2 if extra is None else 3
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.8))
    rate, p99 = axes[0], axes[1]
    draw(rate, p99)
    titled = [(rate, rate_axis), (p99, p99_axis)]
    if extra is not None:
        extra[1](axes[2])
        titled.append((axes[2], extra[0]))
    for ax, (name, unit) in titled:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent writers")
        ax.set_ylabel(unit)
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    p99.axhline(p99_target_ms, color="grey", linewidth=0.8, linestyle=":")
    rate.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    return _save(plt, fig, path)


def families_drawn(
    families: dict[str, list[tuple[int, float, float]]],
) -> Callable[[Any, Any], None]:
    """A ``draw`` for :func:`rate_and_p99_plot`: one line per family of (writers, rate, p99);
    a family whose label starts with "raw" is dashed."""

    def draw(rate: Any, p99: Any) -> None:
        for label, points in families.items():
            points.sort()
            style = "--" if label.startswith("raw") else "-"
            writers = [p[0] for p in points]
            rate.plot(writers, [p[1] for p in points], style, marker="o", label=label)
            p99.plot(writers, [p[2] for p in points], style, marker="o", label=label)

    return draw


RATE_TARGET = 0.25  # of raw's events/s at the most writers (issue #3)


def write_plot(report: CommitBenchReport, out_dir: Path) -> Path:
    """Events/s and p99 latency against writers: one line per scenario family, raw dashed."""
    families: dict[str, list[tuple[int, float, float]]] = {}
    for r in report.dcb:
        families.setdefault(r.label, []).append((r.writers, r.events_per_s, r.p99_ms))
    families["raw transactional produce->consume"] = [
        (r.writers, r.events_per_s, r.p99_ms) for r in report.raw
    ]
    lines = families_drawn(families)

    def draw(rate: Any, p99: Any) -> None:
        lines(rate, p99)
        if (busiest := report.busiest_raw()) is not None:
            rate.plot(
                [busiest.writers],
                [busiest.events_per_s * RATE_TARGET],
                "k*",
                label=f"target: {RATE_TARGET:.0%} of raw at {busiest.writers} writers",
            )

    m = report.machine
    return rate_and_p99_plot(
        out_dir / "commit.png",
        f"dcb bench commit: {m['cpus']} CPUs, {m['platform']}",
        ("committed events/s", "events/s"),
        ("p99 commit latency", "ms"),
        250,
        draw,
    )


def write_scale_plot(report: ScaleBenchReport, out_dir: Path) -> Path:
    """Events/s and p99 latency against writers: one line per layout."""
    families: dict[str, list[tuple[int, float, float]]] = {}
    for r in report.results:
        families.setdefault(r.layout.label, []).append(
            (r.result.writers, r.result.events_per_s, r.result.p99_ms)
        )
    m, plan = report.machine, report.plan
    return rate_and_p99_plot(
        out_dir / "scale.png",
        f"dcb bench scale: {plan.tags} tag(s) per event, {plan.services} services, "
        f"{report.tag_placement} placement; "
        f"{m['cpus']} CPUs, {m['platform']}",
        ("committed events/s", "events/s"),
        ("p99 commit latency", "ms"),
        250,
        families_drawn(families),
    )


def write_projection_plot(report: ProjectionBenchReport, out_dir: Path) -> Path:
    """Events/s gated vs ungated; commit -> applied and commit -> PostgreSQL p50 / p99."""
    plt = _pyplot()
    t, lat, m = report.throughput, report.latency, report.machine
    fig, (rate, latency) = plt.subplots(1, 2, figsize=(12, 4.8))
    rate.bar(["ungated consumer", "gated runner"], [t.ungated_events_per_s, t.gated_events_per_s])
    rate.set_ylabel("events/s")
    rate.set_title(f"the same {t.events} events: gated / ungated = {t.ratio:.2f} (aim >= 0.8)")
    labels = ["commit -> applied", "commit -> row in PostgreSQL"]
    x = range(len(labels))
    p50 = [lat.commit_to_applied_p50_ms, lat.commit_to_postgres_p50_ms]
    p99 = [lat.commit_to_applied_p99_ms, lat.commit_to_postgres_p99_ms]
    latency.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    latency.bar([i + 0.2 for i in x], p99, width=0.4, label="p99")
    latency.set_xticks(list(x), labels)
    latency.set_ylabel("ms")
    latency.set_title(
        f"{lat.commits} commits by {report.plan.writers} writers (aims: p99 500 ms / 2,000 ms)"
    )
    latency.legend()
    fig.suptitle(f"dcb bench projections; {m['cpus']} CPUs, {m['platform']}", fontsize=9)
    return _save(plt, fig, out_dir / "projections.png")


def write_archive_plot(report: ArchiveBenchReport, out_dir: Path) -> Path:
    """MB/s per backend: append, read whole, read by one segment's range; beside it, on
    the broker, a first read across the archive boundary and appends with a subject tag."""
    plt = _pyplot()
    live = report.lifecycle
    fig, axes = plt.subplots(1, 3 if live else 1, figsize=(15 if live else 7, 4.2), squeeze=False)
    ax = axes[0][0]
    measures = [
        ("append", "append_mb_per_s"),
        ("read whole", "read_all_mb_per_s"),
        ("ranged read", "ranged_read_mb_per_s"),
    ]
    width = 0.8 / len(report.backends)
    for i, backend in enumerate(report.backends):
        xs = [m + i * width for m in range(len(measures))]
        ax.bar(xs, [getattr(backend, f) for _, f in measures], width, label=backend.backend)
    ax.set_xticks([m + width * (len(report.backends) - 1) / 2 for m in range(len(measures))])
    ax.set_xticklabels([name for name, _ in measures])
    ax.set_ylabel("MB/s")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    s = report.sealing
    ax.set_title(
        f"archive backends ({report.plan.megabytes:.0f} MB); sealing {s.seal_us} us, "
        f"opening {s.open_us} us per event",
        fontsize=9,
    )
    if live:
        read, sealed = live.boundary, live.appends
        ax = axes[0][1]
        ax.bar(
            ["hot log alone", "archive + log"], [read.hot_log_s, read.across_s], color=["C0", "C1"]
        )
        ax.set_ylabel("s")
        ax.set_title(
            f"a fresh client's first read of {read.events:,} events ({read.archived:,} archived)",
            fontsize=9,
        )
        ax = axes[0][2]
        xs = [0, 1]
        ax.bar([x - 0.2 for x in xs], [sealed.plain_p50_ms, sealed.sealed_p50_ms], 0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], [sealed.plain_p99_ms, sealed.sealed_p99_ms], 0.4, label="p99")
        ax.set_xticks(xs)
        ax.set_xticklabels(["no subject tag", "subject tag (sealed)"])
        ax.set_ylabel("ms")
        ax.legend(fontsize=8)
        ax.set_title(f"append latency through a worker, {sealed.appends} of each", fontsize=9)
    return _save(plt, fig, out_dir / "archive.png")
