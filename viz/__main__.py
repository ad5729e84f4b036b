"""``python -m viz``: draw a dataflow diagram from a recording.

    python -m viz dot LOG [LOG ...] -o out.svg [--at SECONDS] [--worker N] [--depth N]
                                      [--stuck ADDRESS[:in|out:PORT]] [--time TIME] [--allow-format-1]

The output format follows the file suffix (``.dot``/``.gv`` need no Graphviz;
``.svg``, ``.png``, ``.pdf`` need its ``dot`` program).  ``-o -`` writes DOT to
standard output.  Errors are one line on standard error and a non-zero exit.
"""

from __future__ import annotations

import argparse
import ast
import math
import sys
import warnings
from typing import Any

from runtime.instrument import Event, RecordingError, UncheckedRecordingWarning, read_recording
from viz.dot import Diagram, to_graph
from viz.errors import SelectionError, VizError
from viz.model import Loc, Model
from viz.tui.cli import add_tui_parser, run_tui


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m viz", description="Diagrams of pytimely recordings.")
    commands = parser.add_subparsers(dest="command", required=True)
    dot = commands.add_parser("dot", help="draw the dataflow of a recording with Graphviz")
    dot.add_argument("logs", nargs="+", metavar="LOG", help="recording file(s), one per process")
    dot.add_argument("-o", "--output", required=True, help="output file (.dot, .gv, .svg, .png, .pdf) or - for DOT")
    dot.add_argument("--at", type=float, default=None, help="seconds from the start of the recording")
    dot.add_argument("--worker", type=int, default=None, help="one worker's view (default: all workers)")
    dot.add_argument("--depth", type=int, default=None, help="collapse scopes nested deeper than this")
    dot.add_argument(
        "--stuck",
        default=None,
        metavar="ADDRESS[:in|out:PORT]",
        help="mark a location (default input 0) and explain what holds its frontier back, e.g. 0,3:in:0",
    )
    dot.add_argument("--time", default=None, help="the time the stuck location cannot pass (default: its frontier)")
    dot.add_argument(
        "--allow-format-1",
        action="store_true",
        help="also read recordings of format version 1, which have no checksums (damage reads as other data)",
    )
    add_tui_parser(commands)
    return parser


def _parse_location(model: Model, text: str) -> Loc:
    try:
        return model.locate(text)
    except SelectionError as error:
        raise SelectionError(f"--stuck {error}") from None


def _parse_time(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SelectionError(f"--time {text!r}: expected an integer or a tuple like (3, 1)") from None
    if isinstance(value, tuple) and len(value) == 2:
        from scopes.progress.timestamp import Product

        def product(v: Any) -> Any:
            return Product(product(v[0]), product(v[1])) if isinstance(v, tuple) else v

        return product(value)
    return value


def _dot(args: argparse.Namespace) -> int:
    if args.at is not None and not 0 <= args.at < math.inf:  # NaN fails this too
        raise SelectionError(f"--at {args.at}: expected seconds from the start of the recording, 0 or more")
    if args.depth is not None and args.depth < 0:
        raise SelectionError(f"--depth {args.depth}: expected how many scopes deep to show, 0 or more")
    if args.time is not None and args.stuck is None:
        raise SelectionError("--time is the time a --stuck location cannot pass: give --stuck too")
    events: list[Event] = []
    for path in args.logs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UncheckedRecordingWarning)  # said below, in the command's words
            recording = read_recording(path, allow_format_1=args.allow_format_1)
        if recording.unchecked is not None:
            print(f"python -m viz: warning: {recording.unchecked}", file=sys.stderr)
        events.extend(recording.events)
        if recording.truncated is not None:
            print(
                f"python -m viz: warning: {recording.truncated}; the diagram shows the run as far as it was recorded",
                file=sys.stderr,
            )
    if not events:
        raise SelectionError(f"{', '.join(map(str, args.logs))}: the recording holds no events")
    model = Model.from_events(events, until=args.at)  # --at was checked above, before reading anything
    if model.mistimed:
        print(
            f"python -m viz: warning: {model.mistimed} event(s) hold a time of another kind than the other times of "
            "their scope (the runtime never writes that: the recording was altered or damaged); they are not shown",
            file=sys.stderr,
        )
    if args.worker is not None and args.worker not in model.workers:
        raise SelectionError(f"--worker {args.worker}: the recording has workers {sorted(model.workers)}")
    stuck = None
    if args.stuck is not None:
        loc = _parse_location(model, args.stuck)
        view = model.view(args.worker)
        if args.time is not None:
            time = _parse_time(args.time)
        else:
            frontier = view.frontier(loc)
            if not frontier:
                raise SelectionError(f"--stuck {args.stuck!r}: its frontier is empty, nothing is stuck there")
            time = frontier[0]
        stuck = (loc, time)
    diagram = Diagram(to_graph(model, worker=args.worker, depth=args.depth, stuck=stuck))
    if args.output == "-":
        sys.stdout.write(diagram.source)
    else:
        diagram.save(args.output)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "tui":
        return run_tui(args)
    try:
        return _dot(args)
    except (RecordingError, VizError) as error:
        print(f"python -m viz: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
