"""The load test's viewer, in a process of its own: ``python tests/helpers/tui_load.py RATE SECONDS``.

Runs the viewer headless (Textual's ``run_test``) on a live listener, starts
``tests/helpers/tui_flood.py`` against it, samples the lag the viewer reports and the
true lag (now minus the newest event time applied; the flood stamps its
chunks with the shared monotonic clock), and prints one JSON object with the
measurements.  A process of its own, as a real viewer is: inside a test
session that has run hundreds of tests, the garbage collector walks the whole
session's heap and the viewer measures that instead of itself.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/, for the helpers package
sys.path.insert(0, str(HERE.parent.parent))  # the repository

from viz.tui.app import TimelyApp  # noqa: E402
from viz.tui.sources import LiveListener  # noqa: E402

STRUCTURE = 40
"""The synthetic dataflow's construction events, sent before the flood."""


def cpu_share(seconds: float = 0.3) -> float:
    """The share of one core this process gets right now: CPU time of a busy loop over its wall time."""
    wall, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds:
        sum(range(1000))
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


async def measure(rate: int, seconds: float) -> dict[str, object]:
    """Flood a viewer and measure it."""
    listener = LiveListener("127.0.0.1", 0)
    app = TimelyApp(listener=listener)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")  # the operator table redraws too while the events pour in
        share_before = cpu_share()
        cpu_started = time.process_time()
        sender = subprocess.Popen(
            [sys.executable, str(HERE / "tui_flood.py"), str(listener.port), str(rate), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        reported: list[float] = []
        true_lags: list[float] = []
        flood_started = time.monotonic()
        try:
            while sender.poll() is None:
                await pilot.pause(0.1)
                reported.append(app.lag)
                newest = app.state.model.last_t
                if newest is not None and newest >= flood_started:
                    true_lags.append(time.monotonic() - newest)
            sent_text, elapsed_text, in_send_text = (sender.stdout.read() if sender.stdout else "0 1 0").split()
        finally:
            sender.kill()
            sender.wait()
        sent, elapsed, in_send = int(sent_text), float(elapsed_text), float(in_send_text)
        deadline = time.monotonic() + 10
        while app.state.model.events < sent + STRUCTURE and time.monotonic() < deadline:
            await pilot.pause(0.05)
        viewer_cpu = time.process_time() - cpu_started
        return {
            "sender_status": sender.returncode,
            "sent": sent,
            "elapsed": elapsed,
            "in_send": in_send,
            "applied": app.state.model.events - STRUCTURE,
            "dropped": app.state.model.dropped,
            "reported": reported,
            "true_lags": true_lags,
            "viewer_cpu": viewer_cpu,
            "share": (share_before + cpu_share()) / 2,
            "errors": app.errors,
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure(int(sys.argv[1]), float(sys.argv[2])))))
