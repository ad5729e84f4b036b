"""What Linux says about a process on this host: its state, start time and CPU time, from ``/proc/<pid>/stat``.

A process of the cluster that sends nothing for the silence limit is lost,
unless it runs on this host and is seen to be working: a call that holds
Python's GIL (a long regular expression, ``sorted`` of a huge list, C code
that keeps it) silences every other thread of its process, its heartbeat
thread included, for as long as it runs.  :class:`SilenceJudge` tells such a
busy process from one that is stopped (``T``: SIGSTOP; ``t``: a debugger),
has ended (a zombie, no such process, or its pid now names another process,
told by the start time recorded when the cluster formed), or sleeps using no
CPU at all (blocked).

The pid of a same-host peer is the kernel's word (``SO_PEERCRED`` on the
Unix socket over which the shared-memory rings are passed, see
:mod:`runtime.communication.shm_transport`) or the launcher's, which started
every process of ``execute(main, processes=P)`` (:mod:`runtime.launcher`);
never what the peer says, so a peer cannot point its watchers at another
process.  Peers on other hosts are never looked at.

:func:`lost_report` words the report of a lost process, with what is known of
how it ended and what to do (:data:`LOST_ADVICE`), for the mesh and the fabric.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ACTIVITY_WINDOW = 2.0
"""Seconds a silent process may show no sign of work (no thread running or in disk wait, no CPU time used)
before it counts as blocked rather than busy."""
WATCH_AFTER = 1.0
"""Seconds of silence after which a same-host peer's activity is watched (so that its record covers the
:data:`ACTIVITY_WINDOW` before the silence limit)."""


@dataclass(frozen=True)
class Identity:
    """One process on this host: its pid and its start time (clock ticks since boot), which no later process with
    the same pid shares."""

    pid: int
    started: int


@dataclass(frozen=True)
class Look:
    """What ``/proc`` showed of a process at one moment."""

    state: str
    """The state letter of its main thread: ``R``, ``S``, ``D``, ``T``, ``t``, ``Z``, ``X``, ..."""
    started: int
    """Its start time (field 22 of ``/proc/<pid>/stat``)."""
    cpu: int
    """Clock ticks of CPU it has used, all threads together (user and system)."""
    working: bool
    """Whether one of its threads was running, runnable or in disk wait (``R`` or ``D``)."""


def _stat_fields(path: str) -> list[str] | None:
    """The fields of a ``stat`` file after the command name (the state is the first), or None if unreadable."""
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``R``, ``S``, ``T``, ...) on Linux, else None."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    return fields[0] if fields else None


def look(pid: int) -> Look | None:
    """What ``/proc`` shows of process ``pid`` now, or None if there is no such process (or no ``/proc``)."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    if fields is None or len(fields) < 20:
        return None
    try:
        cpu = int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15
        started = int(fields[19])  # field 22
    except ValueError:
        return None
    working = fields[0] in ("R", "D")
    if not working:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            threads = []
        for thread in threads:
            task = _stat_fields(f"/proc/{pid}/task/{thread}/stat")
            if task and task[0] in ("R", "D"):
                working = True
                break
    return Look(fields[0], started, cpu, working)


def identify(pid: int) -> Identity | None:
    """The identity of process ``pid`` now (None if there is none, or no ``/proc``, or ``pid`` is not positive: the
    kernel gives 0 for a process of another pid namespace)."""
    if pid <= 0:
        return None
    seen = look(pid)
    return None if seen is None else Identity(pid, seen.started)


def gone(identity: Identity, seen: Look | None) -> str | None:
    """How the process ``identity`` has ended or stopped, as a clause, if ``seen`` shows that; else None."""
    pid = identity.pid
    if seen is None:
        return f"its process (pid {pid}) no longer exists: it exited or was killed"
    if seen.started != identity.started:
        return f"its process (pid {pid}) has ended: that pid now belongs to another process"
    if seen.state in ("Z", "X"):
        return f"its process (pid {pid}) has exited (state {seen.state})"
    if seen.state == "T":
        return f"its process (pid {pid}) is stopped (state T: SIGSTOP?)"
    if seen.state == "t":
        return f"its process (pid {pid}) is stopped by a debugger (state t)"
    return None


class SilenceJudge:
    """Tells, for each silent same-host peer, whether it is busy (wait for it) or lost (say how).

    Used by the heartbeat thread alone (no locking).
    """

    def __init__(self, identities: dict[int, Identity]) -> None:
        """Judge the processes of ``identities`` (by process index); others are never judged."""
        self.identities = identities
        self._cpu: dict[int, int] = {}
        self._active_at: dict[int, float] = {}

    def heard(self, process: int) -> None:
        """``process`` is not silent (any more): forget what was watched."""
        self._cpu.pop(process, None)
        self._active_at.pop(process, None)

    def watch(self, process: int, silent_since: float, now: float) -> None:
        """Note whether ``process``, silent since ``silent_since``, works now."""
        identity = self.identities.get(process)
        if identity is None:
            return
        seen = look(identity.pid)
        if seen is None or seen.started != identity.started:
            return
        last = self._cpu.get(process)
        self._cpu[process] = seen.cpu
        active = self._active_at.setdefault(process, silent_since)
        if seen.working or (last is not None and seen.cpu > last):
            self._active_at[process] = max(active, now)

    def lost(self, process: int, now: float) -> tuple[bool, str | None]:
        """Whether ``process``, silent past the limit, is lost, and how (a clause; None if not known).

        A process not on this host is lost (how is not known).  One that is stopped or has ended is lost, saying
        so; one that showed no sign of work for :data:`ACTIVITY_WINDOW` is lost as blocked; any other is busy.
        """
        identity = self.identities.get(process)
        if identity is None:
            return True, None
        seen = look(identity.pid)
        how = gone(identity, seen)
        if how is not None:
            return True, how
        idle = now - self._active_at.get(process, now)
        if idle >= ACTIVITY_WINDOW:
            assert seen is not None
            return True, (
                f"its process (pid {identity.pid}) has been asleep (state {seen.state}) using no CPU for "
                f"{idle:.1f} s: it is blocked (in a call that holds the GIL while it waits?)"
            )
        return False, None


LOST_ADVICE = (
    "Find out why it ended or fell silent (its error output; the system log names the out-of-memory killer), then "
    "start every process of the cluster again (a job with a CheckpointStore resumes from its last complete epoch)"
)
"""What a report of a lost process says to do."""


def lost_report(description: str, why: str, how: str | None = None, advise: bool = True) -> str:
    """The message reporting a lost process: ``lost DESCRIPTION: WHY, and HOW; the other processes stop``, then
    :data:`LOST_ADVICE` when ``advise`` (``how``: how it ended, where known)."""
    if how is not None:
        why += f", and {how}"
    return f"lost {description}: {why}; the other processes stop" + (f". {LOST_ADVICE}" if advise else "")
