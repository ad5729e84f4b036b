"""Build-time checks that the functions a user hands to an operator fit what it will call.

A mistake found here is reported when the dataflow is built, as a
:class:`~scopes.errors.BuildError` naming the operator, its scope, and the
arguments the function must accept, instead of as a bare ``TypeError`` from
deep inside the engine once data flows.  Functions whose signature Python
cannot tell (some builtins and C types) are accepted unchecked.

Reading a builtin's signature parses its text with :mod:`ast`, and CPython
3.11's AST conversion keeps one recursion counter per interpreter, so two
threads reading signatures at once can fail with ``SystemError: AST
constructor recursion depth mismatch``.  The runtime, which runs workers in
threads, hands this module a re-entrant lock with :func:`guard_signature_reads`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from scopes.errors import BuildError

_signature_reads: AbstractContextManager[Any] = nullcontext()


def guard_signature_reads(lock: AbstractContextManager[Any]) -> None:
    """Read every signature under ``lock`` (for example a ``threading.RLock()``) from now on.

    Scopes takes no threads itself; the runtime calls this once, on import,
    so that worker threads building dataflows at once never parse signatures
    concurrently.
    """
    global _signature_reads
    _signature_reads = lock


def describe_operator(name: str, scope_path: Sequence[str]) -> str:
    """``operator 'name' in scope 'outer' > 'inner'``, for error messages."""
    scope = " > ".join(repr(part) for part in scope_path)
    return f"operator '{name}' in scope {scope}" if scope else f"operator '{name}'"


def check_function(function: Any, parameters: Sequence[str], role: str, where: str) -> None:
    """Raise :class:`BuildError` unless ``function`` can be called with ``len(parameters)`` arguments.

    ``parameters`` names the arguments as the documentation does (for example
    ``("input", "output")``), ``role`` says what the function is (for example
    ``"the logic returned by the constructor"``), and ``where`` names the
    operator (see :func:`describe_operator`).
    """
    expected = f"{len(parameters)} argument{'s' if len(parameters) != 1 else ''} ({', '.join(parameters)})"
    if not callable(function):
        raise BuildError(f"{where}: {role} must be a function taking {expected}; got {function!r}")
    try:
        with _signature_reads:
            signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # Python cannot tell; the call itself will say
    try:
        signature.bind(*parameters)
    except TypeError:
        label = getattr(function, "__qualname__", None) or repr(function)
        raise BuildError(f"{where}: {role} must accept {expected}, but {label}{signature} does not") from None


def check_logic(logic: Any, parameters: Sequence[str], where: str) -> None:
    """Check what an operator constructor returned: a logic function taking ``parameters``."""
    expected = f"logic({', '.join(parameters)})"
    if logic is None:
        raise BuildError(
            f"{where}: the constructor returned None; it must return the operator's logic, a "
            f"function {expected} (did the constructor forget `return logic`?)"
        )
    if not callable(logic):
        raise BuildError(
            f"{where}: the constructor must return the operator's logic, a function {expected}; it returned {logic!r}"
        )
    check_function(logic, parameters, "the logic returned by the constructor", where)
