"""Benchmarks run one at a time on a machine; a second is refused at once, naming the first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streams.bench.exclusive import exclusive
from streams.errors import BenchBusyError


def test_a_second_run_is_refused_naming_the_first_and_runs_once_it_ended(
    tmp_path: Path,
) -> None:
    with exclusive(tmp_path, "dcb bench peers"):
        with pytest.raises(BenchBusyError) as info, exclusive(tmp_path, "dcb bench"):
            pass
        assert info.value.code == "bench_busy"
        assert info.value.details["holder"].startswith("dcb bench peers (pid ")
    with exclusive(tmp_path, "dcb bench"):  # free again
        pass


def test_a_run_killed_holds_the_lock_no_longer(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path;"
            "from streams.bench.exclusive import exclusive\n"
            f"with exclusive(Path({str(tmp_path)!r}), 'dcb bench scale'):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(BenchBusyError, match="dcb bench scale"), exclusive(tmp_path, "x"):
            pass
    finally:
        holder.kill()
        holder.wait()
    with exclusive(tmp_path, "dcb bench"):  # the kernel let go of the dead run's lock
        pass
