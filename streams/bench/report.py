"""The bench's outputs: a JSON report and a PNG plot under ``bench/results/``."""

from __future__ import annotations

from pathlib import Path

from streams.bench.commit import CommitBenchReport
from streams.errors import DcbError


class PlotUnavailableError(DcbError):
    """matplotlib is an optional extra (``pip install -e .[bench]``)."""

    code = "plot_unavailable"


def write_json(report: CommitBenchReport, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "commit.json"
    path.write_text(report.model_dump_json(indent=2) + "\n")
    return path


def write_plot(report: CommitBenchReport, out_dir: Path) -> Path:
    """Events/s and p99 latency against writers: one line per scenario family, raw dashed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailableError(
            "matplotlib is not installed: pip install -e '.[bench]' (JSON written anyway)"
        ) from exc
    fig, (rate, p99) = plt.subplots(1, 2, figsize=(12, 4.8))
    families: dict[str, list[tuple[int, float, float]]] = {}
    for r in report.dcb:
        families.setdefault(r.label, []).append((r.writers, r.events_per_s, r.p99_ms))
    families["raw transactional produce->consume"] = [
        (r.writers, r.events_per_s, r.p99_ms) for r in report.raw
    ]
    for label, points in families.items():
        points.sort()
        style = "--" if label.startswith("raw") else "-"
        writers = [p[0] for p in points]
        rate.plot(writers, [p[1] for p in points], style, marker="o", label=label)
        p99.plot(writers, [p[2] for p in points], style, marker="o", label=label)
    for ax, title, unit in (
        (rate, "committed events/s", "events/s"),
        (p99, "p99 commit latency", "ms"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent writers")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    p99.axhline(250, color="grey", linewidth=0.8, linestyle=":")
    rate.legend(fontsize=8)
    m = report.machine
    fig.suptitle(f"dcb bench commit: {m['cpus']} CPUs, {m['platform']}", fontsize=9)
    fig.tight_layout()
    path = out_dir / "commit.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
