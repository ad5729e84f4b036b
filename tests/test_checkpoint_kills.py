"""Kill -9 a process of a 2-process job with checkpoints at 24 points: resumed, same output.

Each kill costs a restart of three processes (about 3 s of CPU). The 24 kills are every pair of the 12 kill
offsets (outputs written since the start) and the 2 victims (the lower and the higher pid), once each, in a
shuffled order; ``PYTIMELY_CHECKPOINT_KILLS=200`` makes a longer soak, going round the pairs again.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers.process_tree import children

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "helpers" / "checkpoint_program.py"
OFFSETS = 12
"""How many more outputs a run writes before its kill: 0 to 11."""
KILLS = int(os.environ.get("PYTIMELY_CHECKPOINT_KILLS", str(OFFSETS * 2)))


def start(directory: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(PROGRAM), str(directory), "-n", "2"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def outputs(directory: Path) -> Counter[Any]:
    found: Counter[Any] = Counter()
    for path in (directory / "out").glob("worker-*/time-*.json"):
        worker, at = path.parent.name, int(path.stem[5:])
        found.update((worker, at, json.dumps(record)) for record in json.loads(path.read_text()))
    return found


def written(directory: Path) -> int:
    return len(list((directory / "out").glob("worker-*/time-*.json")))


@pytest.mark.timeout(900)  # 24 restarts of three processes: minutes when the machine is busy
def test_kills_at_every_offset_and_victim_each_resume_to_the_uninterrupted_output(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    done = start(reference)
    assert done.wait(120) == 0, done.stderr.read().decode() if done.stderr else ""
    expected = outputs(reference)
    assert expected

    rng = random.Random(2026)
    plan = [(offset, victim) for offset in range(OFFSETS) for victim in range(2)]
    rng.shuffle(plan)
    kills = jobs = 0
    job = tmp_path / "job-0"
    while kills < KILLS:
        process = start(job)
        offset, victim = plan[kills % len(plan)]
        target = written(job) + offset
        deadline = time.monotonic() + 60
        workers = sorted(children(process.pid))
        while process.poll() is None and (written(job) < target or len(workers) < 2) and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the job's progress: the kill point is a condition on it (both workers up)
            workers = sorted(children(process.pid))
        if process.poll() is None and workers:
            with contextlib.suppress(ProcessLookupError):  # it ended, and was reaped, since it was listed
                os.kill(workers[victim % len(workers)], signal.SIGKILL)
            if process.wait(60) != 0:
                kills += 1
                continue
            # The kill interrupted nothing: the job was ending, and the victim had sent its results already (or
            # had exited). The job completed, and is checked as any completed job is.
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert process.wait(60) == 0, f"job {jobs} failed after {kills} kills:\n{stderr}"
        assert outputs(job) == expected, f"job {jobs} differs after {kills} kills"
        jobs += 1
        job = tmp_path / f"job-{jobs}"
        assert jobs <= KILLS, f"{jobs} jobs ran to their end before a kill landed; {kills} kills landed"
    process = start(job)  # the last job, killed KILLS times so far, runs to its end
    assert process.wait(120) == 0, process.stderr.read().decode() if process.stderr else ""
    assert outputs(job) == expected, f"the last job differs after {kills} kills"
