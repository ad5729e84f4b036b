"""Seed 002's example with real processes: 5 capturing workers, 3 replaying ones, over TCP and files."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from helpers.ports import free_port, free_ports

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 60


def run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str]) -> str:
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"{process.args} did not finish in {TIMEOUT} s:\n{out}\n{err}") from None
    assert process.returncode == 0, f"{process.args} failed:\n{out}\n{err}"
    return out


def check_replayed(output: str) -> None:
    replayed = [int(line.split(": ")[1]) for line in output.splitlines() if line.startswith("replayed: ")]
    assert len(replayed) == 50
    assert Counter(replayed) == Counter({n: 5 for n in range(10)})
    assert "replayed 50 records from 5 stream(s) on 3 worker(s); complete: True" in output


def test_five_capturing_workers_send_over_tcp_to_three_replaying_workers():
    base = free_ports(5, consecutive=True)[0]
    receiver = run(str(EXAMPLES / "capture_recv.py"), "5", "-w", "3", "--port", str(base), "--accept-timeout", "30")
    sender = run(str(EXAMPLES / "capture_send.py"), "-w", "5", "--port", str(base), "--connect-timeout", "30")
    try:
        assert "captured 5 stream(s) of 10 records" in finish(sender)
        check_replayed(finish(receiver))
    finally:
        for process in (sender, receiver):
            if process.poll() is None:
                process.kill()
                process.communicate()


def test_five_capturing_workers_write_files_that_three_workers_replay(tmp_path):
    finish(run(str(EXAMPLES / "capture_send.py"), "-w", "5", "--log-dir", str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"stream-{i}.log" for i in range(5)]
    check_replayed(finish(run(str(EXAMPLES / "capture_recv.py"), "5", "-w", "3", "--log-dir", str(tmp_path))))


def test_the_receiver_reports_a_sender_that_never_connects():
    base = free_port()
    process = run(str(EXAMPLES / "capture_recv.py"), "1", "--port", str(base), "--accept-timeout", "0.5")
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode != 0
    assert "no sender connected" in err and "run capture_send.py with -w 1" in err
