"""examples/sessions.py, as the streaming guide runs it: a growing input, kills, resumes, and pandas' answer."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import eventually
from helpers.process_tree import children

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sessions.py"

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


def command(*args: str) -> list[str]:
    return [sys.executable, str(EXAMPLE), *args]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("cluster", [["-w", "1"], ["-w", "2"]])
def test_the_job_matches_pandas_on_threads(tmp_path: Path, cluster: list[str]) -> None:
    assert run("--write-sample", str(tmp_path / "in"), "--minutes", "15").returncode == 0
    job = run(*cluster, "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"))
    assert job.returncode == 0, job.stderr
    checked = run("--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "sessions:" in checked.stdout and "late:" in checked.stdout


def test_killed_while_the_input_grows_and_run_again_it_resumes_to_pandas_answer(tmp_path: Path) -> None:
    source, output, checkpoints = tmp_path / "in", tmp_path / "out", tmp_path / "ckpt"
    producer = subprocess.Popen(command("--write-sample", str(source), "--minutes", "40", "--slowly", "0.05"), cwd=ROOT)
    arguments = ["-n", "2", "--input", str(source), "--output", str(output), "--checkpoint", str(checkpoints)]
    rng = random.Random(29)
    kills = 0
    while True:
        job = subprocess.Popen(command(*arguments), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if kills < 3:
            committed = len(list((output / "sessions").glob("epoch=*"))) if (output / "sessions").exists() else 0
            target = committed + rng.randrange(1, 4)
            deadline = time.monotonic() + 60
            while job.poll() is None and time.monotonic() < deadline:
                if (output / "sessions").exists() and len(list((output / "sessions").glob("epoch=*"))) >= target:
                    break
                time.sleep(0.01)  # polling the job's progress: the kill point is a condition on it
            workers = children(job.pid)
            if job.poll() is None and workers:
                os.kill(rng.choice(workers), signal.SIGKILL)
                job.communicate(timeout=60)
                kills += 1
                continue
        stdout, stderr = job.communicate(timeout=120)
        assert job.returncode == 0, stderr
        break
    assert producer.wait(60) == 0
    assert kills >= 1 and "resumed at minute" in stdout
    checked = run("--input", str(source), "--output", str(output), "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_job_started_before_its_producer_waits_for_the_users_table(tmp_path: Path) -> None:
    """The job read users.parquet as it started, so one started before the producer (as the docstring's two
    commands, the first in the background, may be) failed with FileNotFoundError; it now waits for it, as it does
    for each file of clicks, and the producer writes it whole (hidden, then renamed)."""
    source, output = tmp_path / "in", tmp_path / "out"
    job = subprocess.Popen(
        command("-w", "2", "--input", str(source), "--output", str(output)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the job has built its dataflow (its checkpoint store makes each worker's directory then), with no input
        eventually(lambda: (output / "_checkpoints" / "workers-2").is_dir() or job.poll() is not None, timeout=60)
        assert job.poll() is None, job.communicate()[1]
        assert run("--write-sample", str(source), "--minutes", "8").returncode == 0
        _, stderr = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, stderr
    checked = run("--input", str(source), "--output", str(output), "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
