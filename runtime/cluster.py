"""Clusters of processes: ``execute(main, processes=P)``, ``execute_from_args``, and the process entry.

Every process of a cluster runs :func:`run_process`: it joins the TCP mesh
(:mod:`runtime.tcp`), runs its workers on a
:class:`~runtime.process_fabric.ProcessFabric`, and, once they finish, says
goodbye to every other process.  Two ways lead there:

* **On this machine** (:func:`execute_processes`, used by ``execute(main,
  processes=P)`` and by ``execute_from_args`` with ``-n P`` and no ``-p``):
  this process binds one loopback listening socket per process, picks a
  random token and a common ``PYTHONHASHSEED``, and starts ``P`` Python
  processes.  Each receives its listening socket and a result pipe as
  inherited file descriptors, and its job (how to import ``main``, its
  arguments, the cluster's addresses and token) on standard input, so that the
  token never appears on a command line.  Each child dies with its parent
  (``PR_SET_PDEATHSIG`` on Linux, and a check of its parent's pid at every
  heartbeat), and reports its workers' results or its failure on the pipe.
  Ctrl-C in this process stops the children (SIGTERM, then SIGKILL after a
  grace period); the children ignore SIGINT themselves.
* **Across hosts** (``execute_from_args`` with ``-p``): this process is one
  process of a cluster whose other processes were started separately with the
  same flags; they find each other through the hostfile.

Nothing is pickled: ``main``'s arguments and the workers' results travel in the
wire encoding (:mod:`runtime.wire`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from runtime.communication import Stop
from runtime.errors import ConfigurationError, DataflowStuck, WorkerFailed
from runtime.execute import INTERRUPT_GRACE, run_workers
from runtime.instrument import configure_from, logging_active, stop_logging
from runtime.main_guard import importing_main, refuse_unguarded_call, refuse_while_importing_main
from runtime.metrics import METRICS_VARIABLE, parse_address, serve_from_environment
from runtime.process_fabric import ProcessFabric, decode_results
from runtime.tcp import ClusterError, ClusterStopped, Endpoint, Mesh, PeerLost, read_hostfile
from runtime.wire import EncodingError, FrameReader, decode_value, encode_value, frame
from runtime.worker import Worker

R = TypeVar("R")

DEFAULT_PORT = 2101
"""Process ``i`` of a cluster without a hostfile listens at ``127.0.0.1:2101+i``."""
CONNECT_TIMEOUT = 30.0
"""Seconds the processes of a cluster have to find each other."""
TOKEN_VARIABLE = "PYTIMELY_TOKEN"
"""The environment variable that holds a cluster's shared token."""

LOG_VARIABLE = "PYTIMELY_LOG"
"""The environment variable that turns instrumentation on, as ``--log`` does (see :mod:`runtime.instrument`)."""
LOST_GRACE = 10.0
"""Seconds the other children get to stop by themselves after one failed and reported why, before they are killed."""
SILENT_DEATH_GRACE = 2.0
"""Seconds the other children get to stop by themselves after one died without reporting, before they are killed."""
ANSWER_GRACE = 1.0
"""Seconds a child another one reported as silent gets to end by itself before the launcher kills it."""
SUSPENDED_LIMIT = 3.0
"""Seconds a child may stay suspended (SIGSTOP: state ``T``, not a debugger's ``t``) before it counts as lost."""

_CHILD_CODE = "from runtime.cluster import child_main; child_main()"
_PR_SET_PDEATHSIG = 1


# ---------------------------------------------------------------------- flags


@dataclass(frozen=True)
class ClusterConfig:
    """timely's cluster flags: workers per process, processes, this process, hostfile, token."""

    workers: int = 1
    processes: int = 1
    process: int | None = None
    hostfile: str | None = None
    token: str | None = None
    log: str | None = None
    metrics: str | None = None


def cluster_arguments() -> argparse.ArgumentParser:
    """A parser of the cluster flags only (``add_help=False``: ``-h`` is the hostfile, as in timely)."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("cluster (timely's flags)")
    group.add_argument("-w", "--workers", type=int, default=1, help="worker threads per process (default 1)")
    group.add_argument("-n", "--processes", type=int, default=1, help="number of processes (default 1)")
    group.add_argument(
        "-p", "--process", type=int, default=None, help="run as this process of a cluster started separately"
    )
    group.add_argument("-h", "--hostfile", default=None, help="file with one host:port line per process")
    group.add_argument("--token", default=None, help=f"the cluster's shared secret (default: ${TOKEN_VARIABLE})")
    group.add_argument(
        "--log",
        default=None,
        help=f"instrumentation events to FILE (one file per process) or tcp://HOST:PORT (default: ${LOG_VARIABLE})",
    )
    group.add_argument(
        "--metrics",
        default=None,
        metavar="HOST:PORT",
        help=f"serve Prometheus /metrics at HOST:PORT, process P at PORT+P (default: ${METRICS_VARIABLE})",
    )
    return parser


def parse_cluster_args(argv: Sequence[str] | None = None) -> tuple[ClusterConfig, list[str]]:
    """Parse the cluster flags in ``argv`` (default ``sys.argv[1:]``); return them and the other arguments."""
    args, rest = cluster_arguments().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    config = ClusterConfig(
        args.workers, args.processes, args.process, args.hostfile, args.token, args.log, args.metrics
    )
    if config.workers < 1:
        raise ConfigurationError(f"-w/--workers must be at least 1, got {config.workers}")
    if config.processes < 1:
        raise ConfigurationError(f"-n/--processes must be at least 1, got {config.processes}")
    if config.process is not None and not 0 <= config.process < config.processes:
        raise ConfigurationError(
            f"-p/--process must be between 0 and {config.processes - 1} (with -n {config.processes}), "
            f"got {config.process}"
        )
    if config.hostfile is not None and config.process is None:
        raise ConfigurationError("-h/--hostfile needs -p/--process: which line of the hostfile is this process?")
    return config, rest


def endpoints_for(config: ClusterConfig) -> list[Endpoint]:
    """The addresses of the cluster's processes: the hostfile's first lines, or ``127.0.0.1:2101+i``."""
    if config.hostfile is None:
        return [Endpoint("127.0.0.1", DEFAULT_PORT + i) for i in range(config.processes)]
    try:
        endpoints = read_hostfile(config.hostfile)
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read the hostfile: {error}") from error
    if len(endpoints) < config.processes:
        raise ConfigurationError(
            f"the hostfile {config.hostfile} lists {len(endpoints)} process(es), but -n is {config.processes}"
        )
    return endpoints[: config.processes]


def execute_from_args(
    main: Callable[[Worker], R],
    argv: Sequence[str] | None = None,
    stall_timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> list[R]:
    """Run ``main`` as timely's command-line flags in ``argv`` say; return every worker's result in order.

    Flags (other arguments are ignored, so that a program can parse its own):
    ``-w/--workers W`` worker threads per process; ``-n/--processes P``;
    ``-p/--process I``: run as process ``I`` of a cluster whose other processes
    are started separately (on this or other hosts) with the same flags;
    ``-h/--hostfile FILE``: one ``host:port`` per line, process ``i`` listens at
    line ``i`` (default ``127.0.0.1:2101+i``); ``--token T``: the cluster's shared
    secret, else ``$PYTIMELY_TOKEN`` (required with ``-p`` and several processes).

    Without ``-p``, ``-n P`` starts ``P`` processes on this machine, as
    ``execute(main, processes=P, workers=W)`` does (``main`` must then be
    importable; see :func:`execute_processes`).  With ``-p``, every process
    returns the results of all workers, which travel to every process in the
    wire encoding; processes started separately must hash strings alike, so
    set ``PYTHONHASHSEED`` to the same value everywhere (the handshake checks).
    """
    refuse_while_importing_main("execute_from_args(main)")
    config, _ = parse_cluster_args(argv)
    if config.log is not None:  # every process of the cluster reads it, from the flag or from here
        os.environ[LOG_VARIABLE] = config.log
    if config.metrics is not None:
        parse_address(config.metrics)  # a malformed address fails here, before any process starts
        os.environ[METRICS_VARIABLE] = config.metrics
    if config.processes == 1:
        from runtime.execute import execute

        configured = None if logging_active() else configure_from(os.environ.get(LOG_VARIABLE))
        metrics = serve_from_environment()
        try:
            return execute(main, workers=config.workers, stall_timeout=stall_timeout)
        finally:
            if metrics is not None:
                metrics.close()
            if configured is not None:
                stop_logging()
    if config.process is None:
        return execute_processes(main, config.processes, config.workers, stall_timeout, connect_timeout)
    token = config.token or os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise ConfigurationError(
            f"process {config.process} of a cluster started separately needs the cluster's shared token: "
            f"set {TOKEN_VARIABLE} or pass --token, with the same value in every process"
        )
    return run_process(
        main, config.process, endpoints_for(config), config.workers, token, stall_timeout, connect_timeout
    )


# ---------------------------------------------------------------------- one process of a cluster


def run_process(
    main: Callable[[Worker], R],
    process: int,
    endpoints: list[Endpoint],
    workers: int,
    token: str,
    stall_timeout: float | None,
    connect_timeout: float = CONNECT_TIMEOUT,
    listener: socket.socket | None = None,
    gather: bool = True,
    on_fabric: Callable[[ProcessFabric], None] | None = None,
) -> list[R]:
    """Run process ``process`` of the cluster at ``endpoints``: join the mesh, run ``W`` workers, finish.

    Returns every worker's result in worker order if ``gather`` (results travel
    to every process), else only this process's workers' results.  Raises
    :class:`~runtime.errors.WorkerFailed` when a worker of any process failed
    or the dataflows are stuck, :class:`~runtime.tcp.PeerLost` when a process
    vanished, :class:`~runtime.tcp.ClusterError` when the cluster cannot form.
    """
    processes = len(endpoints)
    configured = None if logging_active() else configure_from(os.environ.get(LOG_VARIABLE), process, processes)
    metrics = serve_from_environment(process)
    try:
        return _run_process(
            main, process, endpoints, workers, token, stall_timeout, connect_timeout, listener, gather, on_fabric
        )
    finally:
        if metrics is not None:
            metrics.close()
        if configured is not None:
            stop_logging()


def _run_process(
    main: Callable[[Worker], R],
    process: int,
    endpoints: list[Endpoint],
    workers: int,
    token: str,
    stall_timeout: float | None,
    connect_timeout: float,
    listener: socket.socket | None,
    gather: bool,
    on_fabric: Callable[[ProcessFabric], None] | None,
) -> list[R]:
    processes = len(endpoints)
    holder: list[ProcessFabric] = []
    mesh = Mesh(
        process,
        endpoints,
        token,
        on_frame=lambda peer, header, payload: holder[0].on_frame(peer, header, payload),
        on_lost=lambda error: holder[0].on_lost(error),
        listener=listener,
    )
    fabric = ProcessFabric(process, processes, workers, mesh)
    holder.append(fabric)
    if on_fabric is not None:
        on_fabric(fabric)
    try:
        mesh.connect(connect_timeout)
        fabric.start_heartbeats()
        try:
            results = run_workers(main, fabric.communicators(), stall_timeout)
        except WorkerFailed as error:
            reason = fabric.stop_reason
            if error.__cause__ is None and reason is not None:  # stopped from elsewhere: say how
                raise _stopped(fabric, reason) from None
            raise
        if fabric.stop_reason is not None:
            raise _stopped(fabric, fabric.stop_reason)
        payload = b""
        if gather:
            try:
                payload = encode_value(results)
            except EncodingError as error:
                raise EncodingError(
                    f"the results of process {process}'s workers must travel to the other processes: {error}",
                    error.type_name,
                ) from None
        fabric.say_goodbye(payload)
        fabric.wait_for_goodbyes()
        if fabric.stop_reason is not None:
            raise _stopped(fabric, fabric.stop_reason)
        if not gather:
            return results
        everything: list[Any] = []
        for peer in range(processes):
            everything.extend(results if peer == process else decode_results(fabric.byes[peer]))
        return everything
    except BaseException as error:
        if fabric.stop_reason is None and not isinstance(error, SystemExit):
            fabric.stop(Stop("failed", None, f"process {process} ({endpoints[process]}) failed: {error}"))
        raise
    finally:
        fabric.stop_heartbeats()
        mesh.close()


def _stopped(fabric: ProcessFabric, reason: Stop) -> BaseException:
    """The error for workers stopped by ``reason`` (which arose in this or another process)."""
    if reason.kind == "lost":
        if fabric.lost is not None:
            return fabric.lost
        return ClusterStopped(f"process {fabric.process} stopped because {reason.describe()}")
    if reason.kind == "failed" and reason.worker is not None:
        return WorkerFailed(
            f"process {fabric.process} stopped because {fabric.describe_worker(reason.worker)} failed: {reason.detail}",
            reason.worker,
        )
    if reason.kind == "stalled":
        who = fabric.describe_worker(reason.worker) if reason.worker is not None else "a worker"
        stuck = DataflowStuck(f"{who} found that no worker of the cluster can make progress")
        failed = WorkerFailed(f"process {fabric.process} stopped: DataflowStuck: {stuck}", reason.worker or 0)
        failed.__cause__ = stuck
        return failed
    return ClusterStopped(f"process {fabric.process} stopped because {reason.describe()}")


# ---------------------------------------------------------------------- importing main in a child


def describe_main(main: Callable[..., Any]) -> dict[str, Any]:
    """How a child process imports ``main``: module, file, qualified name, and encoded arguments.

    ``main`` must be a function defined at the top level of a module, or a
    ``functools.partial`` of one whose arguments the wire encoding carries.
    """
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    function: Any = main
    if isinstance(main, functools.partial):
        function, args, kwargs = main.func, main.args, dict(main.keywords)
    name = getattr(function, "__qualname__", None)
    module_name = getattr(function, "__module__", None)
    advice = (
        "execute(..., processes=P) starts new Python processes that import main by name, so main must be "
        "a function defined at the top level of a module (not a lambda, a nested function or a method). "
        "Pass arguments with functools.partial(function, arg, ...); they travel in the wire encoding."
    )
    if not isinstance(function, types.FunctionType) or not name or not module_name or "<" in name:
        raise ConfigurationError(f"{advice} Got {main!r}.")
    module = sys.modules.get(module_name)
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    if found is not function:
        raise ConfigurationError(f"{advice} {module_name}.{name} does not name {main!r}.")
    file = getattr(module, "__file__", None)
    if module_name == "__main__" and not file:
        raise ConfigurationError(f"{advice} The __main__ module has no file to import it from.")
    try:
        encoded = encode_value([list(args), kwargs])
    except EncodingError as error:
        raise ConfigurationError(f"the arguments of main must travel to the new processes: {error}") from None
    return {"module": module_name, "file": file, "name": name, "args": encoded}


def load_main(spec: dict[str, Any]) -> Callable[[Worker], Any]:
    """Import the function :func:`describe_main` described, with its arguments bound."""
    module_name, file, name = spec["module"], spec["file"], spec["name"]
    if module_name == "__main__":
        module = _load_file("__mp_main__", file)
        sys.modules["__main__"] = module
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            if not file:
                raise
            module = _load_file(module_name, file)
    function: Any = module
    for part in name.split("."):
        function = getattr(function, part)
    args, kwargs = decode_value(spec["args"])
    if args or kwargs:
        return functools.partial(function, *args, **kwargs)
    return function


def _load_file(module_name: str, file: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file} as {module_name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- processes on this machine


@dataclass
class _Child:
    index: int
    endpoint: Endpoint
    popen: subprocess.Popen[bytes]
    outcome: list[Any] | None = None
    reader: threading.Thread | None = None
    ended_at: float | None = None
    """When the launcher saw it exit (``time.monotonic``)."""
    killed_by_launcher: bool = False
    """Whether the launcher signalled it (so its end is a consequence, not a cause)."""
    unanswering: str | None = None
    """Why the launcher killed it as a process that stopped answering, if it did."""
    suspended_since: float | None = None
    """Since when the launcher has seen it suspended without a break (``time.monotonic``)."""
    looked_at: float = 0.0


def execute_processes(
    main: Callable[[Worker], R],
    processes: int,
    workers: int = 1,
    stall_timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> list[R]:
    """Run ``main`` in ``processes`` new processes of ``workers`` worker threads; return every result in order.

    Worker ``process * workers + i`` is thread ``i`` of process ``process``.
    ``main`` must be importable by the new processes (a top-level function, or
    a ``functools.partial`` of one with wire-encodable arguments), and its
    results travel back in the wire encoding, so they must be encodable too.
    Raises :class:`~runtime.errors.WorkerFailed` for a failed worker (with the
    remote traceback as a note) or stuck dataflows, and
    :class:`~runtime.tcp.PeerLost` when a process died.
    """
    if processes.__class__ is not int or processes < 1:
        raise ConfigurationError(f"execute needs processes >= 1 (an int), got {processes!r}")
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"execute needs workers >= 1 (an int), got {workers!r}")
    refuse_while_importing_main(f"execute(..., processes={processes})")
    spec = describe_main(main)
    refuse_unguarded_call(spec["module"], f"execute(..., processes={processes})")
    token = secrets.token_hex(16)
    seed = os.environ.get("PYTHONHASHSEED", "")
    if not seed.isdigit():
        seed = str(secrets.randbelow(2**32 - 1) + 1)
    env = dict(os.environ, PYTHONHASHSEED=seed)
    env.pop(TOKEN_VARIABLE, None)
    # the children must import this very runtime package, wherever the current directory is
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(processes)]
    endpoints = [Endpoint("127.0.0.1", listener.getsockname()[1]) for listener in listeners]
    children: list[_Child] = []
    try:
        for index, listener in enumerate(listeners):
            children.append(
                _spawn(index, listener, endpoints, workers, token, spec, stall_timeout, connect_timeout, env)
            )
            listener.close()
        _wait(children)
    except KeyboardInterrupt:
        _terminate(children, INTERRUPT_GRACE)
        print(f"pytimely: interrupted (Ctrl-C); stopped {processes} process(es)", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    finally:
        for listener in listeners:
            listener.close()
        _terminate(children, 0.0)
    return _collect(children, workers)


def _spawn(
    index: int,
    listener: socket.socket,
    endpoints: list[Endpoint],
    workers: int,
    token: str,
    spec: dict[str, Any],
    stall_timeout: float | None,
    connect_timeout: float,
    env: dict[str, str],
) -> _Child:
    read_fd, write_fd = os.pipe()
    try:
        popen = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE],
            stdin=subprocess.PIPE,
            pass_fds=(listener.fileno(), write_fd),
            env=env,
        )
    finally:
        os.close(write_fd)
    job = {
        "main": spec,
        "process": index,
        "workers": workers,
        "endpoints": [[endpoint.host, endpoint.port] for endpoint in endpoints],
        "token": token,
        "stall_timeout": stall_timeout,
        "connect_timeout": connect_timeout,
        "listener_fd": listener.fileno(),
        "result_fd": write_fd,
        "parent": os.getpid(),
        "path": [entry for entry in sys.path if entry],
        "cwd": os.getcwd(),
        "argv": list(sys.argv),
    }
    child = _Child(index, endpoints[index], popen)
    child.reader = threading.Thread(
        target=_read_outcome, args=(child, read_fd), name=f"timely-child-{index}", daemon=True
    )
    child.reader.start()
    assert popen.stdin is not None
    try:
        popen.stdin.write(frame([job]))
        popen.stdin.close()
    except OSError:
        pass  # the child died at once; its exit status tells why
    return child


def _read_outcome(child: _Child, fd: int) -> None:
    reader = FrameReader()
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            data = pipe.read(1 << 16)
            if not data:
                return
            for header, _ in reader.feed(data):
                child.outcome = header


def _wait(children: list[_Child]) -> None:
    """Wait until every child exited; after a fault, stop the rest promptly, noting which ended on their own.

    A child that dies without reporting, or reports an error of its own (it
    could not run), leaves the others :data:`SILENT_DEATH_GRACE` seconds to
    stop by themselves; one whose worker failed leaves them :data:`LOST_GRACE`.
    A child that another reports as silent, or that stays suspended for
    :data:`SUSPENDED_LIMIT` seconds, has stopped answering: the launcher kills
    it and remembers why, so that the error names it truthfully.
    """
    fault_at: float | None = None
    grace = LOST_GRACE
    next_look = 0.0
    while True:
        now = time.monotonic()
        for child in children:
            if child.ended_at is not None or child.popen.poll() is None:
                continue
            child.ended_at = now
            outcome = _outcome(child)
            if child.popen.returncode == 0 and outcome is not None:
                continue
            fault_at = now if fault_at is None else fault_at
            silent = outcome is None and (not child.killed_by_launcher or child.unanswering is not None)
            if silent or (outcome is not None and outcome[0] == "error"):  # the cluster cannot finish
                grace = min(grace, SILENT_DEATH_GRACE)
            elif outcome is not None and outcome[0] == "lost" and len(outcome) > 2:
                _kill_if_unanswering(children, outcome[2], f"process {child.index} reported: {outcome[1]}")
        running = [child for child in children if child.ended_at is None]
        if not running:
            break
        if now >= next_look:
            next_look = now + 0.25
            for child in running:
                _watch_suspension(child, now)
        if fault_at is not None and now - fault_at > grace:
            for child in running:
                child.killed_by_launcher = True
            _terminate(running, 1.0)
            break
        time.sleep(0.02)
    for child in children:
        if child.reader is not None:
            child.reader.join(timeout=5.0)


def _process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``R``, ``S``, ``T``, ...) on Linux, else None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            return file.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _watch_suspension(child: _Child, now: float) -> None:
    """Kill ``child`` as lost once it has been suspended (SIGSTOP) for :data:`SUSPENDED_LIMIT` seconds."""
    watched = now - child.looked_at < 1.0  # else the launcher itself was suspended (Ctrl-Z) meanwhile
    child.looked_at = now
    if _process_state(child.popen.pid) != "T":
        child.suspended_since = None
        return
    if child.suspended_since is None or not watched:
        child.suspended_since = now
    elif now - child.suspended_since >= SUSPENDED_LIMIT:
        seconds = now - child.suspended_since
        _kill_unanswering(child, f"it was suspended (state T: SIGSTOP) for {seconds:.1f} s")


def _kill_if_unanswering(children: list[_Child], accused: Any, accusation: str) -> None:
    """Another child lost ``accused``: if it is still running after :data:`ANSWER_GRACE`, it stopped answering."""
    if accused.__class__ is not int or not 0 <= accused < len(children):
        return
    child = children[accused]
    try:
        child.popen.wait(timeout=ANSWER_GRACE)
    except subprocess.TimeoutExpired:
        _kill_unanswering(child, accusation)


def _kill_unanswering(child: _Child, why: str) -> None:
    state = _process_state(child.popen.pid)
    if state in ("T", "t") and "suspended" not in why:
        why += "; it was suspended (state T: SIGSTOP)" if state == "T" else "; it was stopped by a debugger"
    child.unanswering = why
    child.killed_by_launcher = True
    with contextlib.suppress(OSError):
        child.popen.kill()
    child.popen.wait()


def _outcome(child: _Child) -> list[Any] | None:
    if child.outcome is None and child.reader is not None and child.popen.poll() is not None:
        child.reader.join(timeout=1.0)
    return child.outcome


def _terminate(children: list[_Child], grace: float) -> None:
    """SIGTERM every running child, wait up to ``grace`` seconds, then SIGKILL what remains."""
    running = [child for child in children if child.popen.poll() is None]
    for child in running:
        with contextlib.suppress(OSError):
            child.popen.send_signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
    deadline = time.monotonic() + grace
    for child in running:
        try:
            child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()


def _how_it_ended(child: _Child) -> str:
    """How ``child`` ended, in words: who stopped it and by which signal or status."""
    code = child.popen.returncode
    if code is not None and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with status {code} without reporting"
    if child.unanswering is not None:
        return f"stopped answering ({child.unanswering}); the launcher then killed it ({how})"
    if child.killed_by_launcher:
        return f"was stopped by the launcher after another process failed ({how})"
    return f"was {how}" if code is not None and code < 0 else how


def _lost(child: _Child) -> PeerLost:
    return PeerLost(
        f"process {child.index} ({child.endpoint}, pid {child.popen.pid}) {_how_it_ended(child)}",
        child.index,
        str(child.endpoint),
    )


def _collect(children: list[_Child], workers: int) -> list[Any]:
    """Every worker's result, or the error that best explains why there are none.

    Causes come before consequences: a worker's failure, then a child's own
    error, then a child that died by itself without reporting, then one that
    stopped answering; children the launcher stopped after a fault are named
    only if nothing else explains it.
    """
    peers = len(children) * workers
    outcomes = [(child, _outcome(child)) for child in children]
    by_kind: dict[str, list[tuple[_Child, list[Any]]]] = {}
    for child, outcome in outcomes:
        if outcome is not None:
            by_kind.setdefault(outcome[0], []).append((child, outcome))
    for child, outcome in by_kind.get("failed", []):
        _, worker, message, remote = outcome
        failed = WorkerFailed(f"{message} [process {child.index}, pid {child.popen.pid}]", worker)
        failed.add_note(f"traceback in process {child.index}:\n{remote}")
        raise failed
    for child, outcome in by_kind.get("error", []):
        error = ClusterError(f"process {child.index} ({child.endpoint}) failed: {outcome[1]}")
        error.add_note(f"traceback in process {child.index}:\n{outcome[2]}")
        raise error
    for child, outcome in outcomes:
        if outcome is None and not child.killed_by_launcher:
            raise _lost(child)
    for child, _ in outcomes:
        if child.unanswering is not None:
            raise _lost(child)
    stuck = by_kind.get("stuck", [])
    if stuck:
        explanation = "\n".join(outcome[2] for _, outcome in stuck)
        cause = DataflowStuck(
            f"no worker can make progress (every worker is waiting and no message is in flight):\n{explanation}"
        )
        worker = stuck[0][1][1]
        failed = WorkerFailed(f"worker {worker} of {peers} failed: DataflowStuck: {cause}", worker)
        failed.__cause__ = cause
        raise failed
    for kind in ("lost", "stopped", "interrupted"):
        for child, outcome in by_kind.get(kind, []):
            raise ClusterError(f"process {child.index} ({child.endpoint}): {outcome[1]}")
    for child, outcome in outcomes:
        if outcome is None:
            raise _lost(child)
    results: list[Any] = []
    for _, outcome in outcomes:
        assert outcome is not None
        results.extend(outcome[1])
    return results


# ---------------------------------------------------------------------- the child's side


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def _read_job() -> dict[str, Any]:
    reader = FrameReader()
    data = sys.stdin.buffer.read()
    frames = list(reader.feed(data))
    if len(frames) != 1:
        raise ClusterError("a child process must receive exactly one job on its standard input")
    job = frames[0][0][0]
    if not isinstance(job, dict):
        raise ClusterError("malformed job")
    return job


def _child_outcome(error: BaseException, fabric: ProcessFabric | None) -> list[Any]:
    """What a child reports to its parent about ``error``: its kind first."""
    if isinstance(error, WorkerFailed):
        cause = error.__cause__
        if isinstance(cause, DataflowStuck):
            return ["stuck", error.worker, str(cause)]
        if fabric is not None and not fabric.base <= error.worker < fabric.base + fabric.workers:
            return ["stopped", str(error)]
        return ["failed", error.worker, str(error), "".join(traceback.format_exception(error))]
    if isinstance(error, PeerLost):
        return ["lost", str(error), error.process]
    if isinstance(error, ClusterStopped):
        reason = fabric.stop_reason if fabric is not None else None
        return ["interrupted" if reason is not None and reason.kind == "interrupted" else "stopped", str(error)]
    return ["error", f"{type(error).__name__}: {error}", "".join(traceback.format_exception(error))]


def child_main() -> None:
    """Entry point of a process started by :func:`execute_processes` (reads its job on stdin)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job = _read_job()
    parent = int(job["parent"])
    _die_with_parent(parent)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for entry in reversed(job["path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    sys.argv = [str(argument) for argument in job.get("argv", sys.argv)]  # as the parent was started
    result_fd = int(job["result_fd"])
    process = int(job["process"])
    code = 0
    holder: list[ProcessFabric] = []
    try:
        with importing_main():
            main = load_main(job["main"])
        endpoints = [Endpoint(host, port) for host, port in job["endpoints"]]
        listener = socket.socket(fileno=int(job["listener_fd"]))

        def watch(fabric: ProcessFabric) -> None:
            holder.append(fabric)

            def on_tick() -> None:
                if os.getppid() != parent:
                    fabric.stop(Stop("lost", None, f"the parent of process {process} died"))
                    os._exit(1)

            def on_term(signum: int, _frame: Any) -> None:
                # the parent prints the one line about Ctrl-C; here a stop is a lost parent
                fabric.stop(Stop("lost", None, f"process {process} was stopped by its parent (pid {parent})"))

            fabric.on_tick = on_tick
            signal.signal(signal.SIGTERM, on_term)

        results = run_process(
            main,
            process,
            endpoints,
            int(job["workers"]),
            job["token"],
            job["stall_timeout"],
            float(job["connect_timeout"]),
            listener=listener,
            gather=False,
            on_fabric=watch,
        )
        try:
            data = frame(["ok", results])
        except EncodingError as error:
            raise EncodingError(
                f"the results of process {process}'s workers must travel back to the parent: {error}",
                error.type_name,
            ) from None
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        code = 1
        data = frame(_child_outcome(error, holder[0] if holder else None))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(result_fd, view) :]
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
