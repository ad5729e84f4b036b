"""Select the optional mypyc-compiled build of the progress, operator and channel path, when built and current.

The pure-Python modules are the default and the fallback.  ``make compiled``
(:mod:`runtime.compiled`) compiles :data:`MODULES` with mypyc into
:data:`BUILD_DIR` (``build/mypyc`` beside the packages, never inside them) and
writes a manifest there with the SHA-256 of each module's source.
:func:`select` runs first thing when :mod:`scopes` is imported: it puts the
compiled modules in front of the sources only if the manifest names exactly
:data:`MODULES`, was built for this interpreter, and every source still hashes
as it did at build time.  A source edited since the build therefore always
wins: the stale build is ignored, with one warning saying how to rebuild.

``PYTIMELY_PURE=1`` (or ``true``, ``yes``, ``on``) ignores the build whatever its state.  This is the only
module of :mod:`scopes` that reads files, and only at import.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

MODULES = (
    "scopes.progress.order",
    "scopes.progress.antichain",
    "scopes.progress.change_batch",
    "scopes.progress.reachability",
    "scopes.progress.visit_order",
    "scopes.progress.operate",
    "scopes.progress.progcaster",
    "scopes.progress.subgraph",
    "scopes.ports",
    "scopes.local_channels",
    "scopes.bursts",
    "scopes.capability",
    "scopes.operator",
    "scopes.handles",
    "scopes.input_handle",
    "scopes.probes",
    "scopes.per_record",
    "scopes.notificator",
)
"""The modules the compiled build contains (mypyc compiles them as one group)."""

SOURCE_ROOT = Path(__file__).resolve().parent.parent
"""The directory that holds the ``scopes`` package."""

BUILD_DIR = SOURCE_ROOT / "build" / "mypyc"
"""Where ``make compiled`` puts the compiled modules and their manifest."""

MANIFEST = "manifest.json"
"""The manifest's file name in :data:`BUILD_DIR`."""

MAX_MANIFEST_BYTES = 1 << 16
"""The largest manifest read (a real one holds a few kilobytes); a larger one makes the build unusable."""

PURE_VARIABLE = "PYTIMELY_PURE"
"""Set to ``1`` to ignore a compiled build."""

PURE_ON = ("1", "true", "yes", "on")
"""The values of :data:`PURE_VARIABLE` that ignore a compiled build (in any case)."""
PURE_OFF = ("", "0", "false", "no", "off")
"""The values that leave the choice to the build's state; any other is refused by :mod:`runtime.settings` when
the workers start, and meanwhile ignores the build (pure Python is always correct)."""


def pure_requested(text: str | None) -> bool | None:
    """Whether ``text`` (the value of :data:`PURE_VARIABLE`, ``None`` when unset) asks for pure Python; ``None``
    for a value that is neither on nor off."""
    value = (text or "").strip().lower()
    return True if value in PURE_ON else False if value in PURE_OFF else None


def source_hash(module: str, root: Path = SOURCE_ROOT) -> str:
    """The SHA-256 (hex) of ``module``'s source file under ``root``."""
    import hashlib  # here: most imports find no build and need no hashing

    path = root.joinpath(*module.split(".")).with_suffix(".py")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_problem(build_dir: Path = BUILD_DIR, root: Path = SOURCE_ROOT) -> str | None:
    """Why the build in ``build_dir`` must not be used for the sources under ``root`` (``None``: it may).

    A missing manifest is a problem too ("no compiled build"); the caller tells it from a stale one.
    """
    path = build_dir / MANIFEST
    if not path.is_file():
        return "no compiled build"
    import json

    try:
        with open(path, "rb") as file:
            data = file.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            return f"its manifest {path} is larger than {MAX_MANIFEST_BYTES} bytes"
        manifest = json.loads(data.decode("utf-8"))
        tag = manifest["cache_tag"]
        hashes = manifest["sources"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
        return f"its manifest {path} is unreadable ({type(error).__name__}: {error})"
    if tag != sys.implementation.cache_tag:
        return f"it was built for {tag}, and this interpreter is {sys.implementation.cache_tag}"
    if not isinstance(hashes, dict) or sorted(hashes) != sorted(MODULES):
        return f"it holds {sorted(hashes) if isinstance(hashes, dict) else hashes}, not {sorted(MODULES)}"
    for module in MODULES:
        try:
            current = source_hash(module, root)
        except OSError as error:
            return f"the source of {module} cannot be read ({error})"
        if current != hashes[module]:
            return f"{module}'s source changed since it was built"
    return None


def select(package: ModuleType, build_dir: Path = BUILD_DIR) -> list[str]:
    """Put the compiled modules in front of ``package``'s sources if the build is current; the names used.

    Imports them at once, so that a build that cannot load (an interpreter
    change the manifest did not catch, a module mypyc compiled but that fails
    as it runs) falls back to the sources with a warning rather than failing a
    later import.
    """
    if pure_requested(os.environ.get(PURE_VARIABLE)) is not False:
        return []
    problem = manifest_problem(build_dir)
    if problem == "no compiled build":
        return []
    from scopes.errors import StaleBuildWarning  # here: this module runs before the package's others

    if problem is not None:
        warnings.warn(
            f"ignoring the compiled build in {build_dir}: {problem}; pure Python is used "
            "(run `make compiled` to rebuild it, or `make pure` to remove it)",
            StaleBuildWarning,
            stacklevel=3,
        )
        return []
    paths = _front_paths(package, build_dir)
    sys.path.append(str(build_dir))  # the group's shared library, imported by each compiled module
    try:
        for module in MODULES:
            importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - whatever a broken build raises, the sources still work
        for holder, inner in paths:
            holder.__path__.remove(inner)
        sys.path.remove(str(build_dir))
        for module in MODULES:
            sys.modules.pop(module, None)
        warnings.warn(
            f"ignoring the compiled build in {build_dir}: it does not load ({type(error).__name__}: {error}); "
            "pure Python is used",
            StaleBuildWarning,
            stacklevel=3,
        )
        return []
    return list(MODULES)


def _front_paths(package: ModuleType, build_dir: Path) -> list[tuple[ModuleType, str]]:
    """Put the build's directory of ``package`` and of each subpackage holding :data:`MODULES` first on its path.

    Returns each ``(package, directory)`` added.  The subpackages (``scopes.progress``)
    are imported here; their ``__init__`` imports none of the modules the build replaces.
    """
    added = []
    for name in sorted({module.rsplit(".", 1)[0] for module in MODULES}):
        holder = package if name == package.__name__ else importlib.import_module(name)
        inner = str(build_dir.joinpath(*name.split(".")))
        holder.__path__.insert(0, inner)
        added.append((holder, inner))
    return added


def compiled_modules() -> list[str]:
    """The modules of the compiled build that run compiled in this interpreter (empty: pure Python)."""
    found = []
    for module in MODULES:
        loaded = sys.modules.get(module)
        path = getattr(loaded, "__file__", None) or ""
        if loaded is not None and not path.endswith(".py"):
            found.append(module)
    return found
