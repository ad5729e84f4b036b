"""The exceptions raised by :mod:`viz`.  Every one derives from :class:`VizError`."""

from __future__ import annotations

from scopes.errors import TimelyError as TimelyError


class VizError(TimelyError):
    """Base class of every error raised by :mod:`viz`; its message is one line for a person."""


class RenderError(VizError):
    """A diagram cannot be produced (for example, Graphviz's ``dot`` program is missing)."""


class SelectionError(VizError):
    """A requested worker, moment, operator or location does not exist in the recording."""


class TuiError(VizError):
    """The terminal UI cannot start: a bad recording, a port in use, a program that cannot run."""
