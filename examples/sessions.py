"""Sessions of click events from a growing directory of Parquet files, resumable after a crash.

Clicks arrive as one Parquet file per minute of arrival, ``clicks/clicks-00000.parquet``,
``clicks-00001.parquet``, ..., written while the job runs; ``clicks/_DONE`` says
no more will come.  Each click has a ``user``, a ``page`` and the ``minute`` it
happened, which may lag the file's minute (a phone that was offline).  The job:

* groups each user's clicks into sessions (``Session(gap=3)`` windows on the
  click's own minute, with a lateness bound of 2 minutes) and counts them;
* sends clicks that arrive too late for their session to a stream of their own,
  written out, never dropped;
* keeps each user's running click total (keyed state);
* joins each session with the user's plan from ``users.parquet``, as of the
  session's time;
* writes sessions, late clicks and totals with ``write_files`` (each epoch
  appears whole or not at all), and checkpoints its state at every epoch.

Killed at any point and run again with the same arguments, it resumes from the
last minute every worker completed::

    .venv/bin/python examples/sessions.py --write-sample /tmp/clicks --slowly 0.05 &
    .venv/bin/python examples/sessions.py -n 2 --input /tmp/clicks --output /tmp/sessions --checkpoint /tmp/ckpt
    .venv/bin/python examples/sessions.py --input /tmp/clicks --output /tmp/sessions --check

``--check`` recomputes the sessions and late clicks with pandas from the input
and exits non-zero on any difference.  Cluster flags (``-w``, ``-n``,
``--metrics``) are timely's.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime import Worker, execute_from_args  # noqa: E402
from runtime.checkpoints import CheckpointStore  # noqa: E402
from runtime.files import write_files  # noqa: E402
from scopes import Session  # noqa: E402

GAP = 3
"""Minutes without a click that end a session."""

LATENESS = 2
"""Minutes a click may arrive after its session would have closed."""

POLL = 0.02
"""Seconds between looks for the next file while waiting for it."""


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--write-sample", metavar="DIR", help="write the sample input to DIR and exit")
    parser.add_argument("--slowly", type=float, default=0.0, help="with --write-sample: seconds between files")
    parser.add_argument("--minutes", type=int, default=40, help="with --write-sample: how many files")
    parser.add_argument("--input", metavar="DIR")
    parser.add_argument("--output", metavar="DIR")
    parser.add_argument("--checkpoint", metavar="DIR")
    parser.add_argument("--check", action="store_true", help="compare --output with pandas over --input")
    known, _ = parser.parse_known_args(argv)
    return known


# ---------------------------------------------------------------------- the sample input


def write_sample(directory: Path, minutes: int, slowly: float) -> None:
    """Users and ``minutes`` files of clicks, written one by one (hidden, then renamed), then ``_DONE``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(7)
    clicks = directory / "clicks"
    clicks.mkdir(parents=True, exist_ok=True)
    users = [f"user{n:02d}" for n in range(12)]
    plans = pa.table({"user": users, "plan": [rng.choice(["free", "pro", "team"]) for _ in users]})
    pq.write_table(plans, directory / ".users.parquet.tmp")
    os.replace(directory / ".users.parquet.tmp", directory / "users.parquet")  # whole, or not there yet
    for minute in range(minutes):
        rows = []
        for user in rng.sample(users, rng.randint(0, 6)):
            for _ in range(rng.randint(1, 3)):
                lag = 6 if rng.random() < 0.04 else rng.choice([0, 0, 0, 1])
                rows.append({"user": user, "page": rng.choice(["/", "/cart", "/help"]), "minute": max(0, minute - lag)})
        table = pa.Table.from_pylist(
            rows, schema=pa.schema([("user", pa.string()), ("page", pa.string()), ("minute", pa.int64())])
        )
        hidden = clicks / f".clicks-{minute:05d}.parquet.tmp"
        pq.write_table(table, hidden)
        os.replace(hidden, clicks / f"clicks-{minute:05d}.parquet")
        if slowly:
            time.sleep(slowly)  # a slow producer: the job waits for each file
    (clicks / "_DONE").write_text(str(minutes))


# ---------------------------------------------------------------------- the job


def dataflow(scope: Any, output: Path) -> tuple[Any, Any, Any]:
    """Sessions with plans, late clicks and running totals, written under ``output``."""
    clicks_in, clicks = scope.new_input("Clicks")
    users_in, users = scope.new_input("Users")
    by_user = clicks.key_by(lambda click: click["user"])
    windows = by_user.window(Session(GAP), event_time=lambda click: click["minute"], lateness=LATENESS).count()
    plans = users.map(lambda row: (row["user"], row["plan"])).keyed()
    sessions = windows.down.map(lambda s: (s[0], (s[1], s[2]))).keyed().join_latest(plans, how="left")
    rows = sessions.map(
        lambda s: {"user": s[0], "start": s[1][0][0][0], "end": s[1][0][0][1], "clicks": s[1][0][1], "plan": s[1][1]}
    )
    totals = by_user.fold(int, lambda n, click: n + 1).map(lambda t: {"user": t[0], "total": t[1]})
    late = windows.late.map(lambda pair: pair[1])
    written = [
        write_files(rows, output / "sessions", name="WriteSessions"),
        write_files(late, output / "late", name="WriteLate"),
        write_files(totals, output / "totals", name="WriteTotals"),
    ]
    probe = written[0].concat(*written[1:]).probe()
    return clicks_in, users_in, probe


def main(worker: Worker) -> int:
    import pyarrow.parquet as pq

    options = arguments(sys.argv[1:])
    source, output = Path(options.input), Path(options.output)
    store = CheckpointStore(options.checkpoint or output / "_checkpoints", keep=3)
    clicks_in, users_in, probe = worker.dataflow(lambda scope: dataflow(scope, output), checkpoint=store)
    if store.resume_epoch == 0 and worker.index == 0:  # a resumed run has the table in its checkpoint
        while not (source / "users.parquet").exists():  # the producer may not have written it yet: outside data
            deadline = time.monotonic() + POLL
            worker.step_while(lambda deadline=deadline: time.monotonic() < deadline)
        users_in.send_batch(pq.read_table(source / "users.parquet").to_pylist())
    minute = store.resume_epoch
    clicks = source / "clicks"
    while True:
        path = clicks / f"clicks-{minute:05d}.parquet"
        if path.exists():
            rows = pq.read_table(path).to_pylist()
            clicks_in.send_batch(rows[worker.index :: worker.peers])
            minute += 1
            clicks_in.advance_to(minute)
            users_in.advance_to(minute)
            worker.step()
        elif (clicks / "_DONE").exists() and minute >= int((clicks / "_DONE").read_text()):
            break
        else:  # waiting for the producer: not stuck, the next file is outside data
            deadline = time.monotonic() + POLL
            worker.step_while(lambda deadline=deadline: time.monotonic() < deadline)
    clicks_in.close()
    users_in.close()
    worker.step_while(lambda: not probe.done())
    return store.resume_epoch


# ---------------------------------------------------------------------- the check


def expected_sessions(source: Path) -> tuple[Any, Any]:
    """Sessions and late clicks computed with pandas, straight from the input files."""
    import pandas as pd

    files = sorted((source / "clicks").glob("clicks-*.parquet"))
    frames = [pd.read_parquet(path).assign(arrived=int(path.stem[7:])) for path in files]
    clicks = pd.concat(frames, ignore_index=True)
    late = clicks[clicks["arrived"] > clicks["minute"] + GAP - 1 + LATENESS]
    on_time = clicks.drop(late.index).sort_values(["user", "minute"])
    new_session = on_time.groupby("user")["minute"].diff().fillna(GAP) >= GAP
    on_time = on_time.assign(session=new_session.cumsum())
    sessions = on_time.groupby(["user", "session"]).agg(
        start=("minute", "min"), last=("minute", "max"), clicks=("minute", "size")
    )
    sessions = sessions.reset_index().assign(end=lambda s: s["last"] + 1)
    plans = pd.read_parquet(source / "users.parquet")
    sessions = sessions.merge(plans, on="user", how="left")[["user", "start", "end", "clicks", "plan"]]
    return sessions, late[["user", "page", "minute"]]


def written(directory: Path, columns: list[str]) -> Any:
    import pyarrow.dataset as ds

    if not directory.exists():
        return None
    return ds.dataset(directory, format="parquet", partitioning="hive").to_table().to_pandas()[columns]


def check(source: Path, output: Path) -> int:
    """0 when the output holds exactly the sessions and late clicks pandas finds, else 1 (with the differences)."""
    sessions, late = expected_sessions(source)
    problems = []
    for name, want in (("sessions", sessions), ("late", late)):
        got = written(output / name, list(want.columns))
        got_rows = sorted(map(tuple, got.astype(str).values.tolist())) if got is not None else []
        want_rows = sorted(map(tuple, want.astype(str).values.tolist()))
        if got_rows != want_rows:
            missing = [row for row in want_rows if row not in got_rows][:5]
            extra = [row for row in got_rows if row not in want_rows][:5]
            problems.append(
                f"{name}: {len(got_rows)} rows written, {len(want_rows)} expected; "
                f"missing {missing}, unexpected {extra}"
            )
        else:
            print(f"{name}: {len(got_rows)} rows, as pandas computes them")
    for problem in problems:
        print(f"MISMATCH {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    options = arguments(sys.argv[1:])
    if options.write_sample:
        write_sample(Path(options.write_sample), options.minutes, options.slowly)
    elif options.check:
        if not options.input or not options.output:
            sys.exit("--check needs --input and --output")
        sys.exit(check(Path(options.input), Path(options.output)))
    else:
        if not options.input or not options.output:
            sys.exit("give --input DIR and --output DIR (and --checkpoint DIR to resume after a crash)")
        resumed = execute_from_args(main, sys.argv[1:])[0]
        print(f"done{f' (resumed at minute {resumed})' if resumed else ''}: output in {options.output}")
