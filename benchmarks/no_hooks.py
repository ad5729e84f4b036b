"""A copy of pytimely's ``scopes`` and ``runtime`` packages without their instrumentation hook sites.

Every hook site is guarded by a test that the observer (in ``scopes``) or the
logger (in ``runtime``) is not ``None`` (see ``scopes/hooks.py``).  To measure
what those tests cost when logging is off, :func:`make_hook_free` copies both
packages and rewrites their source with :mod:`ast`, removing exactly those
guard sites:

- ``if <x>.observer is not None: ...`` (also ``_observer`` and ``logger``,
  attribute or plain name), possibly ``and``-ed with further conditions after
  the guard, is deleted; when it has an ``else`` the ``else`` branch, the path
  taken when logging is off, replaces it;
- ``if <x>.observer is None: ...`` (the guard alone) is replaced by its body,
  the path always taken when logging is off.

Any other use of such a test (a guard that is not the first operand of an
``and``, inside ``or`` or ``not``, a conditional expression, a ``while``, a
comprehension...) raises :class:`HookShapeError` naming ``file:line``, so that a
future hook cannot silently stay in the copy.  ``assert`` statements are left
alone: they are not hooks (the one today sits in code reached only through a
removed guard).  Files without a guard site are copied byte for byte.

``python benchmarks/no_hooks.py DIR`` writes the copy to ``DIR`` and prints
the number of sites removed per file.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
"""The repository root holding the ``scopes`` and ``runtime`` packages."""

PACKAGES = ("scopes", "runtime")
"""The packages copied (the layers below ``viz``)."""

GUARDED_NAMES = frozenset({"observer", "_observer", "logger"})
"""Attribute or variable names whose ``is (not) None`` test marks an instrumentation guard."""

GUARD_LINE = re.compile(r"^\s*(?:el)?if\b.*\b(?:observer|_observer|logger) is (?:not )?None\b")
"""A plain text scan's idea of a guard site: an ``if`` line testing an observer or logger against ``None``."""


class HookShapeError(Exception):
    """A guard test appears in a shape the rewriter does not know how to remove."""


def is_guard(node: ast.AST, negated: bool | None = None) -> bool:
    """``<x>.observer is not None`` (or ``is None``; ``negated`` picks one, ``None`` accepts both)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and len(node.comparators) == 1):
        return False
    op, right, left = node.ops[0], node.comparators[0], node.left
    if not (isinstance(right, ast.Constant) and right.value is None):
        return False
    if negated is True and not isinstance(op, ast.IsNot) or negated is False and not isinstance(op, ast.Is):
        return False
    if not isinstance(op, (ast.Is, ast.IsNot)):
        return False
    name = left.attr if isinstance(left, ast.Attribute) else left.id if isinstance(left, ast.Name) else None
    return name in GUARDED_NAMES


def _is_not_none_guarded(test: ast.expr) -> bool:
    """The test is ``guard`` or ``guard and ...`` with the guard first (so the rest never runs when it is off)."""
    if is_guard(test, negated=True):
        return True
    return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and is_guard(test.values[0], negated=True)


class _Remover(ast.NodeTransformer):
    """Removes the guard sites of one module and counts them."""

    def __init__(self) -> None:
        self.removed: list[int] = []

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt] | None:
        if _is_not_none_guarded(node.test):
            self.removed.append(node.lineno)
            return self._visit_block(node.orelse)
        if is_guard(node.test, negated=False):
            self.removed.append(node.lineno)
            return self._visit_block(node.body)
        return self.generic_visit(node)

    def _visit_block(self, block: list[ast.stmt]) -> list[ast.stmt]:
        """The statements of ``block``, rewritten, in place of the removed ``if``."""
        out: list[ast.stmt] = []
        for statement in block:
            result = self.visit(statement)
            if isinstance(result, list):
                out.extend(result)
            elif result is not None:
                out.append(result)
        return out


def _fill_empty_blocks(tree: ast.AST) -> None:
    """A block whose only statements were removed gets a ``pass``."""
    for node in ast.walk(tree):
        for field in ("body", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and not block and not isinstance(node, ast.Module):
                block.append(ast.Pass())


def leftover_guards(tree: ast.AST, filename: str) -> list[str]:
    """``file:line`` of every guard test in ``tree`` outside an ``assert``."""
    in_assert = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Assert) for inner in ast.walk(node)}
    return [
        f"{filename}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and is_guard(node) and id(node) not in in_assert
    ]


def strip_source(source: str, filename: str) -> tuple[str, list[int]]:
    """``source`` without its guard sites, and the lines of the sites removed (source unchanged when none)."""
    tree = ast.parse(source, filename)
    remover = _Remover()
    tree = remover.visit(tree)
    leftover = leftover_guards(tree, filename)
    if leftover:
        raise HookShapeError(
            f"instrumentation guard(s) of an unknown shape at {', '.join(leftover)}: only "
            "`if <x>.observer is not None [and ...]:` and `if <x>.observer is None:` statements can be removed; "
            "rewrite the site in one of those shapes or teach benchmarks/no_hooks.py the new one"
        )
    if not remover.removed:
        return source, []
    _fill_empty_blocks(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n", remover.removed


def text_scan(root: Path = REPO) -> dict[str, int]:
    """Guard sites per file (relative path) found by :data:`GUARD_LINE`, a plain line-by-line scan."""
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            count = sum(1 for line in path.read_text().splitlines() if GUARD_LINE.match(line))
            if count:
                found[str(path.relative_to(root))] = count
    return found


def make_hook_free(destination: Path, root: Path = REPO) -> dict[str, int]:
    """Write hook-free copies of :data:`PACKAGES` under ``destination``; the sites removed per file.

    ``destination`` is then a directory to put first on ``sys.path`` (``PYTHONPATH``).
    """
    removed: dict[str, int] = {}
    for package in PACKAGES:
        target = destination / package
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(root / package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in sorted(target.rglob("*.py")):
            relative = str(path.relative_to(destination))
            text, lines = strip_source(path.read_text(), relative)
            if lines:
                path.write_text(text)
                removed[relative] = len(lines)
    return removed


def main(argv: list[str] | None = None) -> int:
    """Write the copy to the directory given and print the sites removed per file."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python benchmarks/no_hooks.py DIRECTORY", file=sys.stderr)
        return 2
    removed = make_hook_free(Path(args[0]))
    for file, count in removed.items():
        print(f"{count:3} {file}")
    print(f"{sum(removed.values()):3} guard sites removed in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
