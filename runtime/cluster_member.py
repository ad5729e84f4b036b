"""One process of a cluster: joining the mesh, running its workers, saying goodbye; and a child's entry point.

Every process of a cluster runs :func:`run_process`: it joins the TCP mesh
(:mod:`runtime.communication.tcp`), runs its workers on a
:class:`~runtime.communication.process_fabric.ProcessFabric`, and, once they finish, says
goodbye to every other process.  A process that :mod:`runtime.launcher`
started runs :func:`child_main`: it reads its job on standard input, imports
``main`` as :func:`load_main` says, and reports its workers' results or its
failure to its parent on an inherited pipe.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.util
import os
import signal
import socket
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any, TypeVar

from runtime.communication import Stop
from runtime.communication.agreement import ClusterSettings
from runtime.communication.peer_state import Identity
from runtime.communication.process_fabric import ProcessFabric, decode_results
from runtime.communication.shm_transport import ShmTransport
from runtime.communication.tcp import ClusterError, ClusterStopped, Endpoint, Mesh, PeerLost
from runtime.communication.tls import TlsConfig, tls_config
from runtime.communication.wire import EncodingError, FrameReader, decode_value, encode_value, frame
from runtime.environment_observers import observers_from_environment
from runtime.errors import ConfigurationError, DataflowStuck, MetricsUnavailable, SettingsMismatch, WorkerFailed
from runtime.execute import run_workers
from runtime.launcher import CONNECT_TIMEOUT
from runtime.main_guard import importing_main
from runtime.settings import check_settings
from runtime.worker import Worker

R = TypeVar("R")

_PR_SET_PDEATHSIG = 1


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
    tls: TlsConfig | None = None,
    announce_interrupt: bool = True,
) -> list[R]:
    """Run process ``process`` of the cluster at ``endpoints``: join the mesh, run ``W`` workers, finish.

    With ``tls``, every connection of the mesh is TLS (see :mod:`runtime.communication.tls`).
    An interrupt (``KeyboardInterrupt`` in a worker, here or in another process) prints one line and raises
    :class:`SystemExit` ``(130)``, or, without ``announce_interrupt``, raises :class:`KeyboardInterrupt` silently.

    Returns every worker's result in worker order if ``gather`` (results travel
    to every process), else only this process's workers' results.  Raises
    :class:`~runtime.errors.WorkerFailed` when a worker of any process failed
    or the dataflows are stuck, :class:`~runtime.communication.tcp.PeerLost` when a process
    vanished, :class:`~runtime.communication.tcp.ClusterError` when the cluster cannot form.
    """
    check_settings()  # before joining the cluster
    processes = len(endpoints)
    with observers_from_environment(process, processes):
        return _run_process(
            main,
            process,
            endpoints,
            workers,
            token,
            stall_timeout,
            connect_timeout,
            listener,
            gather,
            on_fabric,
            tls,
            announce_interrupt,
        )


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
    tls: TlsConfig | None,
    announce_interrupt: bool,
) -> list[R]:
    processes = len(endpoints)
    holder: list[ProcessFabric] = []
    settings = ClusterSettings.of_this_process(workers)  # compared with every peer's in the handshake
    mesh = Mesh(
        process,
        endpoints,
        token,
        on_frame=lambda peer, header, payload: holder[0].on_frame(peer, header, payload),
        on_lost=lambda error: holder[0].on_lost(error),
        listener=listener,
        tls=tls,
        settings=settings,
    )
    fabric = ProcessFabric(process, processes, workers, mesh, settings.send_window)
    holder.append(fabric)
    shm = fabric.shm = ShmTransport(process, endpoints, mesh, fabric.on_frame, fabric.on_lost)
    if on_fabric is not None:
        on_fabric(fabric)
    try:
        mesh.connect(connect_timeout)
        shm.establish(time.monotonic() + connect_timeout, lambda: fabric.stop_reason is not None)
        if fabric.stop_reason is not None:  # a peer was lost while linking
            raise _stopped(fabric, fabric.stop_reason)
        fabric.joined = True
        fabric.use_links()
        fabric.start_heartbeats()
        try:
            results = run_workers(main, fabric.communicators(), stall_timeout, announce_interrupt=announce_interrupt)
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
            everything.extend(results if peer == process else decode_results(fabric.byes[peer], peer))
        return everything
    except BaseException as error:
        if fabric.stop_reason is None and not isinstance(error, SystemExit):
            fabric.stop(Stop("failed", None, f"process {process} ({endpoints[process]}) failed: {error}"))
        raise
    finally:
        fabric.stop_heartbeats()
        fabric.tell_before_closing()
        mesh.close()
        shm.close()


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
        if not hasattr(function, part):
            where = file or module_name
            raise ConfigurationError(
                f"main ({name}) is not defined when {where} is imported, as each new process imports it: "
                'a function defined under `if __name__ == "__main__":` (which runs only in the process started '
                "from the command line), or by other code that does not run on import, is missing there. Define "
                "main at the top level of the module, outside the guard, and keep only the call to execute under "
                "the guard"
            )
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


def _peer_identities(listed: Any, process: int) -> dict[int, Identity]:
    """The identities of the other children, by process index, from the job the parent wrote (``[pid, start]`` or
    None for each child)."""
    found = {}
    for index, entry in enumerate(listed if isinstance(listed, list) else []):
        if index != process and isinstance(entry, list) and len(entry) == 2:
            found[index] = Identity(int(entry[0]), int(entry[1]))
    return found


def _child_outcome(error: BaseException, fabric: ProcessFabric | None) -> list[Any]:
    """What a child reports to its parent about ``error``: its kind first."""
    if isinstance(error, WorkerFailed):
        cause = error.__cause__
        if isinstance(cause, DataflowStuck):
            return ["stuck", error.worker, str(cause)]
        if fabric is not None and not fabric.base <= error.worker < fabric.base + fabric.workers:
            return ["stopped", str(error)]
        return ["failed", error.worker, str(error), "".join(traceback.format_exception(error))]
    if isinstance(error, KeyboardInterrupt):  # raised by user code: the parent ends the run as Ctrl-C does
        return ["interrupted", "KeyboardInterrupt"]
    if isinstance(error, SettingsMismatch):  # raised again as it is by the parent: a ConfigurationError
        return ["mismatch", str(error)]
    if isinstance(error, ConfigurationError):  # raised again by the parent as one (a metrics port taken: as that)
        kind = "metrics" if isinstance(error, MetricsUnavailable) else "configuration"
        return [kind, str(error), "".join(traceback.format_exception(error))]
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
            fabric.identities.update(_peer_identities(job.get("identities"), process))

            def on_tick() -> None:
                if os.getppid() != parent:
                    fabric.stop(Stop("lost", None, f"the parent of process {process} died"))
                    os._exit(1)

            def on_term(signum: int, _frame: Any) -> None:
                # the parent prints the one line about Ctrl-C; here a stop is a lost parent
                why = f"process {process} was stopped by its parent (pid {parent})"
                fabric.stop(Stop("lost", None, why))
                if not fabric.joined:  # waiting for a peer that may never answer: end that wait now
                    raise ClusterStopped(f"{why} while it was joining the cluster")

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
            tls=tls_config(*job["tls"]) if job.get("tls") else None,
            announce_interrupt=False,  # the parent prints the one line for the cluster
        )
        try:
            data = frame(["ok", results])
        except EncodingError as error:
            raise EncodingError(
                f"the results of process {process}'s workers must travel back to the parent: {error}",
                error.type_name,
            ) from None
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        code = 130 if isinstance(error, KeyboardInterrupt) else 1
        data = frame(_child_outcome(error, holder[0] if holder else None))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(result_fd, view) :]
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
