"""TLS between the processes of a cluster: ``--tls CERT KEY --tls-ca CA``.

A CA and certificates are made for each test run with the ``openssl`` command
(the tests skip without it).  Over TLS, frames arrive and nothing readable
crosses the wire (a recording proxy sees no plaintext, where it does without
TLS); a certificate from another CA is refused; TLS on one side only is refused
with a hint; bad files and half-given options are refused before anything
starts; and two real processes compute over TLS.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import eventually
from helpers.ports import free_ports

from runtime.cluster import parse_cluster_args
from runtime.communication.tcp import Endpoint, Mesh
from runtime.communication.tls import TlsConfig, tls_config
from runtime.communication.wire import frame
from runtime.errors import ConfigurationError

ROOT = Path(__file__).resolve().parent.parent
SECRET = b"SECRET-RECORD-42"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
LEAF = (
    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
)


def make_ca(directory: Path, name: str) -> None:
    openssl(directory, "req", "-x509", *EC, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN={name}")  # fmt: skip


def make_cert(directory: Path, ca: str, name: str) -> tuple[str, str]:
    (directory / "leaf.ext").write_text(LEAF)
    openssl(directory, "req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "leaf.ext")  # fmt: skip
    return str(directory / f"{name}.pem"), str(directory / f"{name}.key")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cluster CA with two node certificates, and a rogue CA with one."""
    directory = tmp_path_factory.mktemp("pki")
    make_ca(directory, "ca")
    make_ca(directory, "rogue-ca")
    for node in ("node0", "node1"):
        make_cert(directory, "ca", node)
    make_cert(directory, "rogue-ca", "rogue")
    return directory


def config(pki: Path, node: str, ca: str = "ca") -> TlsConfig:
    return tls_config(str(pki / f"{node}.pem"), str(pki / f"{node}.key"), str(pki / f"{ca}.pem"))


def free_endpoints(count: int) -> list[Endpoint]:
    """Addresses for a mesh's processes: free now, and where no other test or connection takes them."""
    return [Endpoint("127.0.0.1", port) for port in free_ports(count)]


class Recorder:
    """A pass-through proxy to ``target`` that keeps every byte it forwards."""

    def __init__(self, target: Endpoint) -> None:
        self.target = target
        self.seen = bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = Endpoint("127.0.0.1", self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((self.target.host, self.target.port))
            except OSError:  # the target does not listen yet: the connecting side tries again
                client.close()
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                self.seen += data
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


def exchange_through_recorder(first_tls: TlsConfig | None, second_tls: TlsConfig | None) -> tuple[list[Any], bytes]:
    """Two meshes (process 1 reaching process 0 through a recorder) send each other a frame; what arrived, and
    the bytes the recorder saw."""
    endpoints = free_endpoints(2)
    recorder = Recorder(endpoints[0])
    received: list[Any] = []
    on_frame = lambda peer, header, payload: received.append((peer, header, bytes(payload)))  # noqa: E731
    first = Mesh(0, endpoints, "token", on_frame, lambda _: None, tls=first_tls)
    second = Mesh(1, [recorder.endpoint, endpoints[1]], "token", on_frame, lambda _: None, tls=second_tls)
    thread = threading.Thread(target=second.connect, args=(10.0,), daemon=True)
    thread.start()
    try:
        first.connect(10.0)
        thread.join(10.0)
        first.send(1, frame(["data"], SECRET * 4))
        second.send(0, frame(["data"], SECRET * 4))
        eventually(lambda: len(received) == 2, 10, "both frames")
    finally:
        first.close()
        second.close()
        recorder.close()
    return received, bytes(recorder.seen)


def test_over_tls_frames_arrive_and_nothing_readable_crosses_the_wire(pki: Path) -> None:
    received, seen = exchange_through_recorder(config(pki, "node0"), config(pki, "node1"))
    assert sorted(received) == [(0, ["data"], SECRET * 4), (1, ["data"], SECRET * 4)]
    assert SECRET not in seen and b"pytimely" not in seen  # neither records nor the handshake are readable
    _, plain = exchange_through_recorder(None, None)
    assert SECRET in plain  # what TLS hides: the sealed records are authenticated, not encrypted


def test_a_certificate_signed_by_another_ca_is_refused(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    endpoints = free_endpoints(2)
    good = Mesh(0, endpoints, "token", lambda *_: None, lambda _: None, tls=config(pki, "node0"))
    rogue_trusting_ca = tls_config(str(pki / "rogue.pem"), str(pki / "rogue.key"), str(pki / "ca.pem"))
    rogue = Mesh(1, endpoints, "token", lambda *_: None, lambda _: None, tls=rogue_trusting_ca)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _collect(good.connect, 2.0, errors), daemon=True)
    with caplog.at_level(logging.WARNING, logger="runtime.communication.tcp"):
        thread.start()
        _collect(rogue.connect, 2.0, errors)
        thread.join(10.0)
    good.close()
    rogue.close()
    assert good.refused >= 1 and len(errors) == 2  # neither side formed a cluster
    assert any("certificate" in record.getMessage().lower() for record in caplog.records)


def test_tls_on_one_side_only_is_refused_with_a_hint(pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    endpoints = free_endpoints(2)
    plain = Mesh(0, endpoints, "token", lambda *_: None, lambda _: None)
    with_tls = Mesh(1, endpoints, "token", lambda *_: None, lambda _: None, tls=config(pki, "node1"))
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _collect(plain.connect, 2.0, errors), daemon=True)
    with caplog.at_level(logging.WARNING, logger="runtime.communication.tcp"):
        thread.start()
        _collect(with_tls.connect, 2.0, errors)
        thread.join(10.0)
    plain.close()
    with_tls.close()
    assert len(errors) == 2
    assert any("it looks like TLS: give every process the same --tls" in r.getMessage() for r in caplog.records)


def _collect(function: Callable[[float], None], timeout: float, errors: list[BaseException]) -> None:
    try:
        function(timeout)
    except Exception as error:  # noqa: BLE001 - inspected by the test
        errors.append(error)


def test_bad_files_and_half_given_options_are_refused(pki: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--tls CERT KEY and --tls-ca CA go together"):
        parse_cluster_args(["--tls", str(pki / "node0.pem"), str(pki / "node0.key")])
    with pytest.raises(ConfigurationError, match="go together"):
        parse_cluster_args(["--tls-ca", str(pki / "ca.pem")])
    config, _ = parse_cluster_args(
        ["--tls", str(pki / "node0.pem"), str(pki / "node0.key"), "--tls-ca", str(pki / "ca.pem")]
    )
    assert config.tls == (str(pki / "node0.pem"), str(pki / "node0.key"), str(pki / "ca.pem"))
    with pytest.raises(ConfigurationError, match="does not exist"):
        tls_config(str(tmp_path / "missing.pem"), str(pki / "node0.key"), str(pki / "ca.pem"))
    with pytest.raises(ConfigurationError, match="the key matching the certificate"):
        tls_config(str(pki / "node0.pem"), str(pki / "node1.key"), str(pki / "ca.pem"))


SCRIPT = """
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
    if worker.index == 1:
        handle.send_batch(list(range(1000)))
    handle.close()
    worker.step_while(lambda: not probe.done())
    return sum(got)

if __name__ == "__main__":
    print("results", execute_from_args(main, stall_timeout=None), flush=True)
"""


def test_two_processes_compute_over_tls_from_the_command_line(pki: Path, tmp_path: Path) -> None:
    endpoints = free_endpoints(2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{e}\n" for e in endpoints))
    script = tmp_path / "tls_cluster.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    env = dict(os.environ, PYTIMELY_TOKEN="secret", PYTHONHASHSEED="0")
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                "-n",
                "2",
                "-h",
                str(hostfile),
                "-p",
                str(index),
                "--tls",
                str(pki / f"node{index}.pem"),
                str(pki / f"node{index}.key"),
                "--tls-ca",
                str(pki / "ca.pem"),
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for index in range(2)
    ]
    try:
        outcomes = [process.communicate(timeout=60) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0 and out == f"results [{sum(range(1000))}, 0]\n", out + err


def test_a_local_cluster_started_with_tls_passes_it_to_its_children(pki: Path, tmp_path: Path) -> None:
    script = tmp_path / "tls_local.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    node = pki / "node0"
    tls = ["--tls", f"{node}.pem", f"{node}.key"]
    done = subprocess.run(
        [sys.executable, str(script), "-n", "2", *tls, "--tls-ca", str(pki / "ca.pem")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == f"results [{sum(range(1000))}, 0]\n", done.stdout + done.stderr
    wrong = subprocess.run(
        [sys.executable, str(script), "-n", "2", *tls, "--tls-ca", "missing.pem"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode != 0 and "TLS: the CA certificate file 'missing.pem' does not exist" in wrong.stderr
