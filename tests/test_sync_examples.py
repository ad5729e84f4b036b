"""The synchronization examples (seed 001) run as scripts and check themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_example(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_barrier_example_releases_workers_together():
    out = run_example("examples/barrier.py", "-w", "3", "--rounds", "2", "--delay", "0.05")
    assert "3 worker(s) passed 2 barrier(s) together: True" in out
    assert out.count("passed the barrier") == 6


def test_sequence_example_gives_every_worker_the_same_order():
    out = run_example("examples/sequence.py", "-w", "3", "--rounds", "3", "--pause", "0.02")
    assert "3 worker(s) received 9 announcements in the same order: True" in out
    assert out.count("recv'd") == 27
