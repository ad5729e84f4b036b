"""Start and stop a local Spark standalone cluster (a master and workers) on loopback, for trying a real cluster.

pip's pyspark ships ``sbin/spark-daemon.sh`` but not ``start-master.sh`` or
``start-worker.sh``, so this module starts the ``Master`` and ``Worker``
classes with ``spark-daemon.sh`` itself::

    python -m runtime.spark.standalone start --workers 2 --cores 1   # prints spark://127.0.0.1:PORT
    python -m runtime.spark.standalone status
    python -m runtime.spark.standalone stop

Everything binds to ``127.0.0.1`` (``SPARK_LOCAL_IP``); every executor runs
this interpreter (``PYSPARK_PYTHON``), so it imports the same pytimely.  The
daemons' pid files, logs, the executors' working directories and the
cluster's ports live in ``--dir``: by default
``$TMPDIR/pytimely-spark-$USER-HASH``, where ``HASH`` is taken from the
current directory, so ``stop`` run where ``start`` ran finds this cluster and
never another session's (two clusters from one directory need two ``--dir``).
Each worker offers ``--memory`` (default :data:`DEFAULT_MEMORY`) to
executors, not Spark's default of all the machine's memory but 1 GB.
``start`` waits until every worker has registered with the master (up to
``--timeout`` seconds) and fails, showing the end of the logs, if they do
not.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from runtime.spark.errors import SparkSetupError

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
DEFAULT_MEMORY = "1g"
"""Memory each worker offers its executors: one executor of Spark's default ``spark.executor.memory``."""


@dataclass(frozen=True)
class Cluster:
    """A running local standalone cluster."""

    master: str
    """Its URL, ``spark://127.0.0.1:PORT``, for ``spark_session(master)`` or ``--master``."""
    web_ui: str
    """The master's web UI (``http://127.0.0.1:PORT``); ``/json/`` lists the workers."""
    workers: int
    cores: int
    directory: str
    """Where the pid files, the logs and ``cluster.json`` are."""


def default_directory() -> Path:
    """``$TMPDIR/pytimely-spark-$USER-HASH``, ``HASH`` from the current directory: one per checkout or session."""
    here = hashlib.sha256(str(Path.cwd().resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"pytimely-spark-{getpass.getuser()}-{here}"


def spark_home() -> Path:
    """The pyspark installation, which holds ``sbin/spark-daemon.sh`` and Spark's jars."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "sbin" / "spark-daemon.sh").exists():
        raise SparkSetupError(f"{home} has no sbin/spark-daemon.sh: install pyspark with pip (pytimely[spark])")
    return home


PORTS = (20000, 32767)
"""The daemons' ports are drawn from here: below Linux's ephemeral range (32768-60999), from which the kernel gives
every bind to port 0 and every outgoing connection a port. A free port found there (by binding port 0) is bound
by a JVM only seconds later, and any program on the machine could be given it in between: the master would then
move to the next port, and ``start`` wait for workers that never find it."""


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports of :data:`PORTS` free on :data:`HOST` now (probed all at once, then released)."""
    for _ in range(200):
        drawn = random.sample(range(PORTS[0], PORTS[1] + 1), count)
        probes: list[socket.socket] = []
        try:
            for port in drawn:
                probes.append(socket.socket())
                probes[-1].bind((HOST, port))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return drawn
    raise SparkSetupError(f"no {count} free ports found in {PORTS[0]}-{PORTS[1]} on {HOST}")


def _environment(directory: Path) -> dict[str, str]:
    home = spark_home()
    inherited = {key: value for key, value in os.environ.items() if key != "SPARK_NO_DAEMONIZE"}
    return {
        **inherited,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(directory / "logs"),
        "SPARK_PID_DIR": str(directory / "pids"),
        "SPARK_WORKER_DIR": str(directory / "work"),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
    }


def _daemon(action: str, cls: str, instance: int, args: list[str], directory: Path) -> None:
    command = [str(spark_home() / "sbin" / "spark-daemon.sh"), action, cls, str(instance), *args]
    done = subprocess.run(command, env=_environment(directory), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SparkSetupError(f"{' '.join(command)} failed ({done.returncode}): {(done.stderr or done.stdout)[-800:]}")


def _registered(web_ui: str) -> int:
    """Workers alive according to the master's JSON page (0 while the master is not up)."""
    try:
        with urllib.request.urlopen(f"{web_ui}/json/", timeout=2) as page:
            state = json.load(page)
    except (OSError, ValueError, RecursionError):
        return 0
    workers = state.get("workers") if isinstance(state, dict) else None  # whatever answers on the port
    if not isinstance(workers, list):
        return 0
    return sum(1 for worker in workers if isinstance(worker, dict) and worker.get("state") == "ALIVE")


def _logs(directory: Path) -> str:
    tails = []
    for log in sorted((directory / "logs").glob("*.out")):
        tails.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    return "\n".join(tails)


def start(
    workers: int = 2,
    cores: int = 1,
    memory: str = DEFAULT_MEMORY,
    directory: Path | None = None,
    timeout: float = 90.0,
) -> Cluster:
    """Start a master and ``workers`` workers of ``cores`` cores on loopback; wait until all have registered."""
    directory = Path(directory or default_directory())
    if (directory / STATE_FILE).exists():
        raise SparkSetupError(
            f"a cluster started from {directory} may still run: stop it first (stop --dir {directory})"
        )
    directory.mkdir(parents=True, exist_ok=True)
    port, ui_port, *worker_ui_ports = _free_ports(2 + max(workers, 0))
    cluster = Cluster(f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}", workers, cores, str(directory))
    (directory / STATE_FILE).write_text(json.dumps(asdict(cluster)))
    try:
        master_args = ["--host", HOST, "--port", str(port), "--webui-port", str(ui_port)]
        _daemon("start", MASTER_CLASS, 1, master_args, directory)
        for instance in range(1, workers + 1):
            ui = str(worker_ui_ports[instance - 1])
            args = ["--host", HOST, "--cores", str(cores), "--memory", memory, "--webui-port", ui]
            _daemon("start", WORKER_CLASS, instance, [*args, cluster.master], directory)
        deadline = time.monotonic() + timeout
        while _registered(cluster.web_ui) < workers:
            if time.monotonic() > deadline:
                raise SparkSetupError(
                    f"the standalone cluster at {cluster.master} did not register {workers} worker(s) within "
                    f"{timeout:.0f} s; the logs in {directory / 'logs'} end with:\n{_logs(directory)}"
                )
            time.sleep(0.5)
    except BaseException:
        stop(directory)
        raise
    return cluster


def status(directory: Path | None = None) -> Cluster | None:
    """The cluster started from ``directory``, or ``None``.

    Raises :class:`SparkSetupError` naming the state file if it is damaged
    (not the JSON :func:`start` writes); ``stop`` still stops that cluster.
    """
    directory = Path(directory or default_directory())
    state = directory / STATE_FILE
    if not state.exists():
        return None
    try:
        with open(state, "rb") as file:
            data = file.read(MAX_STATE_BYTES + 1)
        if len(data) > MAX_STATE_BYTES:
            raise ValueError(f"larger than {MAX_STATE_BYTES} bytes")
        fields = json.loads(data.decode("utf-8"))
        cluster = Cluster(**fields)
        if not all(isinstance(getattr(cluster, name), kind) for name, kind in _STATE_TYPES.items()):
            raise TypeError("a field has the wrong type")
    except (OSError, ValueError, TypeError, RecursionError) as error:
        raise SparkSetupError(
            f"{state} is damaged ({type(error).__name__}: {error}); stop the cluster with "
            f"`python -m runtime.spark.standalone stop --dir {directory}`, which also removes the file"
        ) from None
    return cluster


MAX_STATE_BYTES = 1 << 16
"""The largest state file :func:`status` reads (one is some 200 bytes)."""
_STATE_TYPES = {"master": str, "web_ui": str, "workers": int, "cores": int, "directory": str}


def _worker_instances(directory: Path) -> int:
    """The highest worker instance with a pid file in ``directory`` (0: none): for a damaged state file."""
    marker = f"-{WORKER_CLASS}-"
    found = [0]
    for pid_file in (directory / "pids").glob("*.pid"):
        suffix = pid_file.stem.rpartition(marker)[2] if marker in pid_file.stem else ""
        if suffix.isascii() and suffix.isdigit() and len(suffix) < 6:
            found.append(int(suffix))
    return max(found)


def stop(directory: Path | None = None, timeout: float = 30.0) -> None:
    """Stop every daemon started from ``directory`` (killing any that outlive ``timeout`` seconds).

    With a damaged state file the workers to stop are found from their pid files.
    """
    directory = Path(directory or default_directory())
    try:
        cluster = status(directory)
    except SparkSetupError:
        cluster = None
    instances = cluster.workers if cluster else _worker_instances(directory)
    pids = []  # read first: spark-daemon.sh removes the pid files as it sends TERM
    for pid_file in (directory / "pids").glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(pid_file.read_text().strip()))
    for cls, instance in [(WORKER_CLASS, i) for i in range(1, instances + 1)] + [(MASTER_CLASS, 1)]:
        with contextlib.suppress(SparkSetupError, subprocess.TimeoutExpired):
            _daemon("stop", cls, instance, [], directory)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for pid_file in (directory / "pids").glob("*.pid"):
        pid_file.unlink(missing_ok=True)
    (directory / STATE_FILE).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def running(
    workers: int = 2, cores: int = 1, memory: str = DEFAULT_MEMORY, directory: Path | None = None
) -> Iterator[Cluster]:
    """A cluster for the duration of a ``with`` block, stopped at its end whatever happens."""
    cluster = start(workers, cores, memory, directory)
    try:
        yield cluster
    finally:
        stop(Path(cluster.directory))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--workers", type=int, default=2, help="worker daemons (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker = task slots (default 1)")
    parser.add_argument("--memory", default=DEFAULT_MEMORY, help=f"memory per worker (default {DEFAULT_MEMORY})")
    parser.add_argument("--dir", type=Path, default=None, help=f"state directory (default {default_directory()})")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for the workers (default 90)")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            cluster = start(args.workers, args.cores, args.memory, args.dir, args.timeout)
            print(cluster.master)
            print(
                f"web UI {cluster.web_ui}; {cluster.workers} worker(s) x {cluster.cores} core(s); state in "
                f"{cluster.directory}",
                file=sys.stderr,
            )
        elif args.action == "stop":
            stop(args.dir)
        else:
            found = status(args.dir)
            print(found.master if found else "no cluster")
            return 0 if found else 1
    except SparkSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
