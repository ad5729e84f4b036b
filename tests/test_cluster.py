"""Clusters of real processes: results, failures, lost peers, stalls, tokens, Ctrl-C, orphans."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import eventually
from helpers.cluster_scripts import exchange_loop
from helpers.example_loader import load_example
from helpers.ports import free_ports, refusing_port
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime import ConfigurationError, Worker, WorkerFailed, execute
from runtime.cluster import ClusterConfig, endpoints_for, parse_cluster_args, plan_from_args
from runtime.communication.tcp import ConnectTimeout, Endpoint, HandshakeError, Mesh, PeerLost
from runtime.communication.wire import FrameReader, frame
from runtime.errors import ClusterError, DataflowStuck

pytestmark = pytest.mark.usefixtures("transport")  # every test over shared memory and over TCP

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- every example, 2 x 2 against 1 x 1


def test_examples_on_two_processes_of_two_workers_match_one_worker() -> None:
    hello = load_example("hello")
    assert hello.run(30, 4, workers=2, processes=2) == hello.run(30, 4) == hello.reference(30, 4)
    detailed = hello.run_detailed(30, 4, workers=2, processes=2)
    assert {index for index, _ in detailed} == {0, 1, 2, 3}
    assert all(index == hash(number) % 4 for index, (_, number, _) in detailed)

    wordcount = load_example("wordcount")
    text = wordcount.random_text(epochs=4, lines=20, seed=3)
    for lockstep in (True, False):
        assert wordcount.run(text, 2, lockstep, processes=2) == wordcount.run(text, 1, lockstep)

    loopdemo = load_example("loopdemo")
    numbers = [1, 6, 27, 97, 300, 871]
    assert loopdemo.run(numbers, 3, workers=2, processes=2) == loopdemo.run(numbers, 3)

    pagerank = load_example("pagerank")
    edges = pagerank.random_graph(30, 80, 2)
    two = pagerank.run(30, edges, 10, 0.85, workers=2, processes=2)
    assert pagerank.max_difference(two, pagerank.run(30, edges, 10, 0.85)) <= 1e-12

    bfs = load_example("bfs")
    graph = bfs.random_graph(50, 120, 1)
    assert bfs.run(graph, 0, workers=2, processes=2) == bfs.run(graph, 0)

    components = load_example("connected_components")
    graph = components.random_graph(60, 50, 2)
    assert components.run(60, graph, workers=2, processes=2) == components.run(60, graph)

    hashjoin = load_example("hashjoin")
    left, right = hashjoin.random_inputs(epochs=3, per_epoch=15, keys=8, seed=1)
    assert hashjoin.run(left, right, 2, False, processes=2) == hashjoin.run(left, right, 1, False)

    distinct = load_example("distinct")
    data = distinct.random_records(epochs=3, per_epoch=60, values=20, seed=2)
    assert distinct.run(data, 2, True, processes=2) == distinct.run(data, 1, True)


def test_example_script_runs_as_a_local_cluster() -> None:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "wordcount.py"), "-n", "2", "-w", "2", "--lines", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "4 worker(s); matches reference: True" in completed.stdout


# ---------------------------------------------------------------------- worker functions for the children


def exchange_main(worker: Worker, records: list[Any]) -> list[Any]:
    """Send ``records`` from worker 0 through an exchange; return what this worker received."""
    received: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream.exchange(lambda record: 0).inspect_batch(lambda time, batch: received.extend(batch))
        return handle

    handle = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch(records)
    return received


def failing_main(worker: Worker) -> int:
    if worker.index == 3:
        raise ValueError("worker three gives up")
    return worker.index


def killed_main(worker: Worker) -> None:
    """Process 1 kills itself; process 0 keeps stepping."""
    if worker.index == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        worker.step_or_park(0.05)


def stuck_main(worker: Worker) -> None:
    """Every worker waits for an epoch that process 1's input never completes."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Never advanced")
        return handle, stream.exchange(lambda x: x).probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.advance_to(1)
    worker.step_while(lambda: probe.less_than(1))


def stuck_after_done_main(worker: Worker) -> None:
    """A first dataflow completes (its last progress messages are never pulled); then a second is stuck."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Finished")
        return handle, stream.exchange(lambda x: x).probe()

    handle, probe = worker.dataflow(build)
    handle.send_batch(list(range(100)))
    handle.close()
    worker.step_while(lambda: not probe.done())
    for _ in range(20):
        worker.step_or_park(0.01)
    stuck_main(worker)


def unencodable_result_main(worker: Worker) -> object:
    return object()


class Point:
    """A type without a codec."""

    def __init__(self, x: int) -> None:
        self.x = x


def point_main(worker: Worker) -> list[Any]:
    received: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Points")
        stream.exchange(lambda point: 1).inspect_batch(lambda time, batch: received.extend(batch))
        return handle

    handle = worker.dataflow(build)
    if worker.index == 0:
        handle.send(Point(1))
    return received


# ---------------------------------------------------------------------- results and failures


def test_results_come_back_in_worker_order_with_their_types() -> None:
    records = [(1, "a"), [2, (3, 4)], {"k": (5,)}, 2**80, None]
    results = execute(functools.partial(exchange_main, records=records), processes=2, workers=2)
    assert results == [records, [], [], []]
    assert type(results[0][0]) is tuple and type(results[0][1]) is list


def test_a_failing_worker_is_named_with_its_process_and_traceback() -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(failing_main, processes=2, workers=2)
    assert caught.value.worker == 3
    assert "worker 3 of 4" in str(caught.value) and "worker three gives up" in str(caught.value)
    assert "process 1" in str(caught.value)
    assert any("ValueError" in note for note in caught.value.__notes__)


def test_a_killed_process_is_named_and_the_others_stop_within_ten_seconds() -> None:
    start = time.monotonic()
    with pytest.raises(PeerLost) as caught:
        execute(killed_main, processes=2, workers=1, stall_timeout=None)
    assert time.monotonic() - start < 12.0
    assert caught.value.process == 1
    assert "process 1 (127.0.0.1:" in str(caught.value) and "SIGKILL" in str(caught.value)


def test_stuck_dataflows_are_explained_across_processes() -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(stuck_main, processes=2, workers=1, stall_timeout=1.5)
    cause = caught.value.__cause__
    assert isinstance(cause, DataflowStuck)
    assert "Never advanced" in str(cause) and "worker 1" in str(cause)


def test_a_stall_after_a_completed_dataflow_is_still_detected() -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(stuck_after_done_main, processes=2, workers=2, stall_timeout=1.5)
    assert isinstance(caught.value.__cause__, DataflowStuck)
    assert "Never advanced" in str(caught.value.__cause__)


def test_an_unencodable_record_gives_the_codec_message() -> None:
    with pytest.raises(WorkerFailed) as caught:
        execute(point_main, processes=2, workers=1)
    message = str(caught.value)
    assert "test_cluster.Point" in message and "register_codec" in message and "channel" in message


def test_an_unencodable_result_is_reported() -> None:
    with pytest.raises(Exception, match="builtins.object"):
        execute(unencodable_result_main, processes=2, workers=1)


def test_main_must_be_importable_and_its_arguments_encodable() -> None:
    with pytest.raises(ConfigurationError, match="top level of a module"):
        execute(lambda worker: None, processes=2)
    with pytest.raises(ConfigurationError, match="arguments of main"):
        execute(functools.partial(exchange_main, records=[Point(1)]), processes=2)
    with pytest.raises(ConfigurationError, match="processes"):
        execute(failing_main, processes=0)


# ---------------------------------------------------------------------- the handshake


def free_endpoints(count: int) -> list[Endpoint]:
    """Addresses for a mesh's processes: free now, and where no other test or connection takes them."""
    return [Endpoint("127.0.0.1", port) for port in free_ports(count)]


def connect_in_thread(mesh: Mesh, timeout: float) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mesh.connect(timeout)
        except BaseException as error:  # noqa: BLE001 - inspected by the test
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def ignore(*_: object) -> None:
    return None


def test_a_wrong_token_is_refused_logged_and_sees_no_data(caplog: pytest.LogCaptureFixture) -> None:
    endpoints = free_endpoints(2)
    received: list[Any] = []
    seen_by_rogue: list[Any] = []
    good = Mesh(0, endpoints, "right", ignore, ignore)
    rogue = Mesh(1, endpoints, "wrong", lambda peer, header, payload: seen_by_rogue.append(header), ignore)
    with caplog.at_level(logging.WARNING, logger="runtime.communication.tcp"):
        good_thread, good_errors = connect_in_thread(good, 3.0)
        with pytest.raises(HandshakeError, match="wrong token"):
            rogue.connect(3.0)
        real = Mesh(1, endpoints, "right", lambda peer, header, payload: received.append(header), ignore)
        real.connect(3.0)
        good_thread.join(5.0)
    assert not good_errors and good.refused == 1
    assert any("wrong token" in record.getMessage() for record in caplog.records)
    good.send(1, frame(["data"], b"payload"))
    deadline = time.monotonic() + 5
    while not received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert received == [["data"]] and seen_by_rogue == []
    good.close()
    real.close()
    rogue.close()


def test_the_acceptor_is_done_as_soon_as_its_last_peer_has_shaken_hands(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handshake's end wakes the accepting loop: the mesh does not wait for ``accept`` to time out (which cost
    every cluster 50 ms at start), shown with a loop that would otherwise sleep for a minute."""
    import runtime.communication.tcp as tcp

    monkeypatch.setattr(tcp, "ACCEPT_POLL", 60.0)
    endpoints = free_endpoints(3)
    meshes = [Mesh(index, endpoints, "token", ignore, ignore) for index in range(3)]
    acceptor, errors = connect_in_thread(meshes[0], 30.0)
    middle, middle_errors = connect_in_thread(meshes[1], 30.0)
    meshes[2].connect(30.0)
    for thread in (middle, acceptor):
        thread.join(15.0)
    try:
        assert not acceptor.is_alive() and not middle.is_alive(), "an acceptor waited for its accept poll"
        assert not errors and not middle_errors
        assert sorted(meshes[0]._sockets) == [1, 2] and sorted(meshes[1]._sockets) == [0, 2]
    finally:
        for mesh in meshes:
            mesh.close()


def test_a_mesh_forms_with_descriptors_above_the_select_limit() -> None:
    """A process with more than 1,023 files or sockets open (a server, a Spark executor) still forms its mesh: the
    accepting loop polls its listener, which ``select.select`` would refuse."""
    from helpers.descriptors import SELECT_LIMIT, descriptors_above_select_limit

    with descriptors_above_select_limit():
        endpoints = free_endpoints(2)
        meshes = [Mesh(index, endpoints, "token", ignore, ignore) for index in range(2)]
        try:
            acceptor, errors = connect_in_thread(meshes[0], 30.0)
            meshes[1].connect(30.0)
            acceptor.join(15.0)
            assert not acceptor.is_alive() and not errors, errors
            assert min(sock.fileno() for sock in meshes[0]._sockets.values()) >= SELECT_LIMIT
        finally:
            for mesh in meshes:
                mesh.close()


def test_data_sent_right_after_the_handshake_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The acceptor may send before the connector has read its welcome: those bytes reach the reader."""
    endpoints = free_endpoints(2)
    received: list[Any] = []
    check = Mesh._check_configuration

    def slow_check(self: Mesh, *args: Any) -> None:
        check(self, *args)
        if self.index == 1:
            time.sleep(0.5)  # the welcome and the first data frame are both waiting when we read

    monkeypatch.setattr(Mesh, "_check_configuration", slow_check)
    first = Mesh(0, endpoints, "token", ignore, ignore)
    second = Mesh(1, endpoints, "token", lambda peer, header, payload: received.append(header), ignore)
    thread, errors = connect_in_thread(second, 5.0)
    first.connect(5.0)
    first.send(1, frame(["early"]))
    thread.join(5.0)
    deadline = time.monotonic() + 5
    while not received and time.monotonic() < deadline:
        time.sleep(0.01)
    first.close()
    second.close()
    assert not errors and received == [["early"]]


def test_another_protocol_version_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    endpoints = free_endpoints(2)
    good = Mesh(0, endpoints, "right", ignore, ignore)
    with caplog.at_level(logging.WARNING, logger="runtime.communication.tcp"):
        thread, errors = connect_in_thread(good, 1.5)
        deadline = time.monotonic() + 5
        while True:
            try:
                sock = socket.create_connection((endpoints[0].host, endpoints[0].port))
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        with sock:
            sock.sendall(frame(["hello", "pytimely", 999, 1, 2, b"0" * 16, 0]))
            reader = FrameReader()
            answers: list[Any] = []
            while not answers:
                data = sock.recv(4096)
                assert data
                answers.extend(header for header, _ in reader.feed(data))
        thread.join(5.0)
    assert answers[0][0] == "refused" and "protocol version 999" in answers[0][1]
    assert any("protocol version 999" in record.getMessage() for record in caplog.records)
    assert isinstance(errors[0], ConnectTimeout)


def test_a_cluster_with_only_wrong_tokens_fails_with_a_deadline() -> None:
    endpoints = free_endpoints(2)
    good = Mesh(0, endpoints, "right", ignore, ignore)
    rogue = Mesh(1, endpoints, "wrong", ignore, ignore)
    thread, errors = connect_in_thread(good, 1.5)
    with pytest.raises(HandshakeError):
        rogue.connect(1.5)
    thread.join(5.0)
    assert len(errors) == 1 and isinstance(errors[0], ConnectTimeout)
    assert "process 1 (127.0.0.1:" in str(errors[0])


def test_connecting_to_nobody_ends_with_a_clear_error() -> None:
    with refusing_port() as nobody:  # held for the test: no other test's server can appear there
        lonely = Mesh(1, [Endpoint("127.0.0.1", nobody), *free_endpoints(1)], "token", ignore, ignore)
        start = time.monotonic()
        with pytest.raises(ConnectTimeout, match="could not connect to process 0"):
            lonely.connect(1.0)
    assert time.monotonic() - start < 3.0


def test_the_deadline_names_every_lower_peer_never_reached() -> None:
    """Process 2 tried process 1 only once process 0 had joined: at the deadline it named process 0 alone, though
    process 1 was missing too.  It now tries both at once, and names both with what trying each last gave."""
    with refusing_port() as zero, refusing_port() as one:
        endpoints = [Endpoint("127.0.0.1", zero), Endpoint("127.0.0.1", one), *free_endpoints(1)]
        last = Mesh(2, endpoints, "token", ignore, ignore)
        with pytest.raises(ConnectTimeout) as raised:
            last.connect(1.0)
    message = str(raised.value)
    for peer in (0, 1):
        assert f"process {peer} ({endpoints[peer]}) (last error: " in message, message
    assert message.startswith("process 2 could not connect to process 0"), message
    assert "before the deadline" in message and "check that they are running" in message, message


# ---------------------------------------------------------------------- processes started separately (hostfile)

SCRIPT = (
    textwrap.dedent(
        """
    import signal, sys, time
    sys.path.insert(0, {root!r})
    from runtime import execute_from_args

    # as a terminal's foreground job: started from a shell without job control (a CI script's `&`), SIGINT comes
    # ignored, Python then installs no KeyboardInterrupt for it, and Ctrl-C would be ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)

    """
    )
    + exchange_loop(
        10,
        """
        if {forever} is False and epoch == 20:
            return epoch
        if {forever} and epoch == 1:  # an epoch exchanged between the processes: every one is in the mesh
            sys.stdout.write(f"running {{worker.index}}\\n")  # one write: the processes may share a pipe
            sys.stdout.flush()
        time.sleep(0.01)
        """,
    )
    + textwrap.dedent(
        """
        if __name__ == "__main__":
            print("results", execute_from_args(main, stall_timeout=None), flush=True)
        """
    )
)


def start_script(tmp_path: Path, forever: bool, args: list[str], token: str, **kwargs: Any) -> subprocess.Popen[str]:
    script = tmp_path / "cluster_job.py"
    script.write_text(SCRIPT.format(root=str(ROOT), forever=forever))
    env = dict(os.environ, PYTIMELY_TOKEN=token, PYTHONHASHSEED="0")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=tmp_path,  # away from the repository: children must still find this runtime
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_two_processes_with_a_hostfile_gather_every_result(tmp_path: Path) -> None:
    endpoints = free_endpoints(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{e}\n" for e in endpoints))
    flags = ["-n", "2", "-w", "2", "-h", str(hostfile)]
    first = start_script(tmp_path, False, [*flags, "-p", "0"], "secret")
    second = start_script(tmp_path, False, [*flags, "-p", "1"], "secret")
    out0, err0 = first.communicate(timeout=60)
    out1, err1 = second.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, err0 + err1
    assert out0 == out1 == "results [20, 20, 20, 20]\n"


def test_a_killed_peer_stops_the_other_process_within_ten_seconds(tmp_path: Path) -> None:
    endpoints = free_endpoints(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{e}\n" for e in endpoints))
    flags = ["-n", "2", "-h", str(hostfile)]
    first = start_script(tmp_path, True, [*flags, "-p", "0"], "secret")
    second = start_script(tmp_path, True, [*flags, "-p", "1"], "secret")
    try:
        assert first.stdout is not None and second.stdout is not None
        assert first.stdout.readline() == "running 0\n" and second.stdout.readline() == "running 1\n"
        second.kill()
        killed = time.monotonic()
        _, err = first.communicate(timeout=15)
        assert time.monotonic() - killed < 10.0
        assert first.returncode != 0
        assert f"process 1 ({endpoints[1]})" in err
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
            process.communicate()


# ---------------------------------------------------------------------- Ctrl-C and orphans


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_children(parent: subprocess.Popen[str], count: int) -> list[int]:
    """The ``count`` children of ``parent``'s local cluster, once each has run an epoch with the others."""
    assert parent.stdout is not None
    running = sorted(parent.stdout.readline() for _ in range(count))  # every worker said it is in the mesh
    assert running == [f"running {index}\n" for index in range(count)], running

    def started() -> list[int]:
        found = children_of(parent.pid)
        return found if len(found) >= count else []

    children: list[int] = eventually(started, timeout=30)
    return children


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        remaining = [pid for pid in pids if alive(pid)]
        if not remaining:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def test_ctrl_c_stops_the_whole_local_cluster(tmp_path: Path) -> None:
    parent = start_script(tmp_path, True, ["-n", "2"], "unused", start_new_session=True)
    try:
        children = wait_for_children(parent, 2)
        os.killpg(parent.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        try:
            _, err = parent.communicate(timeout=30)  # it ends in well under a second
        except subprocess.TimeoutExpired:
            state = session_state(parent)
            raise AssertionError(f"no end 30 s after Ctrl-C; the session's processes:\n{state}") from None
        assert parent.returncode == 130, err
        assert "interrupted" in err
        assert wait_gone(children, 5.0) == []
    finally:
        stop_session(parent)


def test_children_die_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    parent = start_script(tmp_path, True, ["-n", "2"], "unused", start_new_session=True)
    try:
        children = wait_for_children(parent, 2)
        parent.kill()
        parent.communicate()
        remaining = wait_gone(children, 5.0)
        assert remaining == []
    finally:
        stop_session(parent)


def session_state(parent: subprocess.Popen[str]) -> str:
    """``ps`` of the processes in ``parent``'s session, with their state and where each waits in the kernel."""
    listing = subprocess.run(
        ["ps", "-o", "pid,ppid,stat,wchan:24,etime,args", "--sid", str(parent.pid)], capture_output=True, text=True
    )
    return listing.stdout or listing.stderr


def stop_session(parent: subprocess.Popen[str]) -> None:
    """Kill whatever is left of ``parent``'s session (it runs forever): a failed test leaves no cluster behind."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(parent.pid, signal.SIGKILL)
    if parent.poll() is None:
        parent.kill()
    parent.communicate()


# ---------------------------------------------------------------------- flags


def test_cluster_flags_are_parsed_like_timelys(tmp_path: Path) -> None:
    config, rest = parse_cluster_args(["-w", "3", "-n", "2", "-p", "1", "--seed", "4", "-h", "hosts"])
    assert (config.workers, config.processes, config.process, config.hostfile) == (3, 2, 1, "hosts")
    assert rest == ["--seed", "4"]
    assert [str(e) for e in endpoints_for(ClusterConfig(processes=2))] == ["127.0.0.1:2101", "127.0.0.1:2102"]
    hosts = tmp_path / "hosts"
    hosts.write_text("# cluster\nalpha:7000\n\nbeta:7001  # second\n")
    assert [str(e) for e in endpoints_for(ClusterConfig(processes=2, process=0, hostfile=str(hosts)))] == [
        "alpha:7000",
        "beta:7001",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-w", "0"], "workers"),
        (["-n", "2", "-p", "2"], "between 0 and 1"),
        (["-h", "hosts"], "needs -p"),
    ],
)
def test_bad_cluster_flags_are_explained(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_cluster_args(argv)


def test_a_short_hostfile_and_a_missing_token_are_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:7000\n")
    with pytest.raises(ConfigurationError, match="lists 1 process"):
        endpoints_for(ClusterConfig(processes=2, process=0, hostfile=str(hosts)))
    monkeypatch.delenv("PYTIMELY_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match="PYTIMELY_TOKEN"):
        plan_from_args(["-n", "2", "-p", "0"])  # execute_from_args says so and exits: see test_cluster_flags.py


@pytest.mark.parametrize(
    "content",
    [
        b"127.0.0.1\x00:7000\n127.0.0.1:7001\n",  # a NUL: a raw TypeError from the socket library at bind
        b"[]:7000\n[]:7001\n",  # no host: process 0 listened on every interface
        "127.0.0.1:70\u00b2\n127.0.0.1:7001\n".encode(),  # not ASCII digits
        b"127.0.0.1:7000\n" + b"#" * 10_000 + b"\n127.0.0.1:7001\n",  # a line too long to read whole
        b"127.0.0.1:7000\n\xff\xfe:7001\n",  # not UTF-8
    ],
    ids=["nul", "empty-host", "superscript-port", "long-line", "not-utf-8"],
)
def test_a_damaged_hostfile_is_refused_naming_the_file(tmp_path: Path, content: bytes) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_bytes(content)
    with pytest.raises(ConfigurationError, match=r"hosts, (at or after )?line \d"):
        endpoints_for(ClusterConfig(processes=2, process=0, hostfile=str(hosts)))


@settings(deadline=None, max_examples=300)
@example("\u0665")
@example("+5")
@example(" 5")
@example("65536")
@example("0")
@example("65535")
@example("00080")
@given(st.text(max_size=8) | st.integers(-10, 10**6).map(str) | st.from_regex(r"[0-9]{1,7}", fullmatch=True))
def test_a_port_is_ascii_digits_up_to_65535_and_no_text_reads_as_another(text: str) -> None:
    """The one reading of a port, for endpoints and --metrics (``tcp.port_number``): no text fails it, and only
    1 to 5 ASCII digits up to 65535 read as a port, as the number they write."""
    from runtime.communication.tcp import port_number

    port = port_number(text)
    if text.isascii() and text.isdigit() and len(text) <= 5 and int(text) <= 65535:
        assert port == int(text)
    else:
        assert port is None


def test_a_hostfile_takes_comments_blank_lines_and_ipv6(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# the cluster\n\n[::1]:7000  # process 0\n::1:7001\n")
    assert endpoints_for(ClusterConfig(processes=2, process=0, hostfile=str(hosts))) == [
        Endpoint("::1", 7000),
        Endpoint("::1", 7001),
    ]


def test_a_token_that_is_not_utf8_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token of bytes that are not UTF-8 (os.environ decodes them to surrogates) failed every handshake with
    UnicodeEncodeError, and the processes ended after the connect timeout blaming the hostfile."""
    monkeypatch.setenv("PYTIMELY_TOKEN", "\udcffnot-utf-8")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:1\n127.0.0.1:2\n")
    with pytest.raises(ConfigurationError, match="must be UTF-8 text"):
        plan_from_args(["-n", "2", "-p", "1", "-h", str(hosts)])


@pytest.mark.parametrize("where", ["a port in use", "an address of another machine"])
def test_a_process_that_cannot_listen_at_its_address_says_which_and_why(where: str) -> None:
    """Process 0's line of the hostfile names a port another program listens on, or an address this machine does not
    have: a ClusterError names the process, the address and the reason, not an OSError from inside the socket
    library."""
    busy = socket.create_server(("127.0.0.1", 0))
    try:
        own = Endpoint("127.0.0.1", busy.getsockname()[1]) if where == "a port in use" else Endpoint("192.0.2.1", 2101)
        mesh = Mesh(0, [own, *free_endpoints(1)], "token", ignore, ignore)
        with pytest.raises(ClusterError, match=rf"process 0 cannot listen at {own.host}:{own.port}.*(port|machine)"):
            mesh.connect(5.0)
    finally:
        busy.close()


def test_processes_at_ipv6_addresses_form_a_mesh() -> None:
    """The hostfile takes ``[::1]:PORT`` (above), and the processes there form their mesh: the listener was bound as
    IPv4, so process 0 failed with 'Address family for hostname not supported'."""
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    endpoints = [Endpoint("::1", port) for port in free_ports(2, "::1")]
    received: list[Any] = []
    first = Mesh(0, endpoints, "token", ignore, ignore)
    second = Mesh(1, endpoints, "token", lambda peer, header, payload: received.append(header), ignore)
    thread, errors = connect_in_thread(first, 10.0)
    try:
        second.connect(10.0)
        thread.join(10.0)
        assert not errors, errors
        first.send(1, frame(["over IPv6"]))
        eventually(lambda: received, 10, "the frame sent over IPv6")
        assert received == [["over IPv6"]]
    finally:
        first.close()
        second.close()


def test_a_second_process_with_the_same_index_is_told_that_index_has_joined() -> None:
    """Two processes started with -p 2 by mistake: the second was refused with 'unexpected process index 2', as if
    its hostfile or -n were wrong.  It is now told that process 2 has already joined, and from where."""
    endpoints = free_endpoints(3)
    first = Mesh(0, endpoints, "token", ignore, ignore)
    joined = Mesh(2, endpoints, "token", ignore, ignore)
    accepting, _ = connect_in_thread(first, 3.0)
    connecting, _ = connect_in_thread(joined, 3.0)  # joins process 0, then waits for process 1 (never started)
    try:
        eventually(lambda: 2 in first._sockets, 10, "process 2 joining process 0")
        with pytest.raises(HandshakeError, match=r"process 2 has already joined process 0 \(from 127\.0\.0\.1:\d+\)"):
            Mesh(2, endpoints, "token", ignore, ignore).connect(5.0)
    finally:
        accepting.join(10.0)
        connecting.join(10.0)
        first.close()
        joined.close()


def test_a_joined_peer_whose_connection_closes_while_forming_is_reported_at_once() -> None:
    """Process 1 joined process 0 and waits for process 2; process 0 then ends (killed).  Nothing reads a connection
    before the mesh has formed, so process 1 said only, at the connect deadline, that process 2 had not reached it,
    naming a process that may be healthy and held up by the one that ended; then the deadline's error named process
    0's closed connection too.  Process 0 cannot join again, so process 1 now stops at once, naming it (a loss, long
    before its deadline), and process 2, still awaited.  tests/test_forming_losses.py does it with real processes."""
    endpoints = free_endpoints(3)
    first = Mesh(0, endpoints, "token", ignore, ignore)
    second = Mesh(1, endpoints, "token", ignore, ignore)
    accepting, _ = connect_in_thread(first, 4.0)  # process 0 waits for process 2 only briefly
    waiting, errors = connect_in_thread(second, 25.0)
    try:
        eventually(lambda: 1 in first._sockets and 0 in second._sockets, 10, "process 1 joining process 0")
        first.close()  # process 0 ends
        eventually(lambda: not waiting.is_alive(), 10, "process 1 stopping, before its deadline")
        assert len(errors) == 1 and isinstance(errors[0], PeerLost), errors
        message = str(errors[0])
        assert errors[0].process == 0 and errors[0].address == str(endpoints[0])
        assert f"process 1 lost process 0 ({endpoints[0]}): it joined and then closed its connection" in message
        assert f"still awaited: process 2 ({endpoints[2]})" in message, message
    finally:
        second.close()
        first.close()
        accepting.join(10.0)
