"""A bad cluster flag ends a program as argparse does: one ``PROG: error: MESSAGE`` line, status 2, no traceback.

Found by an audit: ``-n 0``, ``-w -1``, a missing or malformed hostfile, ``-p``
beyond the cluster, ``--metrics nonsense`` and the like printed a Python
traceback ending in a clear :class:`~runtime.errors.ConfigurationError`, while
``-w abc`` (argparse's own error) printed usage and ``error:`` and exited with 2.
Every flag's value is now checked before anything runs (``plan_from_args``),
and each refusal is one line on stderr with status 2.  Errors raised by the
program's own code keep their tracebacks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys
sys.path.insert(0, {root!r})
from runtime import ConfigurationError, execute_from_args


def main(worker):
    if "--fail-in-main" in sys.argv:
        raise ConfigurationError("the program's own refusal")
    return worker.index


if __name__ == "__main__":
    import os
    taken = []
    if "TAKE_METRICS_PORT_OF" in os.environ:  # the test's hook: the port is taken between the check and the run
        import socket
        from runtime import cluster
        check = cluster.check_metrics

        def check_then_take(spec, processes):
            check(spec, processes)
            port = int(spec.rpartition(":")[2]) + int(os.environ["TAKE_METRICS_PORT_OF"])
            taken.append(socket.create_server(("127.0.0.1", port)))

        cluster.check_metrics = check_then_take
    print(execute_from_args(main, connect_timeout=5))
"""


def run_program(tmp_path: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Run a program taking the cluster flags with ``argv``; its environment without a token unless ``env`` sets one."""
    program = tmp_path / "flags.py"
    program.write_text(PROGRAM.format(root=str(ROOT)))
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTIMELY_")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, str(program), *argv], capture_output=True, text=True, timeout=60, env=environment
    )


def assert_refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    """One ``flags.py: error: ...`` line holding ``message``, status 2, and no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("flags.py: error: "), done.stderr
    assert message in lines[0], done.stderr
    assert done.returncode == 2 and done.stdout == ""


def hostfile(tmp_path: Path, text: str) -> str:
    path = tmp_path / "hosts"
    path.write_text(text)
    return str(path)


CASES = {
    "no processes": (["-n", "0"], "-n/--processes must be at least 1, got 0"),
    "negative workers": (["-w", "-1"], "-w/--workers must be at least 1, got -1"),
    "workers not a number": (["-w", "abc"], "argument -w/--workers: invalid int value: 'abc'"),
    "processes without a value": (["-n"], "argument -n/--processes: expected one argument"),
    "process beyond the cluster": (["-n", "2", "-p", "5"], "-p/--process must be between 0 and 1 (with -n 2), got 5"),
    "negative process": (["-p", "-1"], "-p/--process must be between 0 and 0"),
    "hostfile without process": (["-h", "{hosts}"], "-h/--hostfile needs -p/--process"),
    "missing hostfile": (["-n", "2", "-p", "0", "-h", "{missing}"], "cannot read the hostfile: No such file"),
    "malformed hostfile line": (["-n", "2", "-p", "0", "-h", "{bad}"], "line 2: expected host:port, got 'not a line'"),
    "process beyond the hostfile": (["-n", "3", "-p", "2", "-h", "{hosts}"], "lists 2 process(es), but -n is 3"),
    "metrics nonsense": (["--metrics", "nonsense"], "--metrics 'nonsense': expected HOST:PORT"),
    "metrics port too high": (["-n", "3", "--metrics", "127.0.0.1:65535"], "above 65535"),
    "log in a missing directory": (["--log", "{missing}/run.log"], "does not exist"),
    "log to a directory": (["--log", "{tmp}"], "is a directory"),
    "log to a malformed viewer": (["--log", "tcp://"], "expected tcp://HOST:PORT"),
    "tls without its CA": (["--tls", "cert.pem", "key.pem"], "--tls CERT KEY and --tls-ca CA go together"),
    "tls files missing": (
        ["-n", "2", "--tls", "{missing}.pem", "key.pem", "--tls-ca", "ca.pem"],
        "the certificate file",
    ),
    "no token": (["-n", "2", "-p", "0"], "needs the cluster's shared token: set PYTIMELY_TOKEN or pass --token"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_flag_is_one_line_and_status_2(tmp_path: Path, case: str) -> None:
    argv, message = CASES[case]
    places = {
        "hosts": hostfile(tmp_path, "127.0.0.1:7000\n127.0.0.1:7001\n"),
        "bad": str(tmp_path / "bad"),
        "missing": str(tmp_path / "missing"),
        "tmp": str(tmp_path),
    }
    (tmp_path / "bad").write_text("127.0.0.1:7000\nnot a line\n")
    done = run_program(tmp_path, [arg.format(**places) for arg in argv])
    assert_refused(done, message)


def test_a_token_that_is_not_utf8_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = run_program(tmp_path, ["-n", "2", "-p", "0"], PYTIMELY_TOKEN="\udcffnot-utf-8")
    assert_refused(done, "must be UTF-8 text")


@pytest.mark.parametrize("processes", [1, 2])
def test_a_metrics_port_in_use_is_one_line_and_status_2(tmp_path: Path, processes: int) -> None:
    pytest.importorskip("prometheus_client")
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        first = port - processes + 1  # the last process listens at the busy port
        done = run_program(tmp_path, ["-n", str(processes), "--metrics", f"127.0.0.1:{first}"])
    who = f"process {processes - 1} " if processes > 1 else ""
    assert_refused(done, f"{who}cannot listen on 127.0.0.1:{port}: Address already in use")


@pytest.mark.parametrize("processes", [1, 2])
def test_a_metrics_port_taken_after_the_check_is_one_line_and_status_2(tmp_path: Path, processes: int) -> None:
    """The program's hook takes the last process's port once the flags are checked: the run then cannot listen
    there (in this process, or in the child the launcher started for it), and ends as the check would have."""
    pytest.importorskip("prometheus_client")
    first = free_ports(processes, consecutive=True)[0]
    port = first + processes - 1
    done = run_program(
        tmp_path,
        ["-n", str(processes), "--metrics", f"127.0.0.1:{first}"],
        TAKE_METRICS_PORT_OF=str(processes - 1),
    )
    who = f"process {processes - 1} " if processes > 1 else ""
    assert_refused(done, f"{who}cannot listen on 127.0.0.1:{port}: Address already in use; stop what listens there")


def test_good_flags_run(tmp_path: Path) -> None:
    done = run_program(tmp_path, ["-w", "2", "--log", str(tmp_path / "run.log")])
    assert done.returncode == 0 and done.stdout.strip() == "[0, 1]", done.stderr
    assert (tmp_path / "run.log").exists()


def test_an_error_of_the_programs_own_code_keeps_its_traceback(tmp_path: Path) -> None:
    done = run_program(tmp_path, ["-w", "2", "--fail-in-main"])
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "the program's own refusal" in done.stderr, done.stderr
    assert "flags.py: error:" not in done.stderr


def test_an_example_with_flags_of_its_own_refuses_a_bad_cluster_flag_alike() -> None:
    """examples/hello.py parses its own flags with cluster_arguments() as a parent, then calls execute_from_args."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "hello.py"), "-n", "2", "-p", "0", "-h", "no-such-hostfile"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr and done.returncode == 2, done.stderr
    assert (
        done.stderr
        == "hello.py: error: -h/--hostfile no-such-hostfile: cannot read the hostfile: No such file or directory\n"
    )
