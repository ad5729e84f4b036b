"""Build, inspect and remove the optional mypyc-compiled build of the progress, operator and channel path.

The build is optional: a plain ``pip install -e .`` runs pure Python.  It
compiles :data:`scopes.native.MODULES` with mypyc (in the ``dev`` extra, with
a C compiler and the Python headers) into :data:`scopes.native.BUILD_DIR`,
outside the packages, and writes the manifest that :mod:`scopes.native`
checks at import: a build is used only while every compiled source is
unchanged.

    python -m runtime.compiled build     # or: make compiled
    python -m runtime.compiled status    # which modules run compiled, or why none
    python -m runtime.compiled remove    # or: make pure
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from runtime.errors import ConfigurationError
from scopes.native import BUILD_DIR, MANIFEST, MODULES, SOURCE_ROOT, compiled_modules, manifest_problem, source_hash

__all__ = ["build", "compiled_modules", "main", "remove", "status"]

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

sources, target = sys.argv[1].split(","), sys.argv[2]
sys.argv[1:] = ["build_ext", "--build-lib", target, "--build-temp", target + ".obj"]
setup(name="pytimely-compiled", ext_modules=mypycify(sources, opt_level="3", target_dir=target + ".c"))
"""


def build(build_dir: Path = BUILD_DIR, root: Path = SOURCE_ROOT, quiet: bool = True) -> list[str]:
    """Compile :data:`~scopes.native.MODULES` under ``root`` into ``build_dir`` (replacing any build there).

    Returns the modules compiled.  Raises :class:`~runtime.errors.ConfigurationError`
    if mypyc is missing or the compilation fails (its output is in the message).
    """
    try:
        import mypyc  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "building the compiled modules needs mypyc, which comes with mypy: pip install -e '.[dev]'"
        ) from None
    hashes = {module: source_hash(module, root) for module in MODULES}
    sources = [str(root.joinpath(*module.split(".")).with_suffix(".py")) for module in MODULES]
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mypyc-", dir=build_dir.parent) as work:
        staged = Path(work) / "out"
        done = subprocess.run(
            [sys.executable, "-c", _SETUP, ",".join(sources), str(staged)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise ConfigurationError(
                f"mypyc could not compile {', '.join(MODULES)} (exit status {done.returncode}):\n"
                + (done.stdout + done.stderr)[-4000:]
            )
        if not quiet:
            print(done.stdout[-2000:], end="")
        changed = [module for module in MODULES if source_hash(module, root) != hashes[module]]
        if changed:
            raise ConfigurationError(f"{', '.join(changed)} changed while being compiled; build again")
        (staged / MANIFEST).write_text(
            json.dumps({"cache_tag": sys.implementation.cache_tag, "sources": hashes}, indent=1) + "\n"
        )
        remove(build_dir)
        staged.rename(build_dir)
    return list(MODULES)


def remove(build_dir: Path = BUILD_DIR) -> bool:
    """Delete the compiled build in ``build_dir``; whether there was one."""
    if not build_dir.exists():
        return False
    manifest = build_dir / MANIFEST
    if manifest.exists():
        manifest.unlink()  # first: a half-removed build is never used
    shutil.rmtree(build_dir)
    return True


def status(build_dir: Path = BUILD_DIR) -> str:
    """One line: the modules this interpreter runs compiled, or why it runs pure Python."""
    running = compiled_modules()
    if running:
        return f"compiled ({build_dir}): {', '.join(running)}"
    problem = manifest_problem(build_dir)
    return f"pure Python ({problem or 'the build is current but was not selected, e.g. PYTIMELY_PURE is set'})"


def main(argv: list[str] | None = None) -> int:
    """The command line: ``build``, ``status`` or ``remove``."""
    parser = argparse.ArgumentParser(prog="python -m runtime.compiled", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "status", "remove"])
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            modules = build()
        except ConfigurationError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"compiled {', '.join(modules)} into {BUILD_DIR}")
    elif args.command == "remove":
        print(f"removed {BUILD_DIR}" if remove() else f"no compiled build in {BUILD_DIR}")
    else:
        print(status())
    return 0


if __name__ == "__main__":
    sys.exit(main())
