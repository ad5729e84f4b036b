"""The bench's CPU speed probes: one figure per CPU, waits that end, faults that stop probing, and the report."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import cpu_speed  # noqa: E402
from cpu_speed import CpuSpeed, Repetition  # noqa: E402
from harness import Run, Size, measured, render, repetition, watch_cpu_speed  # noqa: E402
from helpers import eventually  # noqa: E402


def test_a_probe_times_the_loop_on_every_cpu_at_once() -> None:
    with CpuSpeed() as speed:
        assert len(speed.probes) == cpu_speed.FIRST_PROBES
        sample = speed.probe()
    assert sample is not None and len(sample) == len(os.sched_getaffinity(0))
    assert all(seconds > 0 for seconds in sample)
    assert speed.best == min(min(found) for found in speed.probes)
    assert speed.slowdown(sample) >= 1.0


def test_waiting_for_full_speed_ends_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_speed, "WAIT_PER_REPETITION", 0.3)
    with CpuSpeed(cpus=[0]) as speed:
        speed.probes.insert(0, (1e-9,))  # a best no real probe reaches: every CPU looks slowed
        began = time.monotonic()
        speed.settle()
        assert time.monotonic() - began < 5
        speed.after()
    assert 0.3 <= speed.waited < 5
    assert speed.clean() == 0 and speed.noisy
    assert "0 of 1 repetitions" in speed.summary()


def test_the_run_budget_bounds_every_wait_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_speed, "WAIT_PER_REPETITION", 0.2)
    with CpuSpeed(cpus=[0], wait_per_run=0.3) as speed:
        speed.probes.insert(0, (1e-9,))
        for _ in range(5):
            speed.settle()
    assert len(speed.repetitions) == 5
    assert speed.waited < 0.3 + 2 * 0.2 + 1  # the budget, one probe and pause over at most


def test_no_budget_means_probing_without_waiting() -> None:
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        speed.probes.insert(0, (1e-9,))
        speed.settle()
    assert speed.waited < 1 and len(speed.repetitions) == 1


def test_a_probe_process_that_dies_stops_probing_and_says_so() -> None:
    speed = CpuSpeed(cpus=[0]).start()
    try:
        process = speed._processes[0]
        process.kill()
        process.join()
        assert speed.probe() is None
        speed.settle()  # returns at once: nothing to wait for
        assert speed.repetitions == []
        assert "probing stopped" in speed.summary()
    finally:
        speed.close()


def test_a_probe_process_that_stops_answering_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_speed, "ANSWER_LIMIT", 0.5)
    speed = CpuSpeed(cpus=[0]).start()
    process = speed._processes[0]
    try:
        os.kill(process.pid, signal.SIGSTOP)
        began = time.monotonic()
        assert speed.probe() is None
        assert time.monotonic() - began < 5
        assert "did not answer within 0.5 s" in speed.broken
    finally:
        speed.close()  # a stopped process is killed, not waited for
    assert not process.is_alive()


def test_repetition_waits_and_probes_only_while_watched() -> None:
    with repetition():  # no probe watches: nothing happens
        pass
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        watch_cpu_speed(speed)
        try:
            with repetition():
                pass
        finally:
            watch_cpu_speed(None)
    assert len(speed.repetitions) == 1 and not math.isnan(speed.repetitions[0].after)


def counted(calls: list[int]) -> int:
    calls.append(len(calls))
    return len(calls)


def test_a_repetition_the_cpus_slowed_runs_again_and_only_its_last_run_is_kept() -> None:
    calls: list[int] = []
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        speed.probes.insert(0, (1e-9,))  # every probe looks slowed
        watch_cpu_speed(speed)
        try:
            result = measured(lambda: counted(calls))
        finally:
            watch_cpu_speed(None)
    assert len(calls) == 1 + cpu_speed.RETRIES_PER_REPETITION and result == len(calls)
    assert speed.retried == cpu_speed.RETRIES_PER_REPETITION
    assert len(speed.repetitions) == len(calls) and len(speed.kept()) == 1 and speed.repetitions[-1].kept
    assert "0 of 1 repetitions began and ended" in speed.summary() and "2 run again" in speed.summary()


def test_the_run_budget_bounds_every_retry_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_speed, "RETRIES_PER_RUN", 3)
    calls: list[int] = []
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        speed.probes.insert(0, (1e-9,))
        watch_cpu_speed(speed)
        try:
            for _ in range(4):
                measured(lambda: counted(calls))
        finally:
            watch_cpu_speed(None)
    assert speed.retried == 3 and len(calls) == 4 + 3 and len(speed.kept()) == 4


def test_a_repetition_at_full_speed_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_speed, "FULL_SPEED", 1e9)  # whatever the host does, every probe counts as full speed
    calls: list[int] = []
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        watch_cpu_speed(speed)
        try:
            assert measured(lambda: counted(calls)) == 1
        finally:
            watch_cpu_speed(None)
    assert len(calls) == 1 and speed.retried == 0 and speed.clean() == 1


def test_without_a_probe_a_repetition_runs_once() -> None:
    calls: list[int] = []
    assert measured(lambda: counted(calls)) == 1 and len(calls) == 1


def test_a_failing_repetition_is_not_run_again() -> None:
    with CpuSpeed(cpus=[0], wait_per_run=0.0) as speed:
        speed.probes.insert(0, (1e-9,))
        watch_cpu_speed(speed)
        try:
            with pytest.raises(ZeroDivisionError):
                measured(lambda: 1 // 0)
        finally:
            watch_cpu_speed(None)
    assert speed.retried == 0 and len(speed.repetitions) == 1


def test_the_report_gives_the_cpu_speed_and_marks_a_slowed_run_noisy() -> None:
    speed = CpuSpeed(cpus=[0, 1], probes=[(0.005, 0.0051), (0.009, 0.005)])
    speed.repetitions = [Repetition(0.005, 0.0052), Repetition(0.009, 0.005)]
    run = Run("run.py", Size(False, 1), load_start=0.1, load_end=0.1, speed=speed)
    text = render(run, [], [], {})
    assert "5.0 ms at best" in text and "1 of 2 repetitions began and ended" in text
    assert "the host slowed this machine's CPUs" in text
    speed.repetitions.append(Repetition(0.009, 0.009, kept=False))  # a run dropped for another: not counted
    assert "1 of 2 repetitions began and ended" in render(run, [], [], {})
    speed.repetitions = [Repetition(0.005, 0.0052)] * 9 + [Repetition(0.009, 0.005)]
    assert "the host slowed" not in render(run, [], [], {})
    assert not run.noisy


def test_no_retry_budget_keeps_every_run_as_it_ran() -> None:
    calls: list[int] = []
    with CpuSpeed(cpus=[0], wait_per_run=0.0, retries_per_run=0) as speed:  # what --quick uses
        speed.probes.insert(0, (1e-9,))
        watch_cpu_speed(speed)
        try:
            measured(lambda: counted(calls))
        finally:
            watch_cpu_speed(None)
    assert len(calls) == 1 and speed.retried == 0 and speed.clean() == 0 and speed.noisy


def test_a_negative_cpu_wait_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import run

    with pytest.raises(SystemExit) as exit_info:
        run.main(["--quick", "--cpu-wait", "-1"])
    assert exit_info.value.code == 2
    assert "--cpu-wait is seconds to wait in all, 0 or more (got -1)" in capsys.readouterr().err


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, IndexError):
        return False
    return fields[0] != "Z"


def test_probe_processes_end_when_the_bench_is_killed(tmp_path: Path) -> None:
    script, pids_file = tmp_path / "killed_bench.py", tmp_path / "pids"
    script.write_text(
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "from cpu_speed import CpuSpeed\n"
        "if __name__ == '__main__':\n"
        "    speed = CpuSpeed(cpus=sorted(os.sched_getaffinity(0))[:2]).start()\n"
        f"    open({str(pids_file)!r}, 'w').write(' '.join(str(p.pid) for p in speed._processes))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    # no pipe for the output: the orphans would hold it open, and waiting for it would wait for them
    done = subprocess.run([sys.executable, str(script)], stdout=subprocess.DEVNULL, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL
    pids = [int(pid) for pid in pids_file.read_text().split()]
    assert pids
    eventually(lambda: not any(map(running, pids)), 10.0, "the orphaned probe processes to end")
