"""Test helpers: run a dataflow over given inputs and check what comes out.

A test states its inputs as records per epoch, builds the dataflow with an
ordinary ``build(scope, streams)`` function, and gets back every output record
grouped by time, together with the final frontier of each output::

    from runtime.testing import run_dataflow, assert_outputs, assert_agree

    def lengths(scope, words):
        return words.exchange(lambda w: w).map(len)

    result = run_dataflow(lengths, [["a", "bb"], ["ccc"]], workers=2)
    assert_outputs(result, {0: [1, 2], 1: [3]})
    assert_agree(lengths, [["a", "bb"], ["ccc"]])  # 1, 2 and 4 workers, and 2 processes

Each worker sends its share of each epoch's records (worker ``i`` takes
records ``i, i + peers, ...``), so exchanges and per-worker state are
exercised the way a real run exercises them.  An epoch given as a NumPy array
or an Arrow batch is sent as a batch of that kind (the rows of the share).  Outputs are compared as
multisets per time: the order in which workers emit records is not part of the
answer; numbers compare by value and kind (``1``, ``1.0`` and ``True`` differ,
NaN equals NaN).  Columnar batches (NumPy arrays, Arrow batches) are turned into
records with ``tolist()`` / ``to_pylist()`` when the run has ended.

With ``processes=P`` the run starts ``P`` real processes, so ``build`` must be a
function defined at the top level of an importable module and the inputs must
be wire-encodable, exactly as for :func:`runtime.execute` with processes.

A build function that reads no input (a replay, ``scope.to_stream``) is given
``[]`` as its inputs and ignores the stream it receives.  ``per_epoch=True``
waits for each epoch to complete at every output before the next is sent (the
lockstep a streaming test wants); ``timestamp=`` builds the dataflow over
another timestamp type (``Product`` times, a user's type); ``audit=True`` runs
with the progress audit (:mod:`runtime.audit`).
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.errors import ConfigurationError, InterleavingFailure
from runtime.execute import execute
from runtime.worker import Worker
from scopes.arrow_values import describe, find_wrapped_time
from scopes.arrow_values import records as arrow_records
from scopes.batches import copy_batch, is_arrow, is_batch, is_columnar, take
from scopes.builder import ScopeBuilder
from scopes.errors import ArrowValueError
from scopes.progress.order import Time
from scopes.progress.timestamp import INTEGER, TimestampType
from scopes.stream import Stream

DEFAULT_OUTPUT = "output"
"""The name under which a build function's single returned stream is collected."""

DEFAULT_CONFIGURATIONS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (4, 1), (1, 2))
"""``(workers, processes)`` pairs that :func:`assert_agree` compares: 1, 2 and 4 threads, and 2 processes."""

Epochs = Sequence[Sequence[Any]] | Mapping[Any, Sequence[Any]]
"""Records per epoch: a sequence whose ``i``-th item holds the records at time ``i``, or a mapping time -> records."""

Build = Callable[[ScopeBuilder, Any], Any]
"""``build(scope, streams)``: ``streams`` is one stream, or a dict of them for named inputs; returns the output(s)."""


@dataclass(frozen=True)
class DataflowRun:
    """What one run produced: records per output and time, and each output's final frontier.

    ``outputs[name][time]`` lists the records every worker emitted at ``time``,
    sorted when the records can be sorted.  ``frontiers[name]`` is the output's
    frontier when the run ended: empty after the inputs were closed, or the
    time after the last epoch when they were left open.
    """

    outputs: dict[str, dict[Any, list[Any]]]
    frontiers: dict[str, list[Any]]
    workers: int
    processes: int
    times: list[Any] = field(default_factory=list)

    def output(self, name: str = DEFAULT_OUTPUT) -> dict[Any, list[Any]]:
        """The records of output ``name`` by time; a clear error names the outputs there are."""
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(f"no output named {name!r}; this run collected {sorted(self.outputs)}") from None

    def records(self, name: str = DEFAULT_OUTPUT) -> list[Any]:
        """Every record of output ``name``, all times together, sorted when possible."""
        return _sorted([record for batch in self.output(name).values() for record in batch])

    def describe(self) -> str:
        """Which configuration produced this run, for messages: ``"2 workers x 1 process"``."""
        return f"{self.workers} worker(s) x {self.processes} process(es)"


def run_dataflow(
    build: Build,
    inputs: Epochs | Mapping[str, Epochs],
    *,
    workers: int = 1,
    processes: int = 1,
    close: bool = True,
    stall_timeout: float | None = 30.0,
    per_epoch: bool = False,
    timestamp: TimestampType = INTEGER,
    audit: bool | None = None,
) -> DataflowRun:
    """Run ``build`` over ``inputs`` on ``workers`` threads in each of ``processes`` processes.

    ``inputs`` is one input's records per epoch (``build`` then receives one
    stream), or a mapping from input names to records per epoch (``build``
    receives a dict of streams by name).  ``build`` returns the stream to
    collect, or a dict of streams by name.  With ``close=False`` the inputs
    are advanced past the last epoch but left open, as a streaming source
    would leave them, and the run ends once every epoch is complete (integer
    times only: the end is the time after the last epoch).

    With ``per_epoch=True`` each worker, after sending an epoch and advancing
    its inputs past it, steps until every output has passed that epoch's time
    before it sends the next one.  ``timestamp`` is the dataflow's timestamp
    type (the epochs' times must be its times); it must stay the integer type
    on several processes, which import the build function by name and receive
    only wire-encodable values.  ``audit`` is passed to :func:`runtime.execute`.
    """
    spec = _input_spec(inputs)
    options = {"close": close, "per_epoch": per_epoch}
    if processes != 1 and timestamp is not INTEGER:
        raise ConfigurationError(
            f"run_dataflow(processes={processes}) builds every dataflow over integer times; "
            f"timestamp={timestamp.name} runs on threads only (processes=1)"
        )
    if processes != 1:
        from runtime.communication.wire import EncodingError, encode_value
        from runtime.launcher import describe_main

        try:
            described = describe_main(build)
        except ConfigurationError as error:
            raise ConfigurationError(
                f"run_dataflow(processes={processes}) imports the build function by name in each process, so it "
                f"must be defined at the top level of a module; got {build!r}"
            ) from error
        try:
            encoded = encode_value(spec)
        except EncodingError as error:
            raise ConfigurationError(
                f"run_dataflow(processes={processes}) sends the inputs to each process in the wire encoding: {error}"
            ) from None
        # as bytes, decoded once the build's module is imported: an Arrow extension type it registers is then known
        main: Callable[[Worker], Any] = functools.partial(_run_loaded, described, encoded, options)
    else:
        main = functools.partial(_run_worker, build, spec, options, timestamp)
    results = execute(main, workers=workers, processes=processes, stall_timeout=stall_timeout, audit=audit)
    return _gather(results, spec, workers, processes)


def assert_outputs(
    run: DataflowRun,
    expected: Mapping[Any, Iterable[Any]],
    name: str = DEFAULT_OUTPUT,
) -> None:
    """Assert that output ``name`` holds exactly ``expected`` (time -> records), as multisets per time.

    Times absent from ``expected`` must have produced nothing.  The message
    lists, for each time that differs, the records missing and the records
    not expected.
    """
    actual = run.output(name)
    problems = _differences(actual, {time: list(records) for time, records in expected.items()})
    if problems:
        heading = f"output {name!r} on {run.describe()} differs from the expectation:"
        raise AssertionError("\n".join([heading, *problems]))


def assert_agree(
    build: Build,
    inputs: Epochs | Mapping[str, Epochs],
    configurations: Sequence[tuple[int, int]] = DEFAULT_CONFIGURATIONS,
    *,
    close: bool = True,
    per_epoch: bool = False,
) -> list[DataflowRun]:
    """Run ``build`` over ``inputs`` in every ``(workers, processes)`` configuration; assert they agree.

    Every output must hold the same records at the same times, and end at the
    same frontier, as in the first configuration.  Returns the runs, first one
    first.  Configurations with more than one process need ``build`` to be a
    top-level function (see :func:`run_dataflow`).  ``close`` and ``per_epoch``
    are passed to every run.
    """
    if not configurations:
        raise ConfigurationError("assert_agree needs at least one (workers, processes) configuration")
    runs = [
        run_dataflow(build, inputs, workers=w, processes=p, close=close, per_epoch=per_epoch) for w, p in configurations
    ]
    reference = runs[0]
    for run in runs[1:]:
        if sorted(run.outputs) != sorted(reference.outputs):
            raise AssertionError(
                f"{run.describe()} produced outputs {sorted(run.outputs)}, "
                f"{reference.describe()} produced {sorted(reference.outputs)}"
            )
        for name in reference.outputs:
            problems = _differences(run.outputs[name], reference.outputs[name])
            if problems:
                raise AssertionError(
                    f"output {name!r} on {run.describe()} differs from {reference.describe()} "
                    f"(missing = only on {reference.describe()}, unexpected = only on {run.describe()}):\n"
                    + "\n".join(problems)
                )
            if _sorted(run.frontiers[name]) != _sorted(reference.frontiers[name]):
                raise AssertionError(
                    f"output {name!r} ended at frontier {run.frontiers[name]} on {run.describe()} "
                    f"but at {reference.frontiers[name]} on {reference.describe()}"
                )
    return runs


# ---------------------------------------------------------------------- interleavings


def check_interleavings(
    build: Build,
    inputs: Epochs | Mapping[str, Epochs],
    *,
    workers: int = 2,
    seeds: Iterable[int] = range(50),
    close: bool = True,
    shrink: int = 200,
) -> DataflowRun:
    """Run ``build`` under many seeded message orders; raise if any order changes the answer.

    The reference is a plain run on one worker.  Each seed runs ``workers``
    simulated workers (:mod:`runtime.communication.simulation`) whose turns and
    message deliveries the seed decides, keeping only the FIFO order per channel
    and pair of workers that timely promises.  On the first seed whose output
    differs, hypothesis searches for a shorter schedule that still differs
    (``shrink`` examples; 0 skips it), and :class:`~runtime.errors.InterleavingFailure`
    reports the seed, the schedule and the difference.  The schedule replays
    exactly with :func:`replay_interleaving`.  Returns the reference run.
    """
    from runtime.communication.simulation import RecordedChoices

    reference = run_dataflow(build, inputs, close=close)
    for seed in seeds:
        recorded = RecordedChoices(random.Random(seed))
        problems = _interleaving_differences(build, inputs, workers, close, reference, recorded)
        if problems:
            schedule = _shrunk(build, inputs, workers, close, reference, shrink) or recorded.schedule
            raise InterleavingFailure(
                f"the dataflow's output under simulated seed {seed} on {workers} workers differs from 1 worker's "
                f"(missing = only without interleaving, unexpected = only under it):\n"
                + "\n".join(problems)
                + f"\nreplay it exactly with replay_interleaving(build, inputs, schedule, workers={workers}), where "
                + (f"schedule = {schedule!r}" if len(schedule) <= 100 else "schedule is this error's .schedule")
                + f" ({len(schedule)} choices)",
                seed,
                schedule,
                workers,
            )
    return reference


def replay_interleaving(
    build: Build,
    inputs: Epochs | Mapping[str, Epochs],
    schedule: Sequence[float | int],
    *,
    workers: int = 2,
    close: bool = True,
) -> DataflowRun:
    """Run ``build`` on ``workers`` simulated workers in exactly the order ``schedule`` (from a failure) fixes."""
    from runtime.communication.simulation import ReplayedChoices

    return _simulated_run(build, inputs, workers, close, ReplayedChoices(list(schedule)))


def _simulated_run(build: Build, inputs: Any, workers: int, close: bool, choices: Any) -> DataflowRun:
    from runtime.communication.simulation import simulate

    spec = _input_spec(inputs)
    main = functools.partial(_run_worker, build, spec, {"close": close, "per_epoch": False}, INTEGER)
    return _gather(simulate(main, workers, choices=choices), spec, workers, 1)


def _interleaving_differences(
    build: Build, inputs: Any, workers: int, close: bool, reference: DataflowRun, choices: Any
) -> list[str]:
    run = _simulated_run(build, inputs, workers, close, choices)
    problems = []
    for name in sorted(set(reference.outputs) | set(run.outputs)):
        for problem in _differences(run.outputs.get(name, {}), reference.outputs.get(name, {})):
            problems.append(f"output {name!r}: {problem.strip()}")
    return problems


def _shrunk(
    build: Build, inputs: Any, workers: int, close: bool, reference: DataflowRun, examples: int
) -> list[float | int] | None:
    """The shortest failing schedule hypothesis finds in ``examples`` tries, or None."""
    try:
        from hypothesis import HealthCheck, find, settings
        from hypothesis import strategies as st
        from hypothesis.errors import NoSuchExample
    except ImportError:  # hypothesis is a test dependency: without it, the seed's whole schedule is reported
        return None
    if examples <= 0:
        return None

    from runtime.communication.simulation import RecordedChoices

    best: list[list[float | int]] = []

    def differs(source: Any) -> bool:
        recorded = RecordedChoices(source)
        if not _interleaving_differences(build, inputs, workers, close, reference, recorded):
            return False
        if not best or len(recorded.schedule) < len(best[0]):
            best[:] = [recorded.schedule]
        return True

    options = settings(max_examples=examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    try:
        find(st.randoms(use_true_random=False), differs, settings=options)
    except NoSuchExample:
        return None
    if best and _interleaving_differences(build, inputs, workers, close, reference, _replayed(best[0])):
        return best[0]
    return None


def _replayed(schedule: list[float | int]) -> Any:
    from runtime.communication.simulation import ReplayedChoices

    return ReplayedChoices(schedule)


# ---------------------------------------------------------------------- inputs


def _input_spec(inputs: Any) -> dict[str, Any]:
    """Normalise ``inputs`` into a wire-encodable dict: ``{"single": bool, "epochs": {name: [[time, records]]}}``."""
    if isinstance(inputs, Mapping) and inputs and all(isinstance(key, str) for key in inputs):
        named = {name: _epochs(name, epochs) for name, epochs in inputs.items()}
        return {"single": False, "epochs": named}
    return {"single": True, "epochs": {"input": _epochs("input", inputs)}}


def _epochs(name: str, epochs: Any) -> list[list[Any]]:
    if isinstance(epochs, Mapping):
        pairs = list(epochs.items())
    elif isinstance(epochs, Sequence) and not isinstance(epochs, str | bytes):
        pairs = list(enumerate(epochs))
    else:
        raise ConfigurationError(
            f"input {name!r}: records per epoch must be a list of lists (time = position) or a dict time -> records, "
            f"got {type(epochs).__name__}"
        )
    result: list[list[Any]] = []
    previous: Any = None
    for time, records in pairs:
        if isinstance(records, str | bytes) or not (isinstance(records, Iterable) or is_arrow(records)):
            raise ConfigurationError(
                f"input {name!r} at time {time!r}: the records of an epoch must be a list, got {type(records).__name__}"
            )
        if previous is not None and not previous < time:
            raise ConfigurationError(
                f"input {name!r}: epochs must be given in increasing time order, but {time!r} follows {previous!r}"
            )
        previous = time
        # a NumPy array or an Arrow batch stays one: the dataflow's columnar operators receive it as such
        result.append([time, records if is_columnar(records) and is_batch(records) else list(records)])
    return result


def _share(records: Any, index: int, peers: int) -> Any:
    """Worker ``index``'s share of an epoch's records: rows ``index, index + peers, ...``, as a batch of their kind."""
    if records.__class__ is list:
        return records[index::peers]
    import numpy as np

    return take(records, np.arange(index, len(records), peers))


# ---------------------------------------------------------------------- one worker's run


class _Collector:
    """Appends what one output emits as ``(name, time, records)`` triples."""

    def __init__(self, name: str, into: list[list[Any]]) -> None:
        self.name = name
        self.into = into

    def __call__(self, time: Time, batch: Any) -> None:
        self.into.append([self.name, time, _kept(batch)])


_TEST_ADVICE = (
    "the outputs are compared as Python values: cast the column in the tested dataflow (to int64 or string) "
    "or compare the Arrow batches themselves (stream.capture() and CaptureRecorder.batches())"
)
"""What to do when an output holds an Arrow value that Python cannot hold."""


def _kept(batch: Any) -> Any:
    """What a worker keeps of an output batch until the run ends; :func:`_gather` turns it into records.

    A columnar batch is kept as it is (an array copied, as it may be reused),
    so that from a process it travels to the parent as its memory or as Arrow
    IPC whatever its values: its records (``datetime``, ``Decimal``, ...) may
    have no wire encoding.  An array of objects, which does not travel, and a
    list are kept as records.

    An Arrow batch holding a time of day that ``to_pylist()`` would wrap around
    midnight is invalid Arrow, which a process's parent refuses to decode: what
    is kept of it is where that time is (:data:`_WRAPPED`), and :func:`_as_records`
    raises the same :class:`~scopes.errors.ArrowValueError` for it in the parent
    as for the batch itself on threads.
    """
    if is_arrow(batch):
        found = find_wrapped_time(batch)
        if found is not None:
            return {_WRAPPED: [found.column, found.row, found.arrow_type, found.text, describe(found)]}
        return copy_batch(batch)
    if is_columnar(batch) and not batch.dtype.hasobject:  # type: ignore[attr-defined]
        return copy_batch(batch)
    return _as_records(batch)


_WRAPPED = "pytimely: a time of day Python would wrap"
"""The key of what :func:`_kept` keeps of an Arrow output batch holding a time of day of 24 hours or more: its
column, row, type, text and description (a dict: outputs are otherwise kept as lists, arrays or Arrow batches)."""


def _run_loaded(described: dict[str, Any], encoded: bytes, options: dict[str, bool], worker: Worker) -> dict[str, Any]:
    """The process entry point: import the build function by name, decode the inputs, then run as :func:`_run_worker`.

    The inputs are decoded after the import, so that Arrow columns of an
    extension type the build's module registers arrive as that type, as they
    do on threads (before, they arrived as their storage type).
    """
    from runtime.cluster_member import load_main
    from runtime.communication.wire import decode_value

    build: Any = load_main(described)
    spec: dict[str, Any] = decode_value(encoded)
    result = _run_worker(build, spec, options, INTEGER, worker)
    # to the parent in the wire encoding, which has no NumPy scalars: a record-wise operator over an array gives them
    result["collected"] = [
        [name, time, [_python(record) for record in records] if isinstance(records, list) else records]
        for name, time, records in result["collected"]
    ]
    return result


def _python(value: Any) -> Any:
    """``value`` with every NumPy scalar in it (in tuples, lists and dicts too) as the equal Python value."""
    if isinstance(value, tuple):
        items = tuple(map(_python, value))
        make = getattr(value, "_make", None)  # a named tuple stays one
        return make(items) if make is not None else items
    if isinstance(value, list):
        return [_python(item) for item in value]
    if isinstance(value, dict):
        return {_python(key): _python(item) for key, item in value.items()}
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():  # a scalar (a row, too)
        return _python(value.item())
    return value


def _run_worker(
    build: Build, spec: dict[str, Any], options: dict[str, bool], timestamp: TimestampType, worker: Worker
) -> dict[str, Any]:
    """Feed this worker's share of every epoch, run to the end, return what it collected and the frontiers.

    ``options``: ``close`` (close the inputs at the end, else advance them past
    the last epoch) and ``per_epoch`` (complete each epoch before the next).
    """
    collected: list[list[Any]] = []
    handles: dict[str, Any] = {}
    probes: dict[str, Any] = {}

    def dataflow(scope: ScopeBuilder) -> None:
        streams: dict[str, Stream] = {}
        for name in spec["epochs"]:
            handle, stream = scope.new_input(name)
            handles[name], streams[name] = handle, stream
        result = build(scope, streams["input"] if spec["single"] else streams)
        outputs = {DEFAULT_OUTPUT: result} if isinstance(result, Stream) else result
        if not isinstance(outputs, Mapping) or not all(isinstance(s, Stream) for s in outputs.values()):
            raise ConfigurationError(
                f"the build function must return a stream or a dict of streams by name, got {type(result).__name__}"
            )
        for name, stream in outputs.items():
            probes[name] = stream.inspect_batch(_Collector(name, collected), name=f"Collect {name}").probe(
                name=f"Probe {name}"
            )

    worker.dataflow(dataflow, timestamp=timestamp)
    index, peers = worker.index, worker.peers
    times = _sorted(list({time for pairs in spec["epochs"].values() for time, _ in pairs}))
    for position, time in enumerate(times):
        for name, pairs in spec["epochs"].items():
            handle = handles[name]
            handle.advance_to(time)
            for at, records in pairs:
                if at == time:
                    handle.send_batch(_share(records, index, peers))
        if options["per_epoch"] and position + 1 < len(times):  # the last epoch completes as the run ends
            for handle in handles.values():
                handle.advance_to(times[position + 1])
            worker.step_while(functools.partial(_behind, list(probes.values()), time))
    if options["close"]:
        for handle in handles.values():
            handle.close()
        worker.step_while(lambda: not all(probe.done() for probe in probes.values()))
    else:
        end = (times[-1] + 1) if times else 1
        for handle in handles.values():
            handle.advance_to(end)
        worker.step_while(lambda: any(probe.less_than(end) for probe in probes.values()))
    frontiers = {name: list(probe.frontier()) for name, probe in probes.items()}
    # a copy: once this returns, the worker closes the inputs left open and runs the dataflow to its end, and what
    # the outputs send then (a window closing at the end, say) is no part of the run
    return {"collected": list(collected), "frontiers": frontiers}


def _behind(probes: list[Any], time: Time) -> bool:
    """Whether some output has not passed ``time`` yet."""
    return any(probe.less_equal(time) for probe in probes)


def _gather(results: list[dict[str, Any]], spec: dict[str, Any], workers: int, processes: int) -> DataflowRun:
    outputs: dict[str, dict[Any, list[Any]]] = {}
    for result in results:
        for name in result["frontiers"]:
            outputs.setdefault(name, {})
        for name, time, records in result["collected"]:
            outputs.setdefault(name, {}).setdefault(time, []).extend(
                _as_records(records, f"run_dataflow: output {name!r} at time {time!r}")
            )
    for by_time in outputs.values():
        for time in [time for time, records in by_time.items() if not records]:
            del by_time[time]
        for time in by_time:
            by_time[time] = _sorted(by_time[time])
    times = _sorted(list({time for pairs in spec["epochs"].values() for time, _ in pairs}))
    return DataflowRun(outputs, dict(results[0]["frontiers"]) if results else {}, workers, processes, times)


# ---------------------------------------------------------------------- comparing


def _as_records(batch: Any, where: str = "run_dataflow") -> list[Any]:
    """``batch``'s records; an Arrow value Python cannot hold is an :class:`~scopes.errors.ArrowValueError`
    (``where`` names the output and time), as the test's comparison needs Python values."""
    if isinstance(batch, list):
        return list(batch)
    if batch.__class__ is dict and _WRAPPED in batch:  # an Arrow batch a worker kept as where it is refused
        column, row, arrow_type, text, described = batch[_WRAPPED]
        raise ArrowValueError(f"{where}: {described}; {_TEST_ADVICE}", column, row, arrow_type, text)
    if is_arrow(batch):
        return arrow_records(batch, where, _TEST_ADVICE)
    to_pylist = getattr(batch, "to_pylist", None)
    if to_pylist is not None:
        return list(to_pylist())
    tolist = getattr(batch, "tolist", None)
    if tolist is not None:
        return [_plain(record) for record in tolist()]
    return list(batch)


def _plain(record: Any) -> Any:
    """A record of ``ndarray.tolist()`` with its rows and sub-arrays (a field of shape ``(3,)``) as tuples."""
    if isinstance(record, list | tuple):
        return tuple(_plain(item) for item in record)
    tolist = getattr(record, "tolist", None)  # a sub-array field's value is an ndarray inside the row's tuple
    return _plain(tolist()) if tolist is not None else record


def _sorted(records: list[Any]) -> list[Any]:
    try:
        return sorted(records)
    except TypeError:
        return sorted(records, key=repr)


def _differences(actual: Mapping[Any, list[Any]], expected: Mapping[Any, list[Any]]) -> list[str]:
    problems: list[str] = []
    for time in _sorted(list(set(actual) | set(expected))):
        have = Counter(map(_Compared, actual.get(time, [])))
        want = Counter(map(_Compared, expected.get(time, [])))
        if have == want:
            continue
        missing = _sorted([compared.record for compared in (want - have).elements()])
        unexpected = _sorted([compared.record for compared in (have - want).elements()])
        parts = []
        if missing:
            parts.append(f"missing {_preview(missing)}")
        if unexpected:
            parts.append(f"unexpected {_preview(unexpected)}")
        problems.append(f"  at time {time!r}: " + "; ".join(parts))
    return problems


class _Compared:
    """A record as outputs are compared: by value and by the kind of each number, NaN equal to NaN.

    ``1``, ``1.0`` and ``True`` differ (an answer that is an integer on one
    worker and a float on two is not the same answer), while a NumPy scalar
    equals the Python number of its kind (``numpy.int64(1)`` is ``1``); every
    NaN equals every NaN, as pandas' comparisons take them; lists and tuples
    of equal items are equal, and so are dicts of equal items.
    """

    __slots__ = ("key", "record")

    def __init__(self, record: Any) -> None:
        """Compare ``record``."""
        self.record = record
        self.key = _comparable(record)

    def __eq__(self, other: object) -> bool:
        """Whether ``other`` is a record of the same values and number types."""
        return isinstance(other, _Compared) and self.key == other.key

    def __hash__(self) -> int:
        """The hash of the compared form."""
        return hash(self.key)


def _comparable(record: Any) -> Any:
    """``record`` as a hashable value that tells number types apart and takes every NaN as one value."""
    if isinstance(record, list | tuple):
        return ("sequence", tuple(_comparable(item) for item in record))
    if isinstance(record, dict):
        items = [(_comparable(key), _comparable(value)) for key, value in record.items()]
        return ("dict", tuple(sorted(items, key=repr)))
    if type(record).__module__ == "numpy" and getattr(record, "ndim", None) == 0:
        record = record.item()  # a NumPy scalar (an expectation pandas computed) as the Python number it equals
    for kind in (bool, int, float, complex):  # bool first: True is an int too
        if isinstance(record, kind):
            return (kind.__name__, "nan") if record != record else (kind.__name__, record)
    try:
        hash(record)
    except TypeError:
        return ("unhashable", type(record).__qualname__, repr(record))
    return record


def _preview(records: list[Any], limit: int = 10) -> str:
    shown = ", ".join(repr(record) for record in records[:limit])
    more = f", ... ({len(records) - limit} more)" if len(records) > limit else ""
    return f"[{shown}{more}] ({len(records)} record(s))"
