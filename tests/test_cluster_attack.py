"""A cluster forms while hostile, idle and malformed connections hit its listener.

The handshake (:mod:`runtime.communication.tcp`) runs one deadline per connection,
concurrently, with a bounded number in progress; every malformed message is
refused and logged with the peer's address, and nothing but the handshake's
own fields is decoded before a peer proves the token.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
from helpers import eventually
from helpers.ports import free_ports

from runtime.communication.agreement import ClusterSettings
from runtime.communication.tcp import MAX_HANDSHAKES, Endpoint, Mesh, decode_handshake, hash_fingerprint
from runtime.communication.wire import (
    PROTOCOL_VERSION,
    FrameReader,
    WireError,
    frame,
    register_codec,
    unregister_codec,
)

pytestmark = pytest.mark.usefixtures("transport")  # every test over shared memory and over TCP

ROOT = Path(__file__).resolve().parent.parent


def free_endpoints(count: int) -> list[Endpoint]:
    """Addresses for a mesh's processes: free now, and where no other test or connection takes them."""
    return [Endpoint("127.0.0.1", port) for port in free_ports(count)]


def head_only(head: bytes) -> bytes:
    """A frame whose header is the raw msgpack ``head`` (no payload)."""
    return struct.pack("!II", len(head), len(head)) + head


def deep_ext(depth: int) -> bytes:
    value = msgpack.packb([])
    for _ in range(depth):
        value = msgpack.packb(msgpack.ExtType(1, value))
    return value


def hello(*fields: Any) -> bytes:
    return frame(["hello", "pytimely", PROTOCOL_VERSION, *fields])


SETTINGS = ClusterSettings.of_this_process().fields()
"""A hello's last fields: the settings every process must share, as this process has them."""


NONCE = b"n" * 16
MALFORMED: dict[str, bytes] = {
    "garbage": b"\x07" * 3 + os.urandom(61),
    "an int nonce": hello(1, 2, 12345, hash_fingerprint(), *SETTINGS),
    "too few fields": hello(1, 2),
    "too many fields": hello(1, 2, NONCE, hash_fingerprint(), *SETTINGS, 0),
    "the fields of protocol version 5": hello(1, 2, NONCE, hash_fingerprint()),
    "a str index": hello("1", 2, NONCE, hash_fingerprint(), *SETTINGS),
    "a str setting": hello(1, 2, NONCE, hash_fingerprint(), "8M", *SETTINGS[1:]),
    "a short nonce": hello(1, 2, b"n", hash_fingerprint(), *SETTINGS),
    "a nested list": hello(1, 2, [NONCE], hash_fingerprint(), *SETTINGS),
    "deep ext nesting": head_only(deep_ext(200)),
    "deep array nesting": head_only(b"\x91" * 900 + b"\xc0"),
    "a map": head_only(msgpack.packb({"hello": 1})),
    "a huge length prefix": struct.pack("!II", 1 << 31, 1 << 31),
    "a payload after the header": frame(["hello"], b"x" * 100),
    "a float version": frame(["hello", "pytimely", 2.0, 1, 2, NONCE, 0]),
}


def answer_to(endpoint: Endpoint, data: bytes) -> list[Any]:
    """Send ``data`` on a new connection; return the frames answered before the connection closed."""
    with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as sock:
        sock.sendall(data)
        reader = FrameReader()
        answers: list[Any] = []
        while True:
            try:
                chunk = sock.recv(4096)
            except OSError:
                break
            if not chunk:
                break
            answers.extend(header for header, _ in reader.feed(chunk))
        return answers


def wait_listening(endpoint: Endpoint, seconds: float = 30.0) -> None:
    """Wait until something listens at ``endpoint`` (by probing the kernel's table, without connecting)."""
    deadline = time.monotonic() + seconds
    wanted = f"{endpoint.port:04X}"
    while time.monotonic() < deadline:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and local.endswith(":" + wanted):
                return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens at {endpoint}")


# ---------------------------------------------------------------------- the decoder


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_every_malformed_handshake_frame_is_refused_by_the_decoder_or_the_field_check(name: str) -> None:
    data = MALFORMED[name]
    body, head = struct.unpack("!II", data[:8])
    if body > 1024 or body != head:
        return  # refused from the length prefix alone, before any decoding
    try:
        message = decode_handshake(data[8:])
    except WireError:
        return
    assert message[0] == "hello"
    assert (
        len(message) != 10
        or not all(
            isinstance(f, t) for f, t in zip(message[1:], (str, int, int, int, bytes, int, int, int, int), strict=True)
        )
        or len(message[5]) != 16
    )


def test_the_handshake_decoder_never_runs_a_codec() -> None:
    calls: list[Any] = []

    class Secret:
        pass

    register_codec(Secret, lambda value: 1, lambda encoded: calls.append(encoded), name="test-attack.Secret")
    try:
        with pytest.raises(WireError):
            decode_handshake(frame(["hello", Secret()])[8:])
    finally:
        unregister_codec(Secret)  # the test runs once per transport
    assert calls == []


# ---------------------------------------------------------------------- one process, in threads


def test_malformed_hellos_are_refused_and_logged_and_the_cluster_forms(
    caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    endpoints = free_endpoints(2)
    decoded: list[Any] = []

    class Secret:
        pass

    register_codec(Secret, lambda value: 1, lambda encoded: decoded.append(encoded), name="test-attack.Secret2")
    request.addfinalizer(lambda: unregister_codec(Secret))  # the test runs once per transport
    MALFORMED_WITH_CODEC = {**MALFORMED, "a codec value": hello(1, 2, Secret(), hash_fingerprint(), *SETTINGS)}
    acceptor = Mesh(0, endpoints, "token", lambda *_: None, lambda *_: None)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _connect(acceptor, 20.0, errors), daemon=True)
    with caplog.at_level(logging.WARNING, logger="runtime.communication.tcp"):
        thread.start()
        wait_listening(endpoints[0])
        answers = {name: answer_to(endpoints[0], data) for name, data in MALFORMED_WITH_CODEC.items()}
        connector = Mesh(1, endpoints, "token", lambda *_: None, lambda *_: None)
        connector.connect(20.0)
        thread.join(20.0)
    acceptor.close()
    connector.close()
    assert not errors and not thread.is_alive()
    assert decoded == []
    assert acceptor.refused >= len(MALFORMED_WITH_CODEC)
    assert answers["an int nonce"] == [["refused", "malformed hello: field 5 of the hello has type int, not bytes"]]
    assert answers["a str index"] == [["refused", "malformed hello: field 3 of the hello has type str, not int"]]
    assert answers["a str setting"] == [["refused", "malformed hello: field 7 of the hello has type str, not int"]]
    assert answers["the fields of protocol version 5"] == [
        ["refused", "malformed hello: expected a hello of 9 field(s), got 'hello' with 6"]
    ]
    assert answers["a float version"] == answers["deep ext nesting"] == []  # not even a handshake frame
    logged = [record.getMessage() for record in caplog.records]
    assert sum("refused a connection from 127.0.0.1:" in line for line in logged) >= len(MALFORMED_WITH_CODEC)


def _connect(mesh: Mesh, timeout: float, errors: list[BaseException]) -> None:
    try:
        mesh.connect(timeout)
    except BaseException as error:  # noqa: BLE001 - inspected by the test
        errors.append(error)


# ---------------------------------------------------------------------- real processes under attack

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from runtime import execute_from_args

    def main(worker):
        got = []
        def build(scope):
            handle, stream = scope.new_input()
            probe = stream.exchange(lambda x: 0).inspect_batch(lambda time, batch: got.extend(batch)).probe()
            return handle, probe
        handle, probe = worker.dataflow(build)
        if worker.index == 0:
            handle.send_batch(list(range(1000)))
        handle.close()
        worker.step_while(lambda: not probe.done())
        return sum(got)

    if __name__ == "__main__":
        print("results", execute_from_args(main, stall_timeout=None), flush=True)
    """
)


class Flood:
    """Hostile connections to ``endpoint`` from a thread: a first wave, then a steady trickle, all held open."""

    def __init__(self, endpoint: Endpoint, first_wave: int, per_second: float) -> None:
        self.endpoint = endpoint
        self.first_wave = first_wave
        self.per_second = per_second
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, data: bytes = b"") -> None:
        try:
            sock = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout=1.0)
            if data:
                sock.sendall(data)
        except OSError:
            return
        self.opened += 1
        self.held.append(sock)

    def _run(self) -> None:
        for number in range(self.first_wave):
            # idle connections, half-sent frames (slow loris) and hellos that never send their proof
            self._open([b"", b"\x00\x00\x01", hello(1, 2, NONCE, hash_fingerprint(), *SETTINGS)][number % 3])
        while not self.stop.wait(1.0 / self.per_second):
            self._open()

    def __enter__(self) -> Flood:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(10.0)
        for sock in self.held:
            sock.close()


def test_a_two_process_cluster_forms_and_computes_while_its_listener_is_attacked(tmp_path: Path) -> None:
    endpoints = free_endpoints(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{e}\n" for e in endpoints))
    script = tmp_path / "attacked.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    env = dict(os.environ, PYTIMELY_TOKEN="secret", PYTHONHASHSEED="0")

    def start(index: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(script), "-n", "2", "-h", str(hostfile), "-p", str(index)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start(0)
    second = None
    try:
        wait_listening(endpoints[0])
        answers = {name: answer_to(endpoints[0], data) for name, data in MALFORMED.items()}
        with Flood(endpoints[0], first_wave=1000, per_second=50) as flood:
            eventually(lambda: flood.opened > MAX_HANDSHAKES, timeout=30)  # the listener is under the flood
            second = start(1)
            out0, err0 = first.communicate(timeout=60)
            out1, err1 = second.communicate(timeout=60)
        assert first.returncode == 0 and second.returncode == 0, err0 + err1
        total = sum(range(1000))
        assert out0 == out1 == f"results [{total}, 0]\n", err0 + err1
        assert flood.opened > MAX_HANDSHAKES
        assert answers["an int nonce"][0][0] == "refused"
        for name in ("garbage", "deep ext nesting", "deep array nesting", "a huge length prefix"):
            assert answers[name] == [], name  # closed without an answer: not a handshake frame
        assert err0.count("process 0 refused a connection from 127.0.0.1:") >= len(MALFORMED)
        assert "closed to make room" in err0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()


def test_a_refusal_from_a_peer_that_proved_nothing_cannot_forge_lines_in_the_error() -> None:
    """Whatever listens at process 0's address answers process 1's hello with a ``refused`` frame whose reason holds
    a line break and a terminal escape sequence: the HandshakeError shows them escaped, on one line, so the text of a
    peer that proved nothing cannot pass for lines of pytimely's own."""
    from runtime.communication.tcp import HandshakeError

    impostor = socket.create_server(("127.0.0.1", 0))
    endpoints = [Endpoint("127.0.0.1", impostor.getsockname()[1]), Endpoint("127.0.0.1", free_ports(1)[0])]
    forged = "wrong token\nERROR process 2 (10.0.0.9:2101) was lost\x1b[2K"

    def answer() -> None:
        sock, _ = impostor.accept()
        with sock:
            reader = FrameReader()
            while not list(reader.feed(sock.recv(4096))):
                pass
            sock.sendall(frame(["refused", forged]))

    answering = threading.Thread(target=answer, daemon=True)
    answering.start()
    try:
        with pytest.raises(HandshakeError) as refused:
            Mesh(1, endpoints, "token", lambda *_: None, lambda *_: None).connect(10.0)
    finally:
        answering.join(10.0)
        impostor.close()
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message, message
    assert "wrong token\\nERROR process 2" in message and "\\x1b[2K" in message, message
