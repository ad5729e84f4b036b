"""Replay's playback: playing at a speed against the clock, stepping, and jumping through a recording."""

from __future__ import annotations

from collections.abc import Callable

from viz.tui.sources import Replay

SPEEDS = (0.01, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)


class Playback:
    """Where a replay is, whether it plays, and how fast; every move but playing pauses it."""

    def __init__(self, replay: Replay, clock: Callable[[], float]) -> None:
        """Paused, at normal speed, over ``replay``; ``clock`` gives wall-clock seconds."""
        self.replay = replay
        self.clock = clock
        self.playing = False
        self.speed_index = SPEEDS.index(1.0)
        self._anchor: tuple[float, float] | None = None

    @property
    def speed(self) -> float:
        """Recorded seconds played per wall-clock second."""
        return SPEEDS[self.speed_index]

    def tick(self) -> bool:
        """Move a playing replay to where the clock says it should be; return whether it is playing."""
        replay = self.replay
        if not self.playing or self._anchor is None:
            return False
        wall, recorded = self._anchor
        target = recorded + (self.clock() - wall) * SPEEDS[self.speed_index]
        replay.seek_time(target)
        if replay.position >= len(replay):
            self.playing = False
        return True

    def toggle(self) -> None:
        """Play or pause (playing at the end starts again from the start)."""
        if self.replay.position >= len(self.replay):
            self.replay.seek(0)
        self.playing = not self.playing
        self._anchor = (self.clock(), self.replay.now)

    def step(self, count: int) -> None:
        """Move ``count`` events (negative: backwards)."""
        self.playing = False
        self.replay.step(count)

    def frontier(self, direction: int) -> bool:
        """Jump to the next (``1``) or previous (``-1``) frontier change; return whether there was one."""
        self.playing = False
        return self.replay.next_frontier_change() if direction > 0 else self.replay.previous_frontier_change()

    def change_speed(self, direction: int) -> None:
        """Play faster (``1``) or slower (``-1``), from where the replay is now."""
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + direction))
        self._anchor = (self.clock(), self.replay.now)

    def seek(self, position: int) -> None:
        """Go to event ``position``."""
        self.playing = False
        self.replay.seek(position)
