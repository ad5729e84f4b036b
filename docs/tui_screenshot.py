"""Draw ``docs/tui.png``: the viewer replaying the scc example on 2 workers, mid-run.

``python docs/tui_screenshot.py [--pane tree|operators|channels|stuck|graph]`` records
the scc example (3,000 Debian dependency edges, 2 workers), opens the viewer on
the recording at its 40th frontier change, exports the screen as SVG with
Textual, and converts it to PNG with ``rsvg-convert`` (Debian's ``librsvg2-bin``).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from scc import read_edges, run_scc  # noqa: E402

from runtime.instrument import Recorder  # noqa: E402
from viz.tui.app import TimelyApp  # noqa: E402
from viz.tui.sources import Replay  # noqa: E402

DEBIAN = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"
KEYS = {"tree": "1", "operators": "2", "channels": "3", "stuck": "4", "graph": "5"}


async def screenshot(replay: Replay, pane: str, changes: int, size: tuple[int, int]) -> str:
    """The SVG of the viewer at the given pane after ``changes`` frontier changes."""
    app = TimelyApp(replay=replay, clock=lambda: 0.0)
    async with app.run_test(size=size) as pilot:
        for _ in range(changes):
            replay.next_frontier_change()
        await pilot.press(KEYS[pane])
        await pilot.pause(0.3)
        return app.export_screenshot(title="python -m viz tui --replay scc.msgpack")


def main() -> int:
    """Record, replay, export, convert."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pane", choices=sorted(KEYS), default="tree")
    parser.add_argument("--changes", type=int, default=40, help="frontier changes to replay before the shot")
    parser.add_argument("--out", default=str(ROOT / "docs" / "tui.png"))
    args = parser.parse_args()
    edges = list(read_edges(DEBIAN, limit=3000))
    with Recorder() as recording:
        run_scc(lambda index, peers: edges[index::peers], 2)
    replay = Replay(sorted(recording.events, key=lambda e: (e.t, e.worker, e.seq)))
    svg = asyncio.run(screenshot(replay, args.pane, args.changes, (120, 36)))
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "tui.svg"
        source.write_text(svg)
        return subprocess.call(["rsvg-convert", "-w", "1600", str(source), "-o", args.out])


if __name__ == "__main__":
    sys.exit(main())
