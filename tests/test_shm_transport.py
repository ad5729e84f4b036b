"""The same-host transport: shared-memory rings between the processes of a cluster on one host."""

from __future__ import annotations

import functools
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import eventually, flow_control_mains
from helpers.cluster_scripts import exchange_loop
from helpers.ports import free_port, free_ports

from runtime import Worker, execute
from runtime.cluster_member import run_process
from runtime.communication.process_fabric import ProcessFabric
from runtime.communication.shm_ring import MIN_CAPACITY, Ring, RingReader, RingWriter, ring_bytes
from runtime.communication.shm_transport import (
    OFFER,
    ShmTransport,
    ring_capacity_from,
    shared_memory_supported,
    transport_from,
)
from runtime.communication.tcp import Endpoint
from runtime.communication.wire import decode_value, frame, frame_head
from runtime.errors import ConfigurationError, PeerLost, WireError

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs Linux memfds and eventfds")

ROOT = Path(__file__).resolve().parent.parent


def make_ring(capacity: int = MIN_CAPACITY) -> tuple[Ring, Ring]:
    """The same ring mapped twice, as the writer and the reader process would."""
    fd = os.memfd_create("test-ring")
    try:
        os.ftruncate(fd, ring_bytes(capacity))
        return Ring(fd, capacity), Ring(fd, capacity)
    finally:
        os.close(fd)


class Bell:
    def __init__(self) -> None:
        self.rung = 0

    def __call__(self) -> None:
        self.rung += 1


def test_frames_cross_the_ring_in_order_across_its_end_and_larger_than_it() -> None:
    written, read = make_ring()
    writer_bell, reader_bell = Bell(), Bell()
    writer, reader = RingWriter(written, writer_bell), RingReader(read, reader_bell)
    payloads = [os.urandom(size) for size in (10, 40_000, 30_000, 3, 200_000, 70_000, 0, 65_530)]
    received: list[tuple[int, bytes]] = []
    for number, payload in enumerate(payloads):
        writer.send([frame_head([number], len(payload)), payload])
        for _ in range(20):  # a frame larger than the ring passes in pieces: the reader makes room
            received += [(header[0], bytes(body)) for header, body in reader.frames()]
            writer.retry()
    received += [(header[0], bytes(body)) for header, body in reader.frames()]
    assert received == list(enumerate(payloads))
    assert writer.pending_bytes == 0 and writer.written == reader.read
    assert reader_bell.rung > 0  # the reader rang the writer back when it made room for the large frames


def test_a_full_ring_keeps_the_rest_in_order_and_the_sleeping_reader_is_rung() -> None:
    written, read = make_ring()
    writer_bell = Bell()
    writer, reader = RingWriter(written, writer_bell), RingReader(read, Bell())
    assert reader.sleep(True) is False  # nothing there: the reader may sleep
    writer.send([frame([1], b"x" * 50_000), frame([2], b"y" * 50_000)])
    assert writer_bell.rung == 1 and writer.pending_bytes > 0  # the second frame did not fit whole
    writer.retry()
    assert writer_bell.rung == 1  # one ring per sleep: the reader reads everything when it wakes
    assert reader.sleep(True) is True  # data came: the reader does not sleep after all
    reader.sleep(False)
    first = list(reader.frames())
    assert [header for header, _ in first] == [[1]]
    assert writer.retry() is True
    assert [(header, bytes(body)) for header, body in reader.frames()] == [([2], b"y" * 50_000)]
    assert reader.sleep(True) is False  # a new sleep: the next frame rings again
    writer.send([frame([3], b"z")])
    assert writer_bell.rung == 2


def test_a_large_payload_is_copied_once_into_an_aligned_buffer_of_its_own() -> None:
    written, read = make_ring(1 << 20)
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    payload = os.urandom(100_000)
    writer.send([frame_head([7], len(payload)), payload])
    ((header, body),) = list(reader.frames())
    assert header == [7] and bytes(body) == payload
    assert isinstance(body, memoryview) and not body.readonly  # its own buffer, not the ring's memory


@pytest.mark.parametrize(
    "damage",
    [
        lambda counters: counters.__setitem__(0, counters[8] + (1 << 40)),  # a tail far beyond the ring
        lambda counters: counters.__setitem__(8, counters[0] + 1),  # a head beyond the tail
    ],
)
def test_hostile_counters_are_refused(damage: Any) -> None:
    written, read = make_ring()
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell())
    writer.send([frame([1], b"abc")])
    damage(written.counters)
    with pytest.raises(WireError, match="inconsistent"):
        list(reader.frames())


def test_a_hostile_frame_length_is_refused() -> None:
    written, read = make_ring()
    writer, reader = RingWriter(written, Bell()), RingReader(read, Bell(), max_frame=1 << 20)
    writer.send([struct.pack("!II", 1 << 30, 4) + b"abcd"])
    with pytest.raises(WireError, match="exceeds the limit"):
        list(reader.frames())


def test_the_transport_and_ring_settings_are_parsed_and_refused_when_wrong() -> None:
    assert transport_from(None) == transport_from("") == "shm"
    assert transport_from(" TCP ") == "tcp"
    with pytest.raises(ConfigurationError, match="PYTIMELY_TRANSPORT"):
        transport_from("udp")
    assert ring_capacity_from("64K") == 1 << 16 and ring_capacity_from(None) == 4 << 20
    for wrong in ("1K", "lots", "2G", "9" * 5000):  # 5000 digits: a bare ValueError from int()
        with pytest.raises(ConfigurationError, match="PYTIMELY_SHM_RING_BYTES"):
            ring_capacity_from(wrong)


# ---------------------------------------------------------------------- the transport between two processes


class FakeMesh:
    """Carries offers between transports in one process, as two TCP connections that proved the token would."""

    def __init__(self, index: int, transports: dict[int, ShmTransport]) -> None:
        self.index = index
        self.transports = transports

    def send(self, process: int, data: bytes) -> None:
        header = decode_value(memoryview(data)[8 : 8 + struct.unpack("!II", data[:8])[1]])
        assert header[0] == OFFER
        self.transports[process].offer(self.index, header)

    def describe(self, process: int) -> str:
        return f"process {process}"


def linked_pair() -> tuple[ShmTransport, ShmTransport, list[tuple[int, Any]]]:
    endpoints = [Endpoint("127.0.0.1", 1), Endpoint("127.0.0.1", 2)]
    transports: dict[int, ShmTransport] = {}
    received: list[tuple[int, Any]] = []
    for index in (0, 1):
        transports[index] = ShmTransport(
            index,
            endpoints,
            FakeMesh(index, transports),  # type: ignore[arg-type]
            lambda peer, header, payload: received.append((peer, (header, bytes(payload)))),
            lambda error: received.append((-1, error)),
        )
    threads = [threading.Thread(target=t.establish, args=(time.monotonic() + 10,)) for t in transports.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return transports[0], transports[1], received


def test_two_transports_link_through_memfds_and_deliver_frames() -> None:
    first, second, received = linked_pair()
    try:
        assert first.serves(1) and second.serves(0)
        first.send(1, [frame([0, "hello"], b"payload")])
        second.drain()
        assert received == [(0, ([0, "hello"], b"payload"))]
        maps = Path(f"/proc/{os.getpid()}/maps").read_text()
        assert "memfd:pytimely-ring-0-to-1" in maps and "memfd:pytimely-ring-1-to-0" in maps
    finally:
        first.close()
        second.close()


def test_a_connection_without_the_secret_gets_no_ring(caplog: pytest.LogCaptureFixture) -> None:
    """Someone who finds the abstract socket (it is listed in /proc/net/unix) but has no secret gets nothing."""
    endpoints = [Endpoint("127.0.0.1", 1), Endpoint("127.0.0.1", 2)]
    transports: dict[int, ShmTransport] = {}
    transport = transports[0] = ShmTransport(0, endpoints, FakeMesh(0, transports), print, print)  # type: ignore[arg-type]
    offered: list[bytes] = []

    class Peer:
        def offer(self, index: int, header: list[Any]) -> None:
            offered.append(header[2])

    transports[1] = Peer()  # type: ignore[assignment]
    transport._offers[1] = (True, b"", b"\0" * 16)
    failure: list[BaseException] = []

    def establish() -> None:
        try:
            transport.establish(time.monotonic() + 3)
        except BaseException as error:  # noqa: BLE001
            failure.append(error)

    thread = threading.Thread(target=establish)
    thread.start()
    eventually(lambda: offered)
    intruder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    intruder.connect(offered[0])
    intruder.sendall(struct.pack("!I16s", 1, b"guessed-secret!!"))
    intruder.settimeout(5)
    message, fds, _, _ = socket.recv_fds(intruder, 8, 2)
    assert message == b"" and fds == []  # closed without a descriptor
    thread.join()
    assert transport.refused == 1 and "did not prove the secret" in caplog.text
    assert failure and "was not linked" in str(failure[0])
    assert transport.links == {}


# ---------------------------------------------------------------------- clusters


def exchange_sum(worker: Worker, epochs: int = 30) -> int:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        seen: list[int] = []
        stream.exchange(lambda x: x).inspect(seen.append)
        return handle, stream.exchange(lambda x: x).probe(), seen

    handle, probe, seen = worker.dataflow(build)
    for epoch in range(1, epochs + 1):
        handle.send_batch(list(range(worker.index * 1000, worker.index * 1000 + 50)))
        handle.advance_to(epoch)
        worker.step_while(functools.partial(probe.less_than, epoch))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sum(seen)


def run_cluster_in_threads(hosts: list[str], workers: int = 1) -> tuple[list[list[int]], list[ProcessFabric]]:
    endpoints: list[Endpoint] = []
    for host in hosts:  # a port free on its host, and none twice (two of the hosts are the same)
        port = free_port(host)
        while any(endpoint.port == port for endpoint in endpoints):
            port = free_port(host)
        endpoints.append(Endpoint(host, port))
    results: list[Any] = [None] * len(hosts)
    fabrics: list[ProcessFabric] = []

    def run(process: int) -> None:
        try:
            results[process] = run_process(
                exchange_sum, process, endpoints, workers, "secret", 60.0, 30.0, on_fabric=fabrics.append
            )
        except BaseException as error:  # noqa: BLE001
            results[process] = error

    threads = [threading.Thread(target=run, args=(process,)) for process in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    return results, sorted(fabrics, key=lambda fabric: fabric.process)


def expected_sum(workers: int, epochs: int = 30) -> int:
    return sum(sum(range(index * 1000, index * 1000 + 50)) * epochs for index in range(workers))


def test_a_cluster_on_two_hosts_mixes_shared_memory_and_tcp_with_the_right_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """127.0.0.1 twice and 127.0.0.2 twice: two "hosts" on this machine, shared memory within each."""
    monkeypatch.delenv("PYTIMELY_TRANSPORT", raising=False)
    results, fabrics = run_cluster_in_threads(["127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"], workers=2)
    total = expected_sum(8)
    for result in results:
        assert isinstance(result, list), result
        assert sum(result) == total
    assert [fabric.shm.same_host for fabric in fabrics] == [[1], [0], [3], [2]]  # type: ignore[union-attr]
    assert [fabric.shm.used for fabric in fabrics] == [[1], [0], [3], [2]]  # type: ignore[union-attr]


def test_tcp_can_be_forced_between_processes_on_one_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTIMELY_TRANSPORT", "tcp")
    results, fabrics = run_cluster_in_threads(["127.0.0.1", "127.0.0.1"])
    assert all(isinstance(result, list) and sum(result) == expected_sum(2) for result in results), results
    assert [fabric.shm.used for fabric in fabrics] == [[], []]  # type: ignore[union-attr]


SCRIPT = (
    textwrap.dedent(
        """
        import sys, time
        sys.path.insert(0, {root!r})
        from runtime import execute
        from runtime.communication.tcp import PeerLost

        """
    )
    + exchange_loop(1000)
    + textwrap.dedent(
        """
    if __name__ == "__main__":
        try:
            execute(main, processes=3, stall_timeout=None)
        except PeerLost as error:
            print("PeerLost", error.process, flush=True)
            sys.exit(3)
    """
    )
)


def shm_files(maps: str) -> set[str]:
    """The /dev/shm files a process maps (from its /proc/PID/maps): this cluster's own, not another test's."""
    return {line.split(None, 5)[5] for line in maps.splitlines() if line.count(" ") >= 5 and "/dev/shm/" in line}


@pytest.mark.parametrize("victim", [0, 2])
def test_after_a_sigkill_no_ring_is_left_in_dev_shm_and_the_victim_is_named(tmp_path: Path, victim: int) -> None:
    script = tmp_path / "shm_cluster.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    env = {key: value for key, value in os.environ.items() if key != "PYTIMELY_TRANSPORT"}
    parent = subprocess.Popen(
        [sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        children: list[int] = []
        named: set[str] = set()  # /dev/shm files the cluster's processes map (a ring made there would be one)

        def rings_mapped() -> bool:
            children[:] = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _parent(int(pid)) == parent.pid]
            maps = [_maps(pid) for pid in children]
            named.update(path for text in maps for path in shm_files(text))
            return len(children) == 3 and all(text.count("memfd:pytimely-ring") >= 4 for text in maps)

        eventually(rings_mapped, timeout=60)  # every process maps a ring to and from each other
        children.sort(key=_start_time)
        os.kill(children[victim], signal.SIGKILL)
        killed = time.monotonic()
        out, err = parent.communicate(timeout=30)
        assert time.monotonic() - killed < 10.0
        assert f"PeerLost {victim}" in out, out + err
        assert not [path for path in named if os.path.exists(path.removesuffix(" (deleted)"))]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _start_time(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def test_arrays_larger_than_the_ring_pass_in_pieces_while_the_sender_keeps_stepping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 64 KiB ring and 1.6 MB arrays: the ring fills long before the send window does."""
    monkeypatch.delenv("PYTIMELY_TRANSPORT", raising=False)
    monkeypatch.setenv("PYTIMELY_SHM_RING_BYTES", "64K")
    epochs, rows = 30, 200_000
    main = functools.partial(flow_control_mains.slow_receiver, epochs=epochs, rows=rows, sleep=0.001)
    assert execute(main, processes=2, stall_timeout=60) == [0, flow_control_mains.expected_total(epochs, rows)]


def test_linking_ends_at_once_when_the_cluster_stops_meanwhile() -> None:
    """A peer lost after the TCP handshake but before its offer: the loss is reported, not a 30 s deadline."""
    endpoints = [Endpoint("127.0.0.1", 1), Endpoint("127.0.0.1", 2)]
    silent: dict[int, Any] = {1: type("Silent", (), {"offer": lambda self, index, header: None})()}
    transport = ShmTransport(0, endpoints, FakeMesh(0, silent), print, print)  # type: ignore[arg-type]
    lost = threading.Event()
    threading.Timer(0.2, lost.set).start()
    started = time.monotonic()
    transport.establish(started + 30, lost.is_set)
    assert time.monotonic() - started < 5 and transport.links == {}


def test_malformed_bytes_in_a_ring_report_the_peer_as_lost() -> None:
    first, second, received = linked_pair()
    try:
        first.send(1, [struct.pack("!II", 8, 9) + b"12345678"])  # a header longer than its frame
        second.drain()
        ((who, error),) = received
        assert who == -1 and isinstance(error, PeerLost) and error.process == 0
        assert "malformed data into its shared-memory ring" in str(error)
    finally:
        first.close()
        second.close()


def test_the_wake_gate_works_with_descriptors_above_the_select_limit() -> None:
    """The gate a worker parks on answers ``is_set`` by polling its eventfd, which ``select.select`` would refuse
    once the process has more than 1,023 descriptors open; after ``close`` it is never set."""
    from helpers.descriptors import SELECT_LIMIT, descriptors_above_select_limit

    from runtime.communication.shm_transport import EventGate

    with descriptors_above_select_limit():
        gate = EventGate(())
        try:
            assert gate._fd >= SELECT_LIMIT
            assert not gate.is_set()
            gate.set()
            assert gate.is_set() and gate.wait(0)
            assert not gate.is_set() and not gate.wait(0)
        finally:
            gate.close()
        assert not gate.is_set()


def test_a_goodbye_over_tcp_ends_the_wait_on_the_rings_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has finished waits for its peers' goodbyes while it reads its rings; a goodbye comes over TCP,
    and ends that wait at once rather than at the wait's timeout (20 ms, which every cluster paid at its end):
    shown with a wait of a minute, process 1 finishing only once process 0 waits."""
    from runtime.communication import process_fabric

    monkeypatch.setattr(process_fabric, "FINISH_POLL", 60.0)
    waiting = threading.Event()
    wait_for_goodbyes = ProcessFabric.wait_for_goodbyes

    def noting_the_wait(self: ProcessFabric) -> None:
        if self.process == 0:
            waiting.set()
        wait_for_goodbyes(self)

    monkeypatch.setattr(ProcessFabric, "wait_for_goodbyes", noting_the_wait)

    def main(worker: Worker) -> int:
        total = exchange_sum(worker, epochs=3)
        if worker.index == 1:  # one worker a process: worker 1 is process 1's
            assert waiting.wait(20), "process 0 never waited for goodbyes"
        return total

    endpoints = [Endpoint("127.0.0.1", port) for port in free_ports(2)]
    results: list[Any] = [None, None]
    fabrics: list[ProcessFabric] = []

    def run(process: int) -> None:
        try:
            results[process] = run_process(main, process, endpoints, 1, "secret", 60.0, 30.0, on_fabric=fabrics.append)
        except BaseException as error:  # noqa: BLE001
            results[process] = error

    threads = [threading.Thread(target=run, args=(process,), daemon=True) for process in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads), "a process waited for its rings' timeout"
    assert all(fabric.shm is not None and fabric.shm.used for fabric in fabrics)  # linked by shared memory
    assert results[0] == results[1] and not isinstance(results[0], BaseException), results
