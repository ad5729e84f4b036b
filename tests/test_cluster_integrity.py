"""Integrity between processes: every record after the handshake carries a keyed MAC, and a failed send never
deadlocks.

The sealing itself is tested on its own (a changed, dropped, repeated or
reordered record is refused, naming the record); then real processes run
through a proxy on loopback: one that adds 1 to a byte after the handshake
makes the run fail with :class:`~runtime.errors.TamperedFrame` naming the
sending process (not a wrong answer), and one that passes bytes through
unchanged gives the right answer.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import eventually
from helpers.ports import free_ports

from runtime.communication.seal import OVERHEAD, RECORD_MAX, Opener, Sealer, session_keys
from runtime.communication.tcp import Endpoint, Mesh, PeerLost
from runtime.communication.wire import FrameReader, frame
from runtime.errors import ClusterError, SealError, TamperedFrame

ROOT = Path(__file__).resolve().parent.parent


def free_endpoints(count: int) -> list[Endpoint]:
    """Addresses for a mesh's processes: free now, and where no other test or connection takes them."""
    return [Endpoint("127.0.0.1", port) for port in free_ports(count)]


# ---------------------------------------------------------------------- the records


def keys() -> tuple[bytes, bytes]:
    return session_keys("token", b"transcript")


def opened(opener: Opener, data: bytes, chunk: int = 1 << 16) -> bytes:
    """Feed ``data`` to ``opener`` in chunks; return what its records carried."""
    out = bytearray()
    view = memoryview(data)
    while view:
        space = opener.space()
        take = min(len(space), len(view), chunk)
        space[:take] = view[:take]
        view = view[take:]
        for body in opener.received(take):
            out += body
    return bytes(out)


def sealed(sealer: Sealer, *sends: bytes) -> list[bytes]:
    """Each send's records, as bytes."""
    return [b"".join(bytes(piece) for piece in sealer.seal([data])) for data in sends]


def test_records_carry_any_sends_and_a_large_one_is_cut_into_several() -> None:
    key = keys()[0]
    big = os.urandom(2 * RECORD_MAX + 12345)
    sends = [b"a", b"", big, frame(["data"], b"payload")]
    wire = b"".join(sealed(Sealer(key), *sends))
    assert len(wire) == sum(map(len, sends)) + OVERHEAD * 5  # the big send took three records, the empty none
    assert opened(Opener(key), wire, chunk=7777) == b"".join(sends)
    pieces: list[bytes | memoryview] = [b"head", memoryview(big), b"tail"]  # sealed without joining them
    assert opened(Opener(key), b"".join(bytes(p) for p in Sealer(key).seal(pieces))) == b"head" + big + b"tail"


def test_the_two_directions_and_two_connections_have_different_keys() -> None:
    one, other = session_keys("token", b"transcript")
    assert one != other
    assert session_keys("token", b"another transcript")[0] != one
    assert session_keys("another token", b"transcript")[0] != one


@pytest.mark.parametrize("position", range(0, 60, 3))
def test_adding_one_to_any_byte_of_a_record_is_refused(position: int) -> None:
    key = keys()[0]
    record = bytearray(sealed(Sealer(key), b"the records of one epoch: 1, 2, 3")[0])
    record[position % len(record)] = (record[position % len(record)] + 1) % 256
    with pytest.raises(SealError, match="record 0"):
        opened(Opener(key), bytes(record))


def test_a_length_made_larger_is_refused_at_once_not_after_waiting_for_bytes() -> None:
    key = keys()[0]
    record = bytearray(sealed(Sealer(key), b"x" * 100)[0])
    record[1] += 1  # 65636 bytes declared: without the head's own tag the reader would wait for them
    opener = Opener(key)
    space = opener.space()
    space[:12] = record[:12]
    with pytest.raises(SealError, match="head"):
        list(opener.received(12))


@pytest.mark.parametrize(
    "change", ["drop the second", "repeat the first", "swap two", "from the other direction", "another key"]
)
def test_dropped_repeated_reordered_or_foreign_records_are_refused(change: str) -> None:
    sending, receiving = keys()
    first, second, third = sealed(Sealer(sending), b"one", b"two", b"three")
    streams = {
        "drop the second": first + third,
        "repeat the first": first + first,
        "swap two": second + first,
        "from the other direction": sealed(Sealer(receiving), b"one")[0],
        "another key": sealed(Sealer(session_keys("other", b"transcript")[0]), b"one")[0],
    }
    with pytest.raises(SealError):
        opened(Opener(sending), streams[change])


# ---------------------------------------------------------------------- a failed send


def connected_pair(on_lost: Callable[[PeerLost], None]) -> tuple[Mesh, Mesh]:
    endpoints = free_endpoints(2)
    first = Mesh(0, endpoints, "token", lambda *_: None, on_lost)
    second = Mesh(1, endpoints, "token", lambda *_: None, lambda _: None)
    thread = threading.Thread(target=second.connect, args=(10.0,), daemon=True)
    thread.start()
    first.connect(10.0)
    thread.join(10.0)
    return first, second


class BrokenSocket(socket.socket):
    """The connection as it is when the peer has gone: every send fails."""

    def sendall(self, *_: Any, **__: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def sendmsg(self, *_: Any, **__: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_failed_send_reports_the_loss_after_releasing_the_lock_so_stopping_can_send_again() -> None:
    lost: list[PeerLost] = []

    def on_lost(error: PeerLost) -> None:  # what ProcessFabric.stop does: tell every process, this one too
        lost.append(error)
        first.send(1, frame(["stop"]))

    first, second = connected_pair(on_lost)
    try:
        real = first._sockets[1]
        first._sockets[1] = BrokenSocket(fileno=os.dup(real.fileno()))  # every send to process 1 now fails
        sender = threading.Thread(target=first.send, args=(1, frame(["data"], b"x" * 100)), daemon=True)
        sender.start()
        sender.join(10.0)
        assert not sender.is_alive(), "the send that failed deadlocked on its own lock"
        eventually(lambda: lost, 10, "the reader reporting the loss the failed send found")  # after all it read
        assert len(lost) == 1 and "lost process 1 (127.0.0.1:" in str(lost[0]) and "sending failed" in str(lost[0])
        first.send(1, frame(["later"]))  # a lost process is not sent to again
        assert len(lost) == 1
    finally:
        first.close()
        second.close()


def test_a_heartbeat_offer_never_waits_for_a_send_under_way() -> None:
    first, second = connected_pair(lambda _: None)
    try:
        lock = first._locks[1]
        with lock:  # a data send under way (blocked for as long as the peer reads nothing)
            offered = []
            beat = threading.Thread(target=lambda: offered.append(first.offer(1, frame(["beat"]))), daemon=True)
            beat.start()
            beat.join(10.0)
            assert offered == [False]
        assert first.offer(1, frame(["beat"]))
    finally:
        first.close()
        second.close()


# ---------------------------------------------------------------------- through a proxy, real processes

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from runtime import execute_from_args
    from runtime.errors import ClusterError

    def main(worker):
        got = []
        def build(scope):
            handle, stream = scope.new_input()
            probe = stream.exchange(lambda x: 0).inspect_batch(lambda time, batch: got.extend(batch)).probe()
            return handle, probe
        handle, probe = worker.dataflow(build)
        if worker.index == 1:
            for epoch in range(20):
                handle.send_batch(list(range(epoch * 1000, (epoch + 1) * 1000)))
                handle.advance_to(epoch + 1)
                worker.step()
        handle.close()
        worker.step_while(lambda: not probe.done())
        return sum(got)

    if __name__ == "__main__":
        try:
            print("results", execute_from_args(main, stall_timeout=None), flush=True)
        except ClusterError as error:
            print("failed", type(error).__name__, error, flush=True)
            sys.exit(3)
    """
)


class Proxy:
    """Forwards connections from its own port to ``target``; with ``tamper``, adds 1 to a byte of every chunk
    that the connecting side sends after its two handshake frames."""

    def __init__(self, target: Endpoint, tamper: bool) -> None:
        self.target = target
        self.tamper = tamper
        self.tampered = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = Endpoint("127.0.0.1", self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((self.target.host, self.target.port))
            except OSError:
                client.close()
                continue
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, self.tamper), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, tamper: bool) -> None:
        handshake = bytearray()  # the connector's hello and proof pass unchanged
        frames = 0
        try:
            while True:
                data = bytearray(source.recv(1 << 16))
                if not data:
                    break
                if frames < 2:
                    handshake += data
                    while frames < 2 and len(handshake) >= 8:
                        body = struct.unpack_from("!I", handshake)[0]
                        if len(handshake) < 8 + body:
                            break
                        del handshake[: 8 + body]
                        frames += 1
                    start = len(data) - len(handshake) if frames == 2 else len(data)
                else:
                    start = 0
                if tamper and len(data) - start > 16:
                    middle = start + (len(data) - start) // 2
                    data[middle] = (data[middle] + 1) % 256
                    self.tampered += 1
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


def run_through_proxy(tmp_path: Path, tamper: bool) -> tuple[list[tuple[int, str, str]], Proxy]:
    """Run the script as two processes, process 1 reaching process 0 through a proxy; their codes and output."""
    endpoints = free_endpoints(2)
    proxy = Proxy(endpoints[0], tamper)
    script = tmp_path / "proxied.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    env = dict(os.environ, PYTIMELY_TOKEN="secret", PYTHONHASHSEED="0")
    processes = []
    for index, first in enumerate([endpoints[0], proxy.endpoint]):
        hostfile = tmp_path / f"hosts{index}"
        hostfile.write_text(f"{first}\n{endpoints[1]}\n")
        processes.append(
            subprocess.Popen(
                [sys.executable, str(script), "-n", "2", "-h", str(hostfile), "-p", str(index)],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outcomes = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=60)
            outcomes.append((process.returncode, out, err))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
        proxy.close()
    return outcomes, proxy


def test_a_proxy_that_adds_one_to_a_record_byte_makes_the_run_fail_naming_the_sender(tmp_path: Path) -> None:
    outcomes, proxy = run_through_proxy(tmp_path, tamper=True)
    assert proxy.tampered >= 1
    (code0, out0, err0), (code1, out1, err1) = outcomes
    assert "results" not in out0 + out1, out0 + out1  # no answer at all, let alone a wrong one
    assert code0 == 3 and out0.startswith("failed TamperedFrame lost process 1 (127.0.0.1:"), out0 + err0
    assert "failed authentication (record " in out0 and "changed, dropped or replayed" in out0, out0
    assert code1 == 3, out1 + err1


def test_a_proxy_that_passes_bytes_unchanged_gives_the_right_answer(tmp_path: Path) -> None:
    outcomes, _ = run_through_proxy(tmp_path, tamper=False)
    total = sum(range(20000))
    for code, out, err in outcomes:
        assert code == 0 and out == f"results [{total}, 0]\n", out + err


def test_tamperedframe_is_a_peerlost() -> None:
    error: Any = TamperedFrame("lost process 1", 1, "127.0.0.1:1")
    assert isinstance(error, PeerLost) and error.process == 1


def test_a_peer_of_the_previous_protocol_version_is_refused_with_what_to_do() -> None:
    endpoints = free_endpoints(2)
    mesh = Mesh(0, endpoints, "token", lambda *_: None, lambda _: None)
    thread = threading.Thread(target=lambda: _quietly(mesh.connect, 3.0), daemon=True)
    thread.start()
    answers: list[Any] = []
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                sock = socket.create_connection((endpoints[0].host, endpoints[0].port))
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        with sock:
            sock.sendall(frame(["hello", "pytimely", 5, 1, 2, b"0" * 16, 0]))  # version 5 sent no settings
            reader = FrameReader()
            while not answers:
                data = sock.recv(4096)
                assert data
                answers.extend(header for header, _ in reader.feed(data))
    finally:
        thread.join(10.0)
        mesh.close()
    assert answers[0][0] == "refused"
    assert "protocol version 5 (this process speaks 6); run the same pytimely version" in answers[0][1]


def _quietly(function: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(ClusterError):  # the mesh times out: nobody real joins it
        function(*args)
