"""Record the scc example on 2 workers and draw its dataflow mid-run: ``python docs/scc_diagram.py``.

Writes ``scc.msgpack`` (the recording) to the directory given (default: a
temporary one) and ``docs/scc.png`` with ``python -m viz dot``, at the moment
given by ``--at`` (seconds from the start; default: halfway through).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from scc import read_edges, run_scc  # noqa: E402

from runtime.instrument import Recorder  # noqa: E402

DEBIAN = ROOT / "examples" / "data" / "debian-bookworm-depends.tsv.gz"


def main() -> int:
    """Record, then render."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=3000, help="how many Debian dependency edges to use")
    parser.add_argument("--at", type=float, default=None)
    parser.add_argument("--out", default=str(ROOT / "docs" / "scc.png"))
    args = parser.parse_args()
    edges = list(read_edges(DEBIAN, limit=args.edges))
    with Recorder() as recording:
        run_scc(lambda index, peers: edges[index::peers], 2)
    events = recording.events
    at = args.at if args.at is not None else (events[-1].t - events[0].t) / 2
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "scc.msgpack"
        recording.save(log)
        command = [sys.executable, "-m", "viz", "dot", str(log), "-o", args.out, "--at", f"{at:.3f}"]
        print(" ".join(command[1:]))
        return subprocess.call(command, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
