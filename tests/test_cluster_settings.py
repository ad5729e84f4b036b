"""Settings every process of a cluster must share, compared when the cluster forms, on real processes.

A process started with another send window, frame limit or worker count than its peers is refused by the
handshake: every process ends promptly with a :class:`~runtime.errors.SettingsMismatch` (a
:class:`~runtime.errors.ConfigurationError`) naming the setting, both values and both processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import settings_mains
from helpers.ports import free_ports

from runtime import ConfigurationError, execute
from runtime.communication.hostfile import Endpoint
from runtime.errors import ClusterError, SettingsMismatch

SCRIPT = Path(settings_mains.__file__)
PROMPTLY = 20.0
"""Seconds within which every process must have ended (the connect timeout is 30 s: waiting for it is too late)."""


def shm_entries() -> set[str]:
    """What /dev/shm holds (the rings are memfds: nothing of a cluster's may ever appear there)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def endpoints_on(hosts: list[str]) -> list[Endpoint]:
    """A free port on each host (127.0.0.1 and 127.0.0.2 are two hosts of this machine: TCP between them)."""
    ports = free_ports(len(hosts))
    return [Endpoint(host, port) for host, port in zip(hosts, ports, strict=True)]


def run_by_hand(
    tmp_path: Path, endpoints: list[Endpoint], envs: list[dict[str, str]], flags: list[list[str]]
) -> tuple[list[int], list[str], float]:
    """Start one process per endpoint with ``-p``, a hostfile, its own extra environment and flags; wait for them.

    Returns their exit codes, their standard errors and the seconds until the last ended."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{endpoint}\n" for endpoint in endpoints))
    base = dict(os.environ, PYTIMELY_TOKEN="settings-test", PYTHONHASHSEED="0")
    for name in ("PYTIMELY_SEND_WINDOW", "PYTIMELY_MAX_FRAME_BYTES"):
        base.pop(name, None)
    start = time.monotonic()
    children = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "-n", str(len(endpoints)), "-h", str(hostfile), "-p", str(index), *extra],
            cwd=tmp_path,
            env={**base, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index, (env, extra) in enumerate(zip(envs, flags, strict=True))
    ]
    errors = []
    try:
        for child in children:
            _, err = child.communicate(timeout=90)
            errors.append(err)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return [child.returncode for child in children], errors, time.monotonic() - start


LAYOUTS = {
    "shared memory": (["127.0.0.1", "127.0.0.1"], {}),
    "tcp on one host": (["127.0.0.1", "127.0.0.1"], {"PYTIMELY_TRANSPORT": "tcp"}),
    "tcp between two hosts": (["127.0.0.1", "127.0.0.2"], {}),
}

CASES = {
    # name: (environment of process 0, of process 1, flags of 0, of 1, words every error must hold)
    "send window": (
        {},
        {"PYTIMELY_SEND_WINDOW": "64K"},
        [],
        [],
        ["send window", "$PYTIMELY_SEND_WINDOW", "8388608 bytes (8 MiB)", "65536 bytes (64 KiB)"],
    ),
    "frame limit": (
        {"PYTIMELY_MAX_FRAME_BYTES": "512M"},
        {},
        [],
        [],
        ["frame limit", "$PYTIMELY_MAX_FRAME_BYTES", "536870912 bytes (512 MiB)", "1073741824 bytes (1 GiB)"],
    ),
    "worker count": ({}, {}, ["-w", "2"], ["-w", "1"], ["worker threads", "-w/--workers", "2 in process 0", "1 in"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_processes_started_by_hand_with_another_setting_all_end_promptly_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, case: str
) -> None:
    """Started with ``PYTIMELY_SEND_WINDOW=64K`` in one process only, a cluster ran 250 times slower with no error
    (credit returns at the receiver's thresholds); with another ``PYTIMELY_MAX_FRAME_BYTES`` it ran until a large
    frame arrived; with another ``-w`` a process was named lost for 'malformed data'.  The handshake now compares
    them: both processes end at once with the setting, both values and both processes named."""
    monkeypatch.delenv("PYTIMELY_TRANSPORT", raising=False)
    hosts, layout_env = LAYOUTS[layout]
    first_env, second_env, first_flags, second_flags, words = CASES[case]
    endpoints = endpoints_on(hosts)
    before = shm_entries()
    codes, errors, seconds = run_by_hand(
        tmp_path,
        endpoints,
        [{**layout_env, **first_env}, {**layout_env, **second_env}],
        [first_flags, second_flags],
    )
    assert codes == [1, 1], errors
    assert seconds < PROMPTLY, errors
    for error in errors:
        assert "runtime.errors.SettingsMismatch: " in error, error
        message = error.rsplit("runtime.errors.SettingsMismatch: ", 1)[1]
        for word in [*words, f"process 0 ({endpoints[0]})", f"process 1 ({endpoints[1]})", "every process"]:
            assert word in message, (word, message)
    assert shm_entries() <= before


def test_the_same_setting_spelled_otherwise_is_the_same_and_the_cluster_runs(tmp_path: Path) -> None:
    """``64K`` in one process and ``65536`` in the other are one window: the values are compared, not the text."""
    endpoints = endpoints_on(["127.0.0.1", "127.0.0.1"])
    codes, errors, _ = run_by_hand(
        tmp_path, endpoints, [{"PYTIMELY_SEND_WINDOW": "64K"}, {"PYTIMELY_SEND_WINDOW": "65536"}], [[], []]
    )
    assert codes == [0, 0], errors


def test_three_processes_by_hand_end_promptly_though_two_of_them_agree(tmp_path: Path) -> None:
    """Process 1 of three has another window; processes 0 and 2 agree with each other.  Refusing at the first
    disagreement, a process gave up joining while another still waited to handshake with it, until the connect
    timeout.  Each process now handshakes with every other before it refuses: all three name a disagreement."""
    endpoints = endpoints_on(["127.0.0.1", "127.0.0.1", "127.0.0.2"])
    before = shm_entries()
    codes, errors, seconds = run_by_hand(tmp_path, endpoints, [{}, {"PYTIMELY_SEND_WINDOW": "64K"}, {}], [[], [], []])
    assert codes == [1, 1, 1], errors
    assert seconds < PROMPTLY, errors
    for index, error in enumerate(errors):
        assert "runtime.errors.SettingsMismatch: " in error, error
        message = error.rsplit("runtime.errors.SettingsMismatch: ", 1)[1]
        assert "$PYTIMELY_SEND_WINDOW" in message and f"process 1 ({endpoints[1]})" in message, message
        assert f"process {index} ({endpoints[index]})" in message, message
    assert shm_entries() <= before


SHORT_DEADLINE = 4.0
"""Seconds the processes of the tests below have to find each other (one never arrives)."""


@pytest.mark.parametrize("absent", [0, 1, 2])
def test_a_mismatch_found_before_the_connect_deadline_is_named_with_the_process_that_never_arrived(
    tmp_path: Path, absent: int
) -> None:
    """Of three processes, two disagree on the send window and the third is never started.  Both waited for it
    until the connect deadline, and ended with a ConnectTimeout that said nothing of the disagreement already
    found.  Each now raises the SettingsMismatch, naming the setting, both processes and the one that never
    arrived: process 2 is awaited by both as an acceptor; process 1 by process 0 as an acceptor and by process 2
    as a connector; process 0 by both as a connector.  Without process 0, process 2 connected to process 1 only
    once process 0 had joined it, so the two never met: each ended with a bare ConnectTimeout naming process 0."""
    endpoints = endpoints_on(["127.0.0.1", "127.0.0.1", "127.0.0.1"])
    started = [index for index in range(3) if index != absent]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"{endpoint}\n" for endpoint in endpoints))
    base = dict(os.environ, PYTIMELY_TOKEN="settings-test", PYTHONHASHSEED="0")
    base.pop("PYTIMELY_MAX_FRAME_BYTES", None)
    base["SETTINGS_TEST_CONNECT_TIMEOUT"] = str(SHORT_DEADLINE)
    windows = {started[0]: "8M", started[1]: "64K"}
    children = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "-n", "3", "-h", str(hostfile), "-p", str(index)],
            cwd=tmp_path,
            env={**base, "PYTIMELY_SEND_WINDOW": windows[index]},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in started
    ]
    errors = []
    try:
        for child in children:
            errors.append(child.communicate(timeout=90)[1])
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [child.returncode for child in children] == [1, 1], errors
    for index, error in zip(started, errors, strict=True):
        assert "runtime.errors.SettingsMismatch: " in error, error
        message = error.rsplit("runtime.errors.SettingsMismatch: ", 1)[1]
        (other,) = set(started) - {index}
        for word in ["$PYTIMELY_SEND_WINDOW", f"process {index} ({endpoints[index]})", f"{endpoints[absent]}"]:
            assert word in message, (word, message)
        assert f"process {other} ({endpoints[other]})" in message, message
        assert f"process {absent} ({endpoints[absent]})" in message and "before the deadline" in message, message
        assert "runtime.errors.ConnectTimeout: " in error, error  # the deadline's own error, as the cause


@pytest.mark.parametrize("processes", [2, 3])
def test_execute_refuses_a_process_whose_setting_differs_with_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """One process of ``execute(main, processes=P)`` sets another send window as its ``main`` module is imported:
    the cluster ran, slowly; the launcher now raises the mismatch as a ConfigurationError, promptly."""
    monkeypatch.delenv("PYTIMELY_SEND_WINDOW", raising=False)
    monkeypatch.setenv("SETTINGS_TEST_CLAIM", str(tmp_path / "claimed"))
    monkeypatch.setenv("SETTINGS_TEST_PARENT", str(os.getpid()))
    monkeypatch.setenv("SETTINGS_TEST_VARIABLE", "PYTIMELY_SEND_WINDOW")
    monkeypatch.setenv("SETTINGS_TEST_VALUE", "64K")
    before = shm_entries()
    start = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        execute(settings_mains.exchange_epochs, processes=processes, stall_timeout=None)
    assert time.monotonic() - start < PROMPTLY
    assert (tmp_path / "claimed").exists()  # one process did take the other window
    error = caught.value
    assert isinstance(error, SettingsMismatch) and isinstance(error, ClusterError)
    message = str(error)
    for word in ["send window", "$PYTIMELY_SEND_WINDOW", "65536 bytes (64 KiB)", "8388608 bytes (8 MiB)"]:
        assert word in message, (word, message)
    assert message.count("(127.0.0.1:") >= 2, message
    assert shm_entries() <= before
