"""Prometheus metrics: served per process, scraped by a real Prometheus server, with alerting rules."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import eventually
from helpers.ports import free_port, free_ports
from prometheus_client.parser import text_string_to_metric_families

from runtime import execute
from runtime.errors import ConfigurationError, MetricsUnavailable
from runtime.metrics import parse_address, report_stall, serve_metrics
from scopes.capture import CaptureRecorder, Progress
from scopes.contracts import Pipeline

ROOT = Path(__file__).resolve().parent.parent


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def stall_served(url: str, seen: dict, key: str, then: Callable[[], object]) -> Callable[[], bool]:
    """A condition for ``main``'s ``step_while``: scrape ``url`` every 50 ms until a stall (stalled or waiting) is
    served, keep those samples as ``seen[key]``, call ``then()`` (which lets the dataflow go on), and end."""

    def serving() -> bool:
        if key not in seen and time.monotonic() >= seen.get("next", 0.0):
            seen["next"] = time.monotonic() + 0.05
            samples = scrape(url)
            if samples.get("pytimely_stall_info"):
                seen[key] = samples
                then()
        return key not in seen

    return serving


def value(samples, name, **labels) -> float:
    matches = [v for found, v in samples.get(name, []) if all(found.get(k) == str(w) for k, w in labels.items())]
    assert len(matches) == 1, f"{name} {labels}: {matches} in {samples.get(name)}"
    return matches[0]


def test_records_batches_and_final_frontiers_per_operator_with_scope_paths():
    server = serve_metrics("127.0.0.1:0")
    try:

        def main(worker):
            def build(scope):
                handle, numbers = scope.new_input("numbers")

                def body(inner):
                    return numbers.enter(inner).map(lambda x: x + 1, name="Inc").leave()

                result = scope.iterative(body, name="Loop")
                return handle, result.probe()

            handle, probe = worker.dataflow(build, name="flow")
            for epoch in range(3):
                handle.send_batch(list(range(10)))
                handle.advance_to(epoch + 1)
                worker.step_while(lambda: probe.less_than(handle.time))

        execute(main, workers=2)

        def settled() -> dict | None:
            # the writer thread delivers records before the last frontier changes: wait for both
            found = scrape(server.url)
            records = sum(
                v for labels, v in found.get("pytimely_operator_records_in_total", []) if labels["operator"] == "Inc"
            )
            lags = found.get("pytimely_frontier_seconds_since_advance", [])
            held = found.get("pytimely_capabilities", [])
            done = records == 60 and bool(lags) and all(v == 0 for _, v in lags) and all(v == 0 for _, v in held)
            return found if done else None

        samples = eventually(settled, what="every event of the run to reach the endpoint from the writer thread")
    finally:
        server.close()
    labels = next(found for found, _ in samples["pytimely_operator_records_in_total"] if found["operator"] == "Inc")
    assert labels["scope"] == "flow/Loop"
    assert value(samples, "pytimely_operator_records_out_total", operator="numbers", worker=0) == 30
    assert value(samples, "pytimely_operator_batches_out_total", operator="numbers", worker=0) == 3
    # after the run every frontier is done: +Inf, and nothing lags
    frontiers = [v for found, v in samples["pytimely_frontier"] if found["operator"] == "Probe"]
    assert frontiers == [float("inf"), float("inf")]
    assert all(v == 0 for _, v in samples["pytimely_frontier_seconds_since_advance"])
    assert all(v == 0 for _, v in samples["pytimely_capabilities"])
    assert value(samples, "pytimely_instrumentation_events_dropped_total") == 0


def test_a_frontier_held_back_by_an_open_input_shows_its_time_and_growing_lag():
    server = serve_metrics("127.0.0.1:0")
    seen = {}
    try:

        def main(worker):
            def build(scope):
                handle, stream = scope.new_input("events")
                return handle, stream.map(lambda x: x, name="Work").probe()

            handle, probe = worker.dataflow(build, name="stream")
            handle.send(1)
            handle.advance_to(5)
            worker.step_while(lambda: probe.less_than(5))

            def lagging() -> dict | None:  # the input stays open at 5: the frontier stays at 5 and its lag grows
                worker.step()
                samples = scrape(server.url)
                lags = [v for found, v in samples.get("pytimely_frontier_seconds_since_advance", [])]
                return samples if lags and min(lags) >= 1.0 else None

            seen["samples"] = eventually(lagging, timeout=30, what="the frontier's lag to pass a second")

        execute(main)
    finally:
        server.close()
    samples = seen["samples"]
    assert value(samples, "pytimely_frontier", operator="Probe", kind="input") == 5
    assert value(samples, "pytimely_frontier_seconds_since_advance", operator="Probe") >= 1.0
    assert value(samples, "pytimely_capabilities", worker=0, dataflow=0) >= 1


def test_a_reported_stall_is_served_with_its_cause():
    server = serve_metrics("127.0.0.1:0")
    try:
        report_stall(3, "input 'edges' was never closed on worker 3\nmore detail")
        samples = scrape(server.url)
        assert value(samples, "pytimely_stalled", worker=3) == 1
        assert value(samples, "pytimely_stall_info", worker=3) == 1
        labels = next(found for found, _ in samples["pytimely_stall_info"])
        assert labels["cause"] == "input 'edges' was never closed on worker 3"
        report_stall(3, None)
        assert value(scrape(server.url), "pytimely_stalled", worker=3) == 0
    finally:
        server.close()


@pytest.mark.parametrize(
    "spec",
    [
        "nohost",
        "127.0.0.1:",
        ":9000",
        "127.0.0.1:99999",
        "127.0.0.1:http",
        "127.0.0.1:94\u00b2",
        pytest.param("h:" + "9" * 5000, id="5000-digits"),
    ],
)
def test_a_malformed_address_is_refused(spec):
    with pytest.raises(ConfigurationError, match="expected HOST:PORT"):  # not a bare ValueError from int()
        parse_address(spec)


def test_a_port_that_later_processes_would_push_past_65535_is_refused():
    assert parse_address("127.0.0.1:65534", 1) == ("127.0.0.1", 65535)
    assert parse_address("127.0.0.1:0", 3) == ("127.0.0.1", 0)
    with pytest.raises(ConfigurationError, match="process 2 would listen on port 65535 \\+ 2"):
        parse_address("127.0.0.1:65535", 2)  # was an OverflowError from bind() in process 2


def test_a_port_in_use_is_refused_with_the_address():
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve_metrics(f"127.0.0.1:{port}")


def _index_of(worker):
    """A ``main`` for the launcher's children: the worker's index."""
    return worker.index


def test_a_childs_metrics_port_in_use_reaches_the_launcher_as_metrics_unavailable(monkeypatch):
    """A child of the launcher that cannot serve its metrics port reports a MetricsUnavailable, raised as such
    here (it was a ClusterError wrapping the text of a ConfigurationError)."""
    base = free_ports(2, consecutive=True)[0]
    monkeypatch.setenv("PYTIMELY_METRICS", f"127.0.0.1:{base}")
    refused = f"process 1 cannot listen on 127.0.0.1:{base + 1}"
    with socket.create_server(("127.0.0.1", base + 1)), pytest.raises(MetricsUnavailable, match=refused) as caught:
        execute(_index_of, processes=2)  # process 1's port is taken
    assert "raised in process 1" in "".join(caught.value.__notes__)


def test_each_process_of_a_cluster_serves_at_port_plus_its_index(tmp_path):
    base = free_ports(2, consecutive=True)[0]
    program = tmp_path / "two.py"
    program.write_text(
        textwrap.dedent(
            f"""
            import json, sys, time, urllib.request
            sys.path.insert(0, {str(ROOT)!r})
            from runtime import execute_from_args

            def main(worker):
                def build(scope):
                    handle, stream = scope.new_input("numbers")
                    return handle, stream.exchange(lambda x: x).probe()
                handle, probe = worker.dataflow(build)
                handle.send_batch(list(range(100)))
                handle.advance_to(1)
                worker.step_while(lambda: probe.less_than(1))
                texts = []
                if worker.index == 0:
                    for index, port in enumerate(({base}, {base + 1})):
                        url = f"http://127.0.0.1:{{port}}/metrics"
                        deadline = time.monotonic() + 30  # until the process's events reach its endpoint
                        while True:
                            text = urllib.request.urlopen(url, timeout=10).read().decode()
                            if f'worker="{{index}}"' in text or time.monotonic() > deadline:
                                break
                            time.sleep(0.01)
                        texts.append(text)
                return texts

            if __name__ == "__main__":
                texts = execute_from_args(main)[0]
                print(json.dumps(texts))
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(program), "-n", "2", "--metrics", f"127.0.0.1:{base}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert 'worker="0"' in first and 'worker="1"' not in first
    assert 'worker="1"' in second and 'worker="0"' not in second


def test_the_alerting_rules_are_valid():
    promtool = shutil.which("promtool")
    assert promtool, "promtool comes with Debian's prometheus package; `make test` installs it"
    checked = subprocess.run(
        [promtool, "check", "rules", str(ROOT / "docs" / "prometheus-rules.yml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout


def test_a_real_prometheus_scrapes_a_running_dataflow_and_answers_a_frontier_lag_query(tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package provides the server; `make test` installs it"
    server = serve_metrics("127.0.0.1:0")
    web = free_port()
    (tmp_path / "prometheus.yml").write_text(
        textwrap.dedent(
            f"""
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files: [{str(ROOT / "docs" / "prometheus-rules.yml")!r}]
            scrape_configs:
              - job_name: pytimely
                static_configs:
                  - targets: ["127.0.0.1:{server.port}"]
            """
        )
    )
    prometheus = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    api = f"http://127.0.0.1:{web}/api/v1"
    stop = threading.Event()

    def query(expression: str) -> list[dict]:
        url = f"{api}/query?query={urllib.parse.quote(expression)}"
        answer = json.loads(urllib.request.urlopen(url, timeout=5).read())
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def main(worker):
        def build(scope):
            handle, stream = scope.new_input("events")
            return handle, stream.map(lambda x: x * 2, name="Double").probe()

        handle, probe = worker.dataflow(build, name="live")
        epoch = 0
        while not stop.is_set():  # a streaming job: an epoch every 50 ms until the test has its answer
            handle.send_batch(list(range(10)))
            epoch += 1
            handle.advance_to(epoch)
            worker.step_while(lambda: probe.less_than(handle.time))
            time.sleep(0.05)

    job = threading.Thread(target=execute, args=(main,), kwargs={"workers": 2}, daemon=True)
    job.start()
    try:
        deadline = time.monotonic() + 60
        lag: list[dict] = []
        rate: list[dict] = []
        while time.monotonic() < deadline and not (lag and rate):
            time.sleep(0.5)
            try:
                lag = query('pytimely_frontier_seconds_since_advance{operator="Probe"}')
                rate = query('sum(rate(pytimely_operator_records_in_total{operator="Double"}[5s]))')
            except OSError:
                continue  # Prometheus is still starting
            rate = [r for r in rate if float(r["value"][1]) > 0]
        assert lag, "Prometheus never stored a frontier-lag series: " + prometheus.stderr.read1(4096).decode()
        assert {r["metric"]["worker"] for r in lag} == {"0", "1"}
        assert all(r["metric"]["scope"] == "live" and r["metric"]["job"] == "pytimely" for r in lag)
        assert all(float(r["value"][1]) < 5 for r in lag)  # the frontier keeps advancing
        assert rate, "the records rate never showed up"
        rules = json.loads(urllib.request.urlopen(f"{api}/rules", timeout=5).read())
        names = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
        assert names == {"PytimelyFrontierStuck", "PytimelyStalled", "PytimelyInstrumentationDropping"}
    finally:
        stop.set()
        job.join(timeout=30)
        prometheus.terminate()
        try:
            prometheus.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait()
        server.close()


def test_a_stream_waiting_for_outside_data_is_shown_waiting_not_stalled_and_cleared_when_it_moves_on():
    server = serve_metrics("127.0.0.1:0")
    seen = {}
    try:

        def main(worker):
            worker.stall_warning = 0.3

            def build(scope):
                handle, stream = scope.new_input("outside")
                return handle, stream.probe()

            handle, probe = worker.dataflow(build, name="waiting")

            def waiting() -> dict | None:  # a streaming program waiting for outside data: main is free to feed
                worker.step()
                samples = scrape(server.url)
                return samples if [v for _, v in samples.get("pytimely_waiting", [])] == [1] else None

            seen["waiting"] = eventually(waiting, timeout=30, what="the wait to be reported")
            handle.send(1)
            handle.advance_to(1)
            worker.step_while(lambda: probe.less_than(1))
            seen["moving"] = scrape(server.url)

        execute(main)
    finally:
        server.close()
    assert value(seen["waiting"], "pytimely_stalled", worker=0) == 0  # no stall: the rule does not fire
    cause = next(labels["cause"] for labels, _ in seen["waiting"]["pytimely_stall_info"])
    expected = (
        r"input 'outside' is still open at time 0 \(created at test_metrics\.py:\d+\): "
        r"advance it with advance_to\(\) or close\(\) it"
    )
    assert re.fullmatch(expected, cause), cause
    assert value(seen["moving"], "pytimely_waiting", worker=0) == 0
    assert value(seen["moving"], "pytimely_stalled", worker=0) == 0
    assert "pytimely_stall_info" not in seen["moving"]


def test_a_main_waiting_in_step_while_on_a_held_capability_is_shown_stalled_with_its_cause():
    server = serve_metrics("127.0.0.1:0")
    seen = {}
    try:

        def main(worker):
            worker.stall_warning = 0.3
            held = []

            def build(scope):
                handle, stream = scope.new_input("numbers")

                def hold(capability, info):  # keeps its capability for time 0 until told to let go
                    held.append(capability)

                    def logic(input, output):
                        for _ref, _batch in input:
                            pass

                    return logic

                return handle, stream.unary_frontier(Pipeline, "Holder", hold).probe()

            handle, probe = worker.dataflow(build, name="held")
            handle.close()

            def stalled() -> bool:  # main waits in step_while on the dataflow, which only the holder holds
                if time.monotonic() < seen.get("next", 0.0):
                    return True
                seen["next"] = time.monotonic() + 0.05
                samples = scrape(server.url)
                if [v for _, v in samples.get("pytimely_stalled", [])] == [1]:
                    seen["stalled"] = samples
                    held.pop().drop()
                return bool(held)

            worker.step_while(lambda: stalled() or not probe.done())
            seen["done"] = scrape(server.url)

        execute(main)
    finally:
        server.close()
    assert value(seen["stalled"], "pytimely_waiting", worker=0) == 0
    cause = next(labels["cause"] for labels, _ in seen["stalled"]["pytimely_stall_info"])
    assert "'Holder'" in cause and "holds 1 capability" in cause, cause
    assert value(seen["done"], "pytimely_stalled", worker=0) == 0


def test_a_source_waiting_for_its_waker_while_main_waits_in_step_while_is_shown_waiting_not_stalled():
    """A source woken from outside (``info.waker()``: a client callback, a socket watcher) waits for outside data
    even while ``main`` waits in ``step_while``: before, its worker was shown stalled (and the PytimelyStalled
    rule fired) as soon as it parked, which it does since sources and replays stopped spinning."""
    server = serve_metrics("127.0.0.1:0")
    seen = {}
    items: list[str] = []
    try:

        def main(worker):
            worker.stall_warning = 0.3
            wake = []

            def build(scope):
                def constructor(capability, info):
                    held = [capability]
                    wake.append(info.waker())

                    def logic(output):
                        while items:
                            item = items.pop()
                            if item == "end":
                                held.pop().drop()
                                return
                            output.session(held[0]).give(item)

                    return logic

                return scope.source("Outside", constructor).probe()

            probe = worker.dataflow(build, name="woken")

            def end() -> None:  # from outside, as a client callback would
                items.append("end")
                threading.Thread(target=wake[0]).start()

            waiting = stall_served(server.url, seen, "waiting", end)  # main waits in step_while meanwhile
            worker.step_while(lambda: waiting() or not probe.done())
            seen["done"] = scrape(server.url)

        execute(main)
    finally:
        server.close()
    assert value(seen["waiting"], "pytimely_waiting", worker=0) == 1
    assert value(seen["waiting"], "pytimely_stalled", worker=0) == 0  # the rule does not fire
    assert value(seen["done"], "pytimely_stalled", worker=0) == 0


def test_a_replay_that_waits_for_nothing_outside_leaves_a_held_stall_shown_stalled():
    """Only an operator that does wait to be woken from outside makes its worker count as waiting: a replay of a
    recording already whole (nothing to wait for) whose output a held capability blocks is a stall, shown as one."""
    server = serve_metrics("127.0.0.1:0")
    seen = {}
    recording = CaptureRecorder()
    recording.push(Progress([(0, -1)]))  # the captured stream's capability at time 0, released: a whole recording
    recording.finish()
    try:

        def main(worker):
            worker.stall_warning = 0.3
            held = []

            def hold(capability, info):  # keeps its capability for time 0 until told to let go
                held.append(capability)
                return lambda input, output: None

            probe = worker.dataflow(
                lambda scope: scope.replay([recording]).unary_frontier(Pipeline, "Holder", hold).probe(), name="held"
            )

            stalled = stall_served(server.url, seen, "stall", lambda: held.pop().drop())
            worker.step_while(lambda: stalled() or not probe.done())

        execute(main)
    finally:
        server.close()
    assert value(seen["stall"], "pytimely_stalled", worker=0) == 1
    assert value(seen["stall"], "pytimely_waiting", worker=0) == 0


def test_a_replay_waiting_on_a_socket_while_main_waits_in_step_while_is_shown_waiting():
    """A replay whose socket has nothing yet waits for outside data, though ``main`` waits in ``step_while``."""
    from test_replay_idle import events_of

    from runtime.eventlog import EventReader, encode_event, event_log_bytes
    from scopes import INTEGER

    server = serve_metrics("127.0.0.1:0")
    seen = {}
    sender, receiver = socket.socketpair()
    reader = EventReader(receiver, INTEGER)
    try:

        def main(worker):
            worker.stall_warning = 0.3
            probe = worker.dataflow(lambda scope: scope.replay([reader]).probe(), name="replayed")

            def send() -> None:
                sender.sendall(event_log_bytes([encode_event(event) for event in events_of(0)]))
                sender.close()

            waiting = stall_served(server.url, seen, "waiting", send)
            worker.step_while(lambda: waiting() or not probe.done())
            seen["done"] = scrape(server.url)

        execute(main)
    finally:
        server.close()
        sender.close()
        receiver.close()
    assert value(seen["waiting"], "pytimely_waiting", worker=0) == 1
    assert value(seen["waiting"], "pytimely_stalled", worker=0) == 0
    assert value(seen["done"], "pytimely_waiting", worker=0) == 0
