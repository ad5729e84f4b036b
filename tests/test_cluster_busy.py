"""A process that holds the GIL past the silence limit is busy, not lost, to its peers on the same host.

Under ``execute(main, processes=2)``, over shared memory and over TCP, an
operator of process 1 makes one call that holds the GIL for about 7.5 s (``pow`` of large integers: C code that never
lets another thread run, sized by its CPU time).  Its heartbeat thread cannot
send anything meanwhile (a thread of the same process that ticks every 20 ms
is seen not to run for longer than the silence limit).  Process 0 looks at it
(same host: its pid is known, from the launcher and from the shared-memory
link), finds it running, says so once and waits; the launcher does not kill
it either: the run gives the right answer.  Before this was so, process 0 declared it lost
("nothing arrived from it for 6.0 s") and the run failed.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import start_program

from runtime.communication.process_fabric import SILENCE_LIMIT

pytestmark = [
    pytest.mark.usefixtures("transport"),  # over shared memory and over TCP
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a process is looked at in /proc"),
]

ROOT = Path(__file__).resolve().parent.parent

HOLD_SECONDS = 7.5

SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    sys.path.insert(0, {root!r})
    from runtime import execute

    HOLD = -1
    MODULUS = (1 << 4096) - 159

    def hold_gil(seconds):
        \"\"\"Hold the GIL for about ``seconds`` of CPU in one C call; the longest time no other thread ran.\"\"\"
        start = time.thread_time()
        pow(3, (1 << 5000) - 1, MODULUS)
        per_bit = (time.thread_time() - start) / 5000
        ticks = [time.monotonic()]
        done = threading.Event()
        def tick():
            while not done.wait(0.02):
                ticks.append(time.monotonic())
        ticker = threading.Thread(target=tick)
        ticker.start()
        time.sleep(0.1)
        pow(3, (1 << int(seconds / per_bit)) - 1, MODULUS)
        done.set()
        ticker.join()
        return max(later - earlier for earlier, later in zip(ticks, ticks[1:]))

    def main(worker):
        total = [0]
        gaps = []
        def work(x):
            if x == HOLD:
                gaps.append(hold_gil({seconds}))
                return 0
            return x
        def build(scope):
            handle, stream = scope.new_input()
            summed = stream.exchange(lambda x: 1 if x == HOLD else x).map(work).exchange(lambda x: 0)
            return handle, summed.inspect(lambda x: total.__setitem__(0, total[0] + x)).probe()
        handle, probe = worker.dataflow(build)
        for epoch in range(4):
            if worker.index == 0:
                handle.send_batch(list(range(100 * epoch, 100 * epoch + 100)) + ([HOLD] if epoch == 1 else []))
            handle.advance_to(epoch + 1)
            worker.step_while(lambda: probe.less_than(epoch + 1))
        return [total[0], os.getpid(), max(gaps, default=0.0)]

    if __name__ == "__main__":
        print("results", execute(main, processes=2, stall_timeout=None), flush=True)
    """
)


def shared_memory_segments() -> set[str]:
    """The pytimely entries of /dev/shm (none is ever made: rings are memfds)."""
    return {name for name in os.listdir("/dev/shm") if "pytimely" in name} if os.path.isdir("/dev/shm") else set()


def test_a_process_holding_the_gil_past_the_silence_limit_is_waited_for(tmp_path: Path) -> None:
    segments = shared_memory_segments()
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT.format(root=str(ROOT), seconds=HOLD_SECONDS))
    parent = start_program(script)
    try:
        out, err = parent.communicate(timeout=90)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.communicate()
    assert shared_memory_segments() - segments == set()
    assert parent.returncode == 0 and out.startswith("results "), out + err
    first, second = eval(out.removeprefix("results "))  # noqa: S307 - our own script's output
    assert first[0] == sum(range(400)) and second[0] == 0, out
    gap = second[2]
    assert gap > SILENCE_LIMIT + 0.5, f"process 1's other threads ran every {gap:.1f} s at most: the GIL was not held"
    pid = second[1]
    waiting = [line for line in err.splitlines() if "but is running (holding the GIL?)" in line]
    assert len(waiting) == 1 and waiting[0].startswith("process 0: process 1 (127.0.0.1:"), err
    assert f", pid {pid}) has sent nothing for" in waiting[0], err
