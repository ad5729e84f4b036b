"""A windowed count, pytimely against bytewax 0.21.1, on the same Parquet files.

``FILES`` files of click events (a ``user`` and the ``minute`` it clicked), one
file per minute of arrival, are written once; both engines then count each
user's clicks in tumbling windows of ``WINDOW`` minutes, from the rows the
files hold (read before the clock starts, so the figure is the engines' own).

* pytimely: one epoch per file on 1 worker, in both forms: record-wise,
  ``stream.window(Tumbling(WINDOW), key=user).count()`` on ``(user, minute)``
  tuples, and columnar, ``stream.window_batch(Tumbling(WINDOW), keys="user").count()``
  on the files' Arrow tables (its fastest form); windows close when the frontier
  passes them.
* bytewax: ``count_window`` with an ``EventClock`` on the click's minute (an
  hour's wait for system time: with none, its watermark moves with the wall
  clock and it drops clicks as late) and a ``TumblingWindower``, fed by a ``TestingSource``
  in batches of ``BYTEWAX_BATCH``, ``run_main`` with its default epoch interval:
  its fastest single-worker set-up (one item an epoch, ``epoch_interval=0``,
  grows superlinearly with the keys: 1,000 clicks took 22 s).

Both answers are compared: a run whose counts differ raises.
"""

from __future__ import annotations

import gc
import random
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from harness import Log, Metric, Size, Skip, WrongAnswer, in_seconds, measured

FILES = 60
ROWS_PER_FILE = 5_000
USERS = 500
WINDOW = 5

BYTEWAX_BATCH = 5_000
"""Items bytewax's ``TestingSource`` hands on at once (its default is 1, far slower)."""

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def write_files(directory: Path, files: int = FILES, rows: int = ROWS_PER_FILE, seed: int = 11) -> list[Path]:
    """``files`` Parquet files of ``rows`` clicks each: file ``k`` holds clicks of minute ``k``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    paths = []
    for minute in range(files):
        users = [f"user{rng.randrange(USERS)}" for _ in range(rows)]
        path = directory / f"clicks-{minute:05d}.parquet"
        pq.write_table(pa.table({"user": users, "minute": [minute] * rows}), path)
        paths.append(path)
    return paths


def read_epochs(paths: list[Path]) -> list[list[tuple[str, int]]]:
    """Each file's rows as ``(user, minute)`` tuples, one list per file (epoch)."""
    import pyarrow.parquet as pq

    epochs = []
    for path in paths:
        table = pq.read_table(path)
        epochs.append(list(zip(table.column("user").to_pylist(), table.column("minute").to_pylist(), strict=True)))
    return epochs


def read_tables(paths: list[Path]) -> list[Any]:
    """Each file as an Arrow table, one per file (epoch)."""
    import pyarrow.parquet as pq

    return [pq.read_table(path) for path in paths]


def pytimely_count(epochs: list[Any], columnar: bool = False) -> tuple[float, Counter[Any]]:
    """Seconds for pytimely's windowed count on 1 worker, and its answer ``{(user, start): count}``.

    ``epochs`` are lists of ``(user, minute)`` tuples, or Arrow tables when ``columnar``.
    """
    from runtime import execute
    from scopes import Tumbling

    def main(worker: Any) -> tuple[float, list[Any]]:
        out: list[Any] = []

        def build(scope: Any) -> Any:
            clicks_in, clicks = scope.new_input("Clicks")
            if columnar:
                counts = clicks.window_batch(Tumbling(WINDOW), keys="user").count().down
                counts.inspect_batch(lambda time, table: out.append(table))
            else:
                counts = clicks.window(Tumbling(WINDOW), key=lambda click: click[0]).count().down
                counts.inspect_batch(lambda time, batch: out.extend(batch))
            return clicks_in, counts.probe()

        clicks_in, probe = worker.dataflow(build)
        start = time.perf_counter()
        for epoch, rows in enumerate(epochs):
            clicks_in.send_batch(rows)
            clicks_in.advance_to(epoch + 1)
            worker.step()
        clicks_in.close()
        worker.step_while(lambda: not probe.done())
        return time.perf_counter() - start, out

    gc.collect()
    seconds, out = execute(main, workers=1)[0]
    if columnar:
        rows = [row for table in out for row in table.to_pylist()]
        return seconds, Counter({(row["user"], row["window_start"]): row["count"] for row in rows})
    return seconds, Counter({(user, window[0]): count for user, window, count in out})


def bytewax_count(epochs: list[list[tuple[str, int]]]) -> tuple[float, Counter[Any]]:
    """Seconds for bytewax's windowed count, and its answer ``{(user, start): count}``."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.operators.windowing import EventClock, TumblingWindower, count_window
    from bytewax.testing import TestingSink, TestingSource, run_main

    stamped = [(user, BASE + timedelta(minutes=minute)) for rows in epochs for user, minute in rows]
    flow = Dataflow("windowed_count")
    clicks = op.input("clicks", flow, TestingSource(stamped, batch_size=BYTEWAX_BATCH))
    # its watermark moves with the system clock: with no wait, clicks of a minute that arrive in a later
    # batch are dropped as late (half of them at 100,000 clicks); an hour's wait counts every click
    clock = EventClock(lambda click: click[1], wait_for_system_duration=timedelta(hours=1))
    windower = TumblingWindower(length=timedelta(minutes=WINDOW), align_to=BASE)
    counted = count_window("count", clicks, clock, windower, lambda click: click[0])
    out: list[Any] = []
    op.output("out", counted.down, TestingSink(out))
    gc.collect()
    start = time.perf_counter()
    run_main(flow)  # its default epoch interval (10 s): its fastest for throughput
    seconds = time.perf_counter() - start
    return seconds, Counter({(user, window_id * WINDOW): count for user, (window_id, count) in out})


def measure(repeat: int = 3, files: int = FILES) -> dict[str, list[float]]:
    """Interleaved runs of both engines on the same files; :class:`WrongAnswer` if their counts differ."""
    with tempfile.TemporaryDirectory() as directory:
        paths = write_files(Path(directory), files)
        epochs, tables = read_epochs(paths), read_tables(paths)
    seconds: dict[str, list[float]] = {"pytimely": [], "pytimely_columnar": [], "bytewax": []}
    for _ in range(repeat):
        mine, ours = measured(partial(pytimely_count, epochs))
        columnar_seconds, columnar = measured(partial(pytimely_count, tables, columnar=True))
        theirs_seconds, theirs = measured(partial(bytewax_count, epochs))
        for form, answer in (("record-wise", ours), ("columnar", columnar)):
            if answer != theirs:
                differ = sorted(set(answer.items()) ^ set(theirs.items()))[:5]
                raise WrongAnswer(f"pytimely ({form}) and bytewax counted different windows, for example {differ}")
        seconds["pytimely"].append(mine)
        seconds["pytimely_columnar"].append(columnar_seconds)
        seconds["bytewax"].append(theirs_seconds)
    return seconds


def bench(size: Size, log: Log) -> dict[str, Metric]:
    """The workload for ``run.py``: both engines' windowed counts of the same clicks, their answers compared."""
    try:
        import bytewax  # noqa: F401
    except ImportError:
        raise Skip("bytewax is not installed (`make bench` installs it)") from None
    files = 6 if size.quick else FILES
    clicks = files * ROWS_PER_FILE
    found = {key: in_seconds(times, f"{key}, {clicks:,} clicks") for key, times in measure(size.repeat, files).items()}
    log(
        f"  windows: pytimely {found['pytimely'].text()}, columnar {found['pytimely_columnar'].text()}, "
        f"bytewax {found['bytewax'].text()}"
    )
    for key in ("pytimely", "pytimely_columnar", "bytewax"):
        found[f"{key}_ns"] = Metric(found[key].value / clicks * 1e9, "ns", f"{key}'s time per click")
    return found


if __name__ == "__main__":
    found = measure()
    rows = FILES * ROWS_PER_FILE
    for engine, values in found.items():
        best = min(values)
        print(f"{engine:9} {best:.3f} s  ({rows / best / 1e6:.2f} M clicks/s)")
    print(f"pytimely / bytewax time: {min(found['pytimely']) / min(found['bytewax']):.2f}x")
