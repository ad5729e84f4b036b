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
