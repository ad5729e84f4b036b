"""Spawning a cluster on this machine: ``execute(main, processes=P)`` starts ``P`` child processes.

:func:`execute_processes` (used by ``execute(main, processes=P)`` and by
``execute_from_args`` with ``-n P`` and no ``-p``): this process binds one
loopback listening socket per process, picks a random token and a common
``PYTHONHASHSEED``, and starts ``P`` Python processes. Each receives its
listening socket and a result pipe as inherited file descriptors, and its job
(how to import ``main``, its arguments, the cluster's addresses and token) on
standard input, so that the token never appears on a command line. Each child
dies with its parent (``PR_SET_PDEATHSIG`` on Linux, and a check of its
parent's pid at every heartbeat), and reports its workers' results or its
failure on the pipe.  Every job also gives the pid and start time of every
child (all are started before any job is sent), so that a child that falls
silent while one of its calls holds the GIL is seen by its peers to be busy,
whatever the transport between them (:mod:`runtime.communication.peer_state`).
Ctrl-C in this process stops the children (SIGTERM, then SIGKILL after a
grace period); the children ignore SIGINT themselves.

The children run :func:`runtime.cluster_member.child_main`; nothing is pickled:
``main``'s arguments and the workers' results travel in the wire encoding
(:mod:`runtime.communication.wire`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from runtime.communication.peer_state import LOST_ADVICE, identify, process_state
from runtime.communication.process_fabric import SILENCE_LIMIT
from runtime.communication.tcp import ClusterError, Endpoint, PeerLost
from runtime.communication.wire import EncodingError, FrameReader, encode_value, frame
from runtime.errors import (
    ConfigurationError,
    DecodeError,
    MetricsUnavailable,
    SettingsMismatch,
    WorkerFailed,
    combined_stuck,
)
from runtime.main_guard import refuse_unguarded_call, refuse_while_importing_main
from runtime.metrics import warn_unseen_processes
from runtime.settings import check_settings, check_stall_timeout
from runtime.worker import Worker

R = TypeVar("R")

CONNECT_TIMEOUT = 30.0
"""Seconds the processes of a cluster have to find each other."""
TOKEN_VARIABLE = "PYTIMELY_TOKEN"
"""The environment variable that holds a cluster's shared token."""
INTERRUPT_GRACE = 5.0
"""Seconds to wait for workers (threads here, or child processes) to unwind after Ctrl-C before giving up on them."""
LOST_GRACE = 10.0
"""Seconds the other children get to stop by themselves after one failed and reported why, before they are killed."""
SILENT_DEATH_GRACE = 2.0
"""Seconds the other children get to stop by themselves after one died without reporting, before they are killed."""
ANSWER_GRACE = 1.0
"""Seconds a child another one reported as silent gets to end by itself before the launcher kills it."""
UNANSWERING_GRACE = 0.25
"""Seconds the other children get to stop by themselves after the launcher killed one that stopped answering
(the launcher knows the cause already, and a child still joining the cluster would wait for the dead one)."""
SUSPENDED_LIMIT = SILENCE_LIMIT
"""Seconds a child may stay suspended (SIGSTOP: state ``T``, not a debugger's ``t``) before it counts as lost:
the silence limit its peers apply, so a child paused for less goes on, and one paused for longer is named
within 10 s of its pause."""

POLL_INTERVAL = 0.02
"""Seconds between the launcher's looks at its children when no child's pipe has closed."""

EXIT_AFTER_EOF = 1.0
"""Seconds a child's reader waits, after its pipe closed, for the child to exit before waking the launcher."""

_CHILD_CODE = "from runtime.cluster_member import child_main; child_main()"


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
    tls: tuple[str, str, str] | None = None,
) -> list[R]:
    """Run ``main`` in ``processes`` new processes of ``workers`` worker threads; return every result in order.

    Worker ``process * workers + i`` is thread ``i`` of process ``process``.
    ``main`` must be importable by the new processes (a top-level function, or
    a ``functools.partial`` of one with wire-encodable arguments), and its
    results travel back in the wire encoding, so they must be encodable too.
    Raises :class:`~runtime.errors.WorkerFailed` for a failed worker (with the
    remote traceback as a note) or stuck dataflows, and
    :class:`~runtime.communication.tcp.PeerLost` when a process died.  Ctrl-C here, or a
    ``KeyboardInterrupt`` raised by ``main`` or a user function in a child, stops every child, prints one line
    and raises :class:`SystemExit` ``(130)``, as ``execute`` does with threads.  ``tls`` (certificate,
    key and CA files) makes the children's connections TLS (:mod:`runtime.communication.tls`).
    """
    if processes.__class__ is not int or processes < 1:
        raise ConfigurationError(f"execute needs processes >= 1 (an int), got {processes!r}")
    if workers.__class__ is not int or workers < 1:
        raise ConfigurationError(f"execute needs workers >= 1 (an int), got {workers!r}")
    check_stall_timeout(stall_timeout)
    refuse_while_importing_main(f"execute(..., processes={processes})")
    check_settings()  # before any process starts
    warn_unseen_processes(processes)
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
    ended = threading.Event()
    try:
        jobs = []
        for index, listener in enumerate(listeners):
            child, job = _spawn(
                index, listener, endpoints, workers, token, spec, (stall_timeout, connect_timeout, tls), env, ended
            )
            children.append(child)
            jobs.append(job)
            listener.close()
        identities = [_identity(child) for child in children]  # every child's, before any of them joins
        for child, job in zip(children, jobs, strict=True):
            _send_job(child, dict(job, identities=identities))
        _wait(children, ended)
        if any(child.outcome is not None and child.outcome[0] == "interrupted" for child in children):
            raise KeyboardInterrupt  # raised by the program's code in a child: end as Ctrl-C here does
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
    settings: tuple[float | None, float, tuple[str, str, str] | None],
    env: dict[str, str],
    ended: threading.Event,
) -> tuple[_Child, dict[str, Any]]:
    """Start child ``index``; return it and its job (sent by :func:`_send_job` once every child has started)."""
    stall_timeout, connect_timeout, tls = settings
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
        "tls": list(tls) if tls is not None else None,
        "listener_fd": listener.fileno(),
        "result_fd": write_fd,
        "parent": os.getpid(),
        "path": [entry for entry in sys.path if entry],
        "cwd": os.getcwd(),
        "argv": list(sys.argv),
    }
    child = _Child(index, endpoints[index], popen)
    child.reader = threading.Thread(
        target=_read_outcome, args=(child, read_fd, ended), name=f"timely-child-{index}", daemon=True
    )
    child.reader.start()
    return child, job


def _identity(child: _Child) -> list[int] | None:
    """``[pid, start time]`` of ``child`` (its peers look at it when it falls silent), or None if not known."""
    identity = identify(child.popen.pid)
    return None if identity is None else [identity.pid, identity.started]


def _send_job(child: _Child, job: dict[str, Any]) -> None:
    """Write ``job`` on the child's standard input, and close it."""
    stdin = child.popen.stdin
    assert stdin is not None
    try:
        stdin.write(frame([job]))
        stdin.close()
    except OSError:
        pass  # the child died at once; its exit status tells why


def _read_outcome(child: _Child, fd: int, ended: threading.Event) -> None:
    """Read the child's outcome from its pipe; when the pipe closes, reap the child and wake :func:`_wait`.

    An outcome that does not decode here (its workers' results hold a value of a codec the child registered
    and this process did not, say) is the child's error, naming what failed, not a child that said nothing.
    """
    reader: FrameReader | None = FrameReader()
    try:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while True:
                data = pipe.read(1 << 16)
                if not data:
                    break
                if reader is None:
                    continue  # after an outcome that did not decode: drained, so that the child can exit
                try:
                    for header, _ in reader.feed(data):
                        child.outcome = header
                except DecodeError as error:
                    child.outcome = ["error", f"its report to the launching process does not decode there: {error}", ""]
                    reader = None
        # the pipe closes as the process exits; one still running without it is seen by _wait's polling
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.popen.wait(timeout=EXIT_AFTER_EOF)
    finally:
        ended.set()


def _wait(children: list[_Child], ended: threading.Event) -> None:
    """Wait until every child exited; after a fault, stop the rest promptly, noting which ended on their own.

    A child that dies without reporting, or reports an error of its own (it
    could not run), leaves the others :data:`SILENT_DEATH_GRACE` seconds to
    stop by themselves; one whose worker failed leaves them :data:`LOST_GRACE`.
    A child that another reports as silent, or that stays suspended for
    :data:`SUSPENDED_LIMIT` seconds, has stopped answering: the launcher kills
    it and remembers why, so that the error names it truthfully, and leaves the
    others :data:`UNANSWERING_GRACE`.
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
            if child.unanswering is not None:  # killed here as unanswering: no other child can finish
                grace = min(grace, UNANSWERING_GRACE)
            elif silent or (outcome is not None and outcome[0] in _CANNOT_FINISH):  # the cluster cannot finish
                grace = min(grace, SILENT_DEATH_GRACE)
            elif outcome is not None and outcome[0] == "interrupted":  # the others unwind as after Ctrl-C
                grace = min(grace, INTERRUPT_GRACE)
            elif outcome is not None and outcome[0] == "lost" and len(outcome) > 2:
                report = str(outcome[1]).removesuffix(f". {LOST_ADVICE}")  # the launcher's report says what to do
                _kill_if_unanswering(children, outcome[2], f"process {child.index} reported: {report}")
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
        if ended.wait(POLL_INTERVAL):  # woken as soon as a child's pipe closes and it is reaped
            ended.clear()
    for child in children:
        if child.reader is not None:
            child.reader.join(timeout=5.0)


def _watch_suspension(child: _Child, now: float) -> None:
    """Kill ``child`` as lost once it has been suspended (SIGSTOP) for :data:`SUSPENDED_LIMIT` seconds."""
    watched = now - child.looked_at < 1.0  # else the launcher itself was suspended (Ctrl-Z) meanwhile
    child.looked_at = now
    if process_state(child.popen.pid) != "T":
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
    state = process_state(child.popen.pid)
    if state in ("T", "t") and "suspended" not in why:
        why += "; it was suspended (state T: SIGSTOP)" if state == "T" else "; it was stopped by a debugger"
    child.unanswering = why
    child.killed_by_launcher = True
    with contextlib.suppress(OSError):
        child.popen.kill()
    child.popen.wait()


_CANNOT_FINISH = ("error", "mismatch", "metrics", "configuration")
"""The kinds of a child's report after which the others cannot finish: the launcher stops them soon."""


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


RERUN = "a job with a CheckpointStore resumes from its last complete epoch"
"""What every report of a lost process says about running the program again."""


def _what_to_do(child: _Child) -> str:
    """What to do about ``child``'s end, in words (after :func:`_how_it_ended`)."""
    code = child.popen.returncode
    if child.unanswering is not None:
        why = (
            f"a process suspended, or silent, for {SUSPENDED_LIMIT:.0f} s is lost: resume a paused one sooner, "
            "or split a call that holds the GIL that long"
        )
    elif child.killed_by_launcher:
        why = "another process's fault stopped it: the error of that process explains"
    elif code is not None and code < 0:
        why = "find out what killed it (the system log names the out-of-memory killer)"
    else:
        why = "its error output says why, if anything does (os._exit() or a crash of the interpreter ends a process "
        why += "without reporting)"
    return f"{why}; then run the program again ({RERUN})"


def _lost(child: _Child) -> PeerLost:
    return PeerLost(
        f"process {child.index} ({child.endpoint}, pid {child.popen.pid}) {_how_it_ended(child)}: {_what_to_do(child)}",
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
    for _, outcome in by_kind.get("mismatch", []):
        raise SettingsMismatch(str(outcome[1]))
    for kind, error_class in (("metrics", MetricsUnavailable), ("configuration", ConfigurationError)):
        for child, outcome in by_kind.get(kind, []):  # the child's ConfigurationError, as such (its message names it)
            refused = error_class(str(outcome[1]))
            refused.add_note(
                f"raised in process {child.index} ({child.endpoint}, pid {child.popen.pid}):\n{outcome[2]}"
            )
            raise refused
    for child, outcome in by_kind.get("error", []):
        error = ClusterError(f"process {child.index} ({child.endpoint}) failed: {outcome[1]}")
        if outcome[2]:  # none for an outcome that did not decode here (see _read_outcome)
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
        cause = combined_stuck([outcome[2] for _, outcome in stuck])
        worker = stuck[0][1][1]
        failed = WorkerFailed(f"worker {worker} of {peers} failed: DataflowStuck: {cause}", worker)
        failed.__cause__ = cause
        raise failed
    for kind in ("lost", "stopped"):  # "interrupted" ended the run before (see execute_processes)
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
