"""Refusing ``execute(..., processes=P)`` from a module without an ``if __name__ == "__main__":`` guard.

A local cluster's processes import the module that defines ``main`` (a
script is imported under the name ``__mp_main__``).  A call to ``execute`` at
that module's top level would then run again in each of them and start ``P``
processes more, which would do the same, without end.  Two checks stop it, the
way :mod:`multiprocessing` refuses to start processes while importing main:

* in the launching process, before anything starts
  (:func:`refuse_unguarded_call`): a call made from the top level of
  ``main``'s module, at a line that no ``if``, loop or ``try`` encloses (read
  from the module's source), is refused at once;
* in each started process, while it imports ``main``'s module
  (:func:`importing_main`): a call that would start processes or run a cluster
  (:func:`refuse_while_importing_main`) is refused, and the process reports
  the error to its parent, so no more than ``P`` processes ever exist.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import types
from collections.abc import Iterator

from runtime.errors import ConfigurationError

GUARD_ADVICE = (
    "execute(..., processes=P) starts P new Python processes, and each one imports the module that "
    "defines main; a call to execute at that module's top level runs again in every one of them and "
    "would start P more each. Call it under the guard, as multiprocessing requires:\n\n"
    '    if __name__ == "__main__":\n'
    "        execute(main, processes=P)"
)
"""What every refusal explains: why, and the guard to write."""

_importing = False


@contextlib.contextmanager
def importing_main() -> Iterator[None]:
    """Mark the time this process spends importing ``main``'s module (a started process does)."""
    global _importing
    _importing = True
    try:
        yield
    finally:
        _importing = False


def refuse_while_importing_main(what: str) -> None:
    """Raise :class:`ConfigurationError` if ``what`` is called while this process imports ``main``'s module."""
    if _importing:
        raise ConfigurationError(
            f"{what} was called while a process of a cluster was importing the module that defines main: "
            f"the call is not protected by a __main__ guard. {GUARD_ADVICE}"
        )


def refuse_unguarded_call(module_name: str, what: str) -> None:
    """Raise :class:`ConfigurationError` if ``what`` is being called from ``module_name``'s unguarded top level."""
    module = sys.modules.get(module_name)
    if module is None:
        return
    line = _top_level_line(module)
    if line is None:
        return
    file = getattr(module, "__file__", None)
    try:
        with open(str(file), encoding="utf-8") as source:
            tree = ast.parse(source.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return  # no source to read: the started processes still refuse the call
    if _unguarded(tree.body, line):
        raise ConfigurationError(
            f"{what} is called at the top level of {file}, line {line}, without a __main__ guard. {GUARD_ADVICE}"
        )


def _top_level_line(module: types.ModuleType) -> int | None:
    """The line the top level of ``module`` is running, if it is running now (importing or as a script)."""
    frame: types.FrameType | None = sys._getframe(1)  # noqa: SLF001 - CPython's frame access; no public equivalent
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is module.__dict__:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _unguarded(body: list[ast.stmt], line: int) -> bool:
    """Whether the statement of ``body`` holding ``line`` surely runs whenever the module is imported.

    Only ``with`` blocks are looked into; any ``if``, loop, ``try`` or
    ``match`` counts as a guard (the check must never refuse a guarded call,
    and the started processes catch whatever it lets through).
    """
    for statement in body:
        if not statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            continue
        if isinstance(statement, ast.With | ast.AsyncWith):
            return _unguarded(statement.body, line)
        return not isinstance(
            statement, ast.If | ast.For | ast.AsyncFor | ast.While | ast.Try | ast.TryStar | ast.Match
        )
    return False
