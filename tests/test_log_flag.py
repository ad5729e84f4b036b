"""``--log`` and ``PYTIMELY_LOG`` turn instrumentation on (and ``PYTIMELY_METRICS`` the endpoint) for programs started
through ``execute_from_args``, ``execute`` on threads, or ``execute`` on processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
import warnings
from pathlib import Path

import pytest
from helpers import eventually
from helpers.ports import free_port

from runtime import execute, execute_from_args
from runtime.instrument import MemorySink, add_sink, logging_active, read_events, remove_sink
from runtime.metrics import current_state, serve_metrics
from runtime.worker import Worker

ROOT = Path(__file__).resolve().parent.parent


def count_main(worker: Worker) -> int:
    """Count ten records through an exchange; return how many this worker saw."""
    seen: list[int] = []

    def build(scope):  # type: ignore[no-untyped-def]
        handle, stream = scope.new_input("numbers")
        stream.exchange(lambda x: x).inspect(seen.append)
        return handle

    handle = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch(range(10))
    handle.close()
    worker.step_while(lambda: bool(worker.dataflows))
    return len(seen)


def test_log_flag_writes_a_recording_of_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run.msgpack"
    assert sum(execute_from_args(count_main, ["-w", "2", "--log", str(path)])) == 10
    kinds = {type(event).__name__ for event in read_events(path)}
    assert any("Input" in kind for kind in kinds), kinds
    assert any("Frontier" in kind for kind in kinds), kinds


def test_the_environment_variable_reaches_every_process_of_a_local_cluster(tmp_path: Path) -> None:
    script = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from test_log_flag import count_main\n"
        "from runtime import execute_from_args\n"
        "print(sum(execute_from_args(count_main, ['-n', '2', '-w', '1'])))\n"
    )
    env = dict(os.environ, PYTIMELY_LOG=str(tmp_path / "cluster.msgpack"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10"
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["cluster.0.msgpack", "cluster.1.msgpack"], files
    for name in files:
        assert read_events(tmp_path / name), name


def test_the_environment_variable_records_worker_threads_of_plain_execute(tmp_path: Path, monkeypatch) -> None:
    """Found by a user-level audit: ``PYTIMELY_LOG`` was read by the processes of ``execute(..., processes=2)``
    and by ``execute_from_args``, but not by ``execute(main, workers=2)``, which recorded nothing, silently."""
    path = tmp_path / "threads.msgpack"
    monkeypatch.setenv("PYTIMELY_LOG", str(path))
    assert sum(execute(count_main, workers=2)) == 10
    kinds = {type(event).__name__ for event in read_events(path)}
    assert any("Input" in kind for kind in kinds), kinds
    assert not logging_active()  # execute turned it off again


def test_plain_execute_leaves_a_recording_already_on_as_it_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTIMELY_LOG", str(tmp_path / "ignored.msgpack"))
    sink = MemorySink()
    pipeline = add_sink(sink)
    try:
        assert sum(execute(count_main, workers=2)) == 10
        assert logging_active()
    finally:
        remove_sink(pipeline, sink)
    assert sink.raw
    assert not (tmp_path / "ignored.msgpack").exists()


def test_the_metrics_variable_serves_worker_threads_of_plain_execute(monkeypatch) -> None:
    """``PYTIMELY_METRICS`` likewise: plain ``execute`` on threads served nothing."""
    port = free_port()
    monkeypatch.setenv("PYTIMELY_METRICS", f"127.0.0.1:{port}")
    scraped: list[str] = []

    def scraping_main(worker: Worker) -> int:
        counted = count_main(worker)
        if worker.index == 0:  # the events reach the endpoint through the shipper's thread: scrape until they have

            def counted_in() -> str | None:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
                return text if "pytimely_operator_records_in_total{" in text else None

            scraped.append(eventually(counted_in, what="the run's records on the endpoint"))
        return counted

    assert sum(execute(scraping_main, workers=2)) == 10
    assert 'operator="numbers"' in scraped[0], scraped[0][:2000]
    assert current_state() is None  # the endpoint went away with the run


def test_the_log_flag_holds_for_its_own_run_only(tmp_path: Path, monkeypatch) -> None:
    """``execute_from_args(["--log", FILE])`` set ``PYTIMELY_LOG`` for the cluster's processes and left it set, so
    a later ``execute`` in the same program (which now reads the variable) recorded into that file again."""
    monkeypatch.delenv("PYTIMELY_LOG", raising=False)
    monkeypatch.setenv("PYTIMELY_METRICS", "off")
    path = tmp_path / "flagged.msgpack"
    assert sum(execute_from_args(count_main, ["-w", "2", "--log", str(path), "--metrics", "127.0.0.1:0"])) == 10
    assert "PYTIMELY_LOG" not in os.environ and os.environ["PYTIMELY_METRICS"] == "off"
    recorded = path.read_bytes()
    assert sum(execute(count_main, workers=2)) == 10
    assert path.read_bytes() == recorded and not logging_active()


def test_the_log_variable_records_beside_a_metrics_endpoint_the_program_serves(tmp_path: Path, monkeypatch) -> None:
    """A program serving metrics itself (``serve_metrics``) made ``logging_active()`` true, so ``PYTIMELY_LOG`` (and
    ``--log``) was taken for a recording already on and recorded nothing, silently (found by the debugging audit)."""
    from runtime.instrument import read_recording
    from runtime.metrics import serve_metrics

    path = tmp_path / "beside.msgpack"
    monkeypatch.setenv("PYTIMELY_LOG", str(path))
    server = serve_metrics("127.0.0.1:0")
    try:
        assert sum(execute(count_main, workers=2)) == 10
        recording = read_recording(path)
        assert recording.truncated is None  # closed with its end frame
        assert any(type(event).__name__ == "InputChanged" for event in recording.events)
        numbers = [v for labels, v in server.state.samples()["operator_records_out"] if labels["operator"] == "numbers"]
        assert sum(numbers) == 10  # and the endpoint counted the run
    finally:
        server.close()
    assert not logging_active()


def test_an_endpoint_served_by_the_program_warns_that_it_cannot_see_new_processes(monkeypatch) -> None:
    """Found by a user-level audit: ``serve_metrics`` then ``execute(main, processes=2)`` served nothing, silently:
    the workers run in new processes.  It now warns, saying how each process serves its own."""
    monkeypatch.delenv("PYTIMELY_METRICS", raising=False)
    server = serve_metrics("127.0.0.1:0")
    try:
        with pytest.warns(RuntimeWarning, match=r"processes=2\) runs its workers in new processes.*PYTIMELY_METRICS"):
            assert sum(execute(count_main, processes=2)) == 10
    finally:
        server.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no endpoint here: nothing to warn about
        assert sum(execute(count_main, processes=2)) == 10


def test_a_free_metrics_port_is_printed_so_that_it_can_be_scraped(capsys, monkeypatch) -> None:
    """``--metrics HOST:0`` picked a free port and said nowhere which, so nobody could scrape it."""
    monkeypatch.delenv("PYTIMELY_METRICS", raising=False)
    assert sum(execute_from_args(count_main, ["-w", "2", "--metrics", "127.0.0.1:0"])) == 10
    printed = capsys.readouterr().err
    match = re.search(r"pytimely: process 0 serves metrics at http://127\.0\.0\.1:(\d+)/metrics", printed)
    assert match is not None and int(match.group(1)) > 0, printed
