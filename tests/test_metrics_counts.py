"""Every record series of the metrics equals an independent count, per worker, for operators and nested scopes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from runtime import execute  # noqa: E402
from runtime.metrics import serve_metrics  # noqa: E402
from tests.helpers.metrics_mains import counted_loop  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCOPES = {"Loop", "Inner"}


def check_worker(counts: dict[tuple[str, str], int], samples: list[tuple[dict[str, str], float]]) -> None:
    """Each series of one worker against its own count (operators not counted sent and received nothing)."""
    seen = set()
    for labels, value in samples:
        direction = "in" if labels["series"] == "operator_records_in" else "out"
        key = (labels["operator"], direction)
        seen.add(key)
        assert value == counts.get(key, 0), f"worker {labels['worker']}: {key} is {value}, counted {counts.get(key, 0)}"
    assert set(counts) <= seen, f"no series for {set(counts) - seen}"
    assert {(scope, d) for scope in SCOPES for d in ("in", "out")} <= seen


def samples_after(main: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The series an endpoint serves right after ``execute(main, workers=2)`` has returned."""
    server = serve_metrics("127.0.0.1:0")
    try:
        execute(main, workers=2)
        return server.state.samples()
    finally:
        server.close()


def test_record_series_equal_each_workers_own_count_on_two_threads():
    server = serve_metrics("127.0.0.1:0")
    try:
        results = execute(counted_loop, workers=2)
    finally:
        server.close()
    assert results[0][0] != results[1][0]  # the workers' shares differ, so a total would not pass
    for counts, samples in results:
        check_worker(counts, samples)


@pytest.mark.parametrize("flags", [["-n", "2"], ["-n", "2", "-w", "2"]], ids=["2 processes", "2 processes x 2 threads"])
def test_record_series_equal_each_workers_own_count_on_two_processes(tmp_path, flags):
    program = tmp_path / "counted.py"
    program.write_text(
        textwrap.dedent(
            f"""
            import json, sys
            sys.path.insert(0, {str(ROOT)!r})
            from runtime import execute_from_args
            from tests.helpers.metrics_mains import counted_loop

            if __name__ == "__main__":
                results = execute_from_args(counted_loop)
                print(json.dumps([[sorted(c.items()), s] for c, s in results]))
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(program), *flags, "--metrics", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 2 * (2 if "-w" in flags else 1)
    for items, samples in results:
        counts = {(name, direction): value for (name, direction), value in items}
        check_worker(counts, [(labels, value) for labels, value in samples])


def test_a_scrape_right_after_execute_returns_counts_the_whole_run():
    """The docs' example: scrape once after ``execute`` returned, with no waiting; every record is counted."""
    from runtime.instrumentation.registry import install
    from runtime.instrumentation.shipper import EventShipper

    def main(worker):
        def build(scope):
            words, stream = scope.new_input("words")
            return words, stream.exchange(len).count(name="Counted").probe()

        words, probe = worker.dataflow(build)
        words.send_batch(["a", "bb", "a"])
        words.advance_to(1)
        worker.step_while(lambda: probe.less_than(1))

    slow = EventShipper([], interval=3600.0)  # a writer thread that would ship nothing during the test
    previous = install(slow)
    try:
        samples = samples_after(main)
    finally:
        install(previous)
        slow.close()
    counted = sorted(v for labels, v in samples["operator_records_in"] if labels["operator"] == "Counted")
    assert counted == [2, 4]  # "a" x 4 to one worker, "bb" x 2 to the other
    assert all(v == 0 for _, v in samples["capabilities"])
    probes = [v for labels, v in samples["frontier"] if labels["operator"] == "Probe"]
    assert probes == [float("inf"), float("inf")]


def test_a_scrape_after_the_recording_beside_it_closed_does_not_write_into_the_closed_file(tmp_path):
    """A scrape ships the events logged so far to every sink of the pipeline; once the pipeline closed its sinks
    (the program's --log file), an event a worker still logged reached the closed file: ValueError in the scrape."""
    from runtime.instrument import configure_from, read_recording, stop_logging

    pipeline = configure_from(str(tmp_path / "run.msgpack"))
    assert pipeline is not None
    server = serve_metrics("127.0.0.1:0")
    try:
        logger = pipeline.logger(0)
        logger.mark("before")
        stop_logging()
        logger.mark("after the file closed")
        server.state.samples()  # raised ValueError: write to closed file
    finally:
        server.close()
    assert read_recording(tmp_path / "run.msgpack").truncated is None


def test_events_a_viewer_sink_drops_are_counted_by_the_endpoint():
    """``pytimely_instrumentation_events_dropped_total`` was 0 whatever the sinks dropped: drops happen inside a
    sink (a viewer too slow, or never there), and only the viewer's own socket was told, so the endpoint never
    heard of them (found by the debugging audit: 70,000 events dropped by --log tcp://, the series said 0)."""
    from runtime.instrument import TcpSink, add_sink, remove_sink

    with socket.socket() as unused:  # a port nobody listens on: the sink keeps its buffer, then drops
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    viewer = TcpSink("127.0.0.1", port, max_events=10, retry=60.0)
    pipeline = add_sink(viewer)
    server = serve_metrics("127.0.0.1:0")
    try:
        logger = pipeline.logger(0)
        for number in range(50):
            logger.mark(f"event {number}")
        pipeline.flush()
        assert viewer.dropped == 50  # one batch of 50 events, over the bound of 10
        assert server.state.samples()["instrumentation_events_dropped"] == [({}, 50)]
        remove_sink(pipeline, viewer)  # a sink detached after the run still counts
        assert server.state.samples()["instrumentation_events_dropped"] == [({}, 50)]
    finally:
        server.close()
        if viewer in pipeline.sinks:
            remove_sink(pipeline, viewer)
        viewer.close()


def test_a_program_building_a_dataflow_per_epoch_keeps_a_bounded_endpoint():
    """Every series of every dataflow ever built was served for ever: a program with a Barrier per epoch (a
    dataflow each) grew the endpoint by 6 operator series per worker and barrier (300 barriers on 2 workers: 1,800
    per metric), without bound in memory and scrape size (found by the debugging audit)."""
    import runtime

    def main(worker):
        for _ in range(150):
            with runtime.Barrier(worker) as barrier:
                barrier.wait()

        def build(scope):
            numbers, stream = scope.new_input("numbers")
            return numbers, stream.map(lambda n: n, name="Last").probe(name="LastProbe")

        numbers, probe = worker.dataflow(build)
        numbers.send(1)
        numbers.close()
        worker.step_while(lambda: not probe.done())

    samples = samples_after(main)
    per_dataflow = {labels["address"].split(".")[0] for labels, _ in samples["operator_records_in"]}
    assert len(per_dataflow) <= 70, sorted(per_dataflow)  # of the 151 built: the newest (runtime.metrics.MAX_COMPLETED)
    assert len(samples["frontier"]) <= 140
    last = [v for labels, v in samples["frontier"] if labels["operator"] == "LastProbe"]
    assert last == [float("inf"), float("inf")]  # the newest completed dataflows are still served, done
    assert sum(v for labels, v in samples["operator_records_in"] if labels["operator"] == "Last") == 2
