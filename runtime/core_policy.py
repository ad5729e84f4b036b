"""When the worker threads of one process should share one core and when they should spread.

The pure half of ``PYTIMELY_THREAD_CORES=auto`` (see :mod:`runtime.thread_cores`):
:func:`decide` takes what the worker threads did over one window of time (a
:class:`Window`, read from the kernel's ``schedstat`` by
:mod:`runtime.core_governor`) and the governor's :class:`GovernorState`, and
says what to do (an :class:`Action`).  It has no clock, no thread and no file.

The signals.  Worker threads of a process share the GIL.  A thread waiting
for the GIL sleeps on a futex: it is not runnable, so it neither runs nor
waits on a runqueue.  A thread running C code with the GIL released is
runnable.  Summed over the worker threads, ``(on_cpu + waiting) / wall`` is
the average number of worker threads that wanted a CPU (the *demand*).

* **Shared core → spread**: the threads queued for the core (``waiting`` at
  least :attr:`Policy.queue_fraction`, 0.6, of the window) *and* the demand
  was at least :attr:`Policy.spread_demand`, 1.75, in
  :attr:`Policy.spread_windows` (3) windows in a row.  Measured on 2 cores
  under load (medians, 10th to 90th percentile of 20 ms windows): two threads
  sorting with NumPy on one core show a demand of 1.99 (1.93 to 2.19); GIL-bound
  threads on one core show 1.54 (1.36 to 1.70) on the Collatz loop and about
  1.4 on a pure Python loop, because a thread woken by a message (or by the
  GIL's 5 ms switch request) waits on the runqueue until the GIL holder yields
  the core, and other programs' load adds to that.  The demand, unlike the wait
  alone, does not grow with other programs' load beyond that: only our
  threads' own overlap counts.  Work that releases the GIL for only part of the
  time (demand below 1.75 on one core) stays there: below that, real parallel
  work cannot be told apart from GIL-bound threads queueing (up to 1.7 above).
* **Spread → shared core**: the worker threads' time on a CPU was at most
  :attr:`Policy.pin_on_cpu` (1.15) of the window, and their demand stayed
  below the 1.75 that spreads, in :attr:`Policy.pin_windows` (10) windows in a
  row: a second core is not being used (GIL-bound threads spread show 0.99,
  0.70 to 1.12, on the Collatz loop), so it buys only cache misses.  The
  second test keeps threads that want two cores but get one core's worth on a
  loaded machine (two threads sorting, spread, under a load of 4 runnable
  threads per core: 0.99 on a CPU, demand 1.99) from being pinned only to be
  spread again at once.

Hysteresis, so that it cannot flap every window:

* spreading needs 3 windows (60 ms) in a row that ask for it, pinning 10
  (200 ms): denied C work costs up to half the throughput (0.96 s against
  0.52 s for two threads sorting), while GIL-bound threads left spread cost
  a tenth to a third more (1.95x against 1.69x of one worker on the Collatz loop
  in BENCHMARKS.md; 2.10x against 1.79x, 2.06x against 1.80x, 2.21x against 1.88x, 2.12x against 1.80x,
  2.15x against 1.87x, 2.07x against 1.82x, 1.88x against 1.61x, 2.23x against 1.62x, 1.95x against 1.77x
  and 1.98x against 1.60x in earlier runs),
  so spreading is quick and pinning slow;
* after every move :attr:`Policy.settle_windows` (5, 100 ms) windows are
  ignored (the move itself disturbs them: caches, queues);
* a move that undoes the previous one less than :attr:`Policy.calm_seconds`
  (5 s) after it doubles the windows that the undone kind of move needs
  next time, up to :attr:`Policy.max_spread_windows` (48, about 1 s) for
  spreading and :attr:`Policy.max_pin_windows` (160, 3.2 s) for pinning; each
  5 s without a move halves them again.  So each wrong guess makes the next one
  less likely: a workload that alternates between C work and Python every
  0.6 s moves the threads 7 times in its first 10 s and then about twice every
  6 s (``tests/test_core_governor.py`` checks this on made-up windows).

The windows last :attr:`Policy.window` (20 ms) for the first
:attr:`Policy.eager_windows` (25, half a second: a run's work often starts
there) and while anything is pending (a streak of windows asking for a move,
or settling after one), and double, up to :attr:`Policy.max_window` (320 ms),
while nothing is.  Every look costs the governor's thread a wake-up and one
acquisition of the GIL: 50 to 80 µs of CPU beside idle threads, but 220 to
330 µs beside two GIL-bound worker threads (measured on a loaded 2-core
virtual machine), which at 20 ms would be 1.5% of a core.  So a governor with
nothing to do looks about 3 times a second (about 1 ms of CPU a second),
while the first window that asks for a move brings it back to 20 ms.
Spreading then takes 60 ms from the start of the C work in the first half
second, and up to about 380 ms later on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Action(enum.Enum):
    """What the governor should do after a window."""

    STAY = "stay"
    SPREAD = "spread"  # give every worker thread the process's CPUs back
    PIN = "pin"  # put every worker thread on one shared core
    STOP = "stop"  # stop governing; leave the threads as they are


@dataclass(frozen=True)
class Window:
    """What the worker threads did over one window, summed over the threads; every figure in seconds."""

    wall: float  # how long the window lasted
    on_cpu: float  # time the worker threads ran
    waiting: float  # time they were runnable but waited on a runqueue


@dataclass(frozen=True)
class Policy:
    """The thresholds and counts of :func:`decide` (see the module docstring for why these values)."""

    queue_fraction: float = 0.6
    """Runqueue wait, as a fraction of the window, that shared-core threads must show to be spread."""
    spread_demand: float = 1.75
    """Threads wanting a CPU on average (on a CPU or queued for one) that spreading needs; pinning needs fewer."""
    pin_on_cpu: float = 1.15
    """CPUs' worth of time on a CPU that spread threads may use at most to be pinned again."""
    spread_windows: int = 3
    """Windows in a row asking to spread that spreading needs (before any reversal doubled it)."""
    pin_windows: int = 10
    """Windows in a row asking to pin that pinning needs (before any reversal doubled it)."""
    max_spread_windows: int = 48
    """The most windows in a row that spreading can come to need after reversals."""
    max_pin_windows: int = 160
    """The most windows in a row that pinning can come to need after reversals."""
    settle_windows: int = 5
    """Windows ignored after each move."""
    calm_seconds: float = 5.0
    """A move within this many seconds of the last one is a reversal; each calm stretch this long halves the needs."""
    window: float = 0.02
    """Seconds a window lasts at first and while a move is pending."""
    max_window: float = 0.32
    """The longest window, reached by doubling while nothing is pending."""
    eager_windows: int = 25
    """Windows of :attr:`window` seconds at the start of a run, where work often begins."""


POLICY = Policy()
"""The policy the governor uses."""

LONG_AGO = 1e9
"""Seconds since the last move, for a governor that has not moved the threads yet."""


@dataclass(frozen=True)
class GovernorState:
    """Where the worker threads are and what the governor remembers; the start state is shared and calm.

    ``spread_need`` and ``pin_need`` of 0 stand for the policy's base counts.
    """

    spread: bool = False
    streak: int = 0  # windows in a row that asked for a move
    settle: int = 0  # windows still ignored after the last move
    quiet: float = LONG_AGO  # seconds since the last move
    spread_need: int = 0  # windows in a row the next spread needs (0: the policy's base)
    pin_need: int = 0  # windows in a row the next pin needs (0: the policy's base)
    window: float = POLICY.window  # seconds the next window should last
    seen: int = 0  # windows looked at


def _wants_move(state: GovernorState, window: Window, policy: Policy) -> bool:
    """Whether ``window`` asks to leave the state the threads are in."""
    demand = window.on_cpu + window.waiting
    if state.spread:  # pin what uses no second core, unless the rule to spread would fire at once
        return window.on_cpu <= policy.pin_on_cpu * window.wall and demand < policy.spread_demand * window.wall
    return window.waiting >= policy.queue_fraction * window.wall and demand >= policy.spread_demand * window.wall


def _eased(need: int, base: int) -> int:
    """``need`` halved, or 0 (the base) once that is no more than ``base``."""
    return need // 2 if need // 2 > base else 0


def _moved(state: GovernorState, policy: Policy) -> tuple[GovernorState, Action]:
    """Spread pinned threads or pin spread ones; a move that undoes the last one soon doubles what that one needs."""
    spread_need, pin_need = state.spread_need, state.pin_need
    soon = state.quiet < policy.calm_seconds
    if state.spread and soon:  # the spread turned out useless: spreading needs more evidence next time
        spread_need = min(2 * (spread_need or policy.spread_windows), policy.max_spread_windows)
    elif soon:  # the pin turned out wrong
        pin_need = min(2 * (pin_need or policy.pin_windows), policy.max_pin_windows)
    moved = replace(
        state,
        spread=not state.spread,
        streak=0,
        settle=policy.settle_windows,
        quiet=0.0,
        spread_need=spread_need,
        pin_need=pin_need,
        window=policy.window,
    )
    return moved, Action.PIN if state.spread else Action.SPREAD


def decide(state: GovernorState, window: Window | None, policy: Policy = POLICY) -> tuple[GovernorState, Action]:
    """The state after ``window`` and the action it calls for; ``None`` (the counters could not be read) stops.

    The new state's ``window`` is how long the next window should be: the policy's window while anything is
    pending (a streak, settling), else twice the last one up to ``max_window``, so that a governor with nothing
    to do looks less often.
    """
    if window is None:
        return state, Action.STOP
    quiet = state.quiet + max(window.wall, 0.0)
    spread_need, pin_need = state.spread_need, state.pin_need
    if quiet // policy.calm_seconds > state.quiet // policy.calm_seconds:  # each calm stretch halves them
        spread_need, pin_need = _eased(spread_need, policy.spread_windows), _eased(pin_need, policy.pin_windows)
    seen = state.seen + 1
    current = replace(state, quiet=quiet, spread_need=spread_need, pin_need=pin_need, window=policy.window, seen=seen)
    if state.settle > 0 or window.wall <= 0:
        return replace(current, streak=0, settle=max(state.settle - 1, 0)), Action.STAY
    streak = state.streak + 1 if _wants_move(state, window, policy) else 0
    needed = (pin_need or policy.pin_windows) if state.spread else (spread_need or policy.spread_windows)
    if streak >= needed:
        return _moved(current, policy)
    longer = policy.window if streak or seen < policy.eager_windows else min(2 * state.window, policy.max_window)
    return replace(current, streak=streak, window=longer), Action.STAY
