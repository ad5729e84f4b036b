"""Rebuild ``debian-bookworm-depends.tsv.gz`` from the local apt package lists.

Run ``apt-get update`` first, then ``python examples/data/rebuild_graph.py``.
It reads every ``/var/lib/apt/lists/*_Packages`` list (plain, ``.gz``, ``.xz``
or ``.lz4``; lz4 through ``lz4cat`` or apt's own ``apt-helper cat-file``), and
writes one ``package<TAB>dependency`` line per edge, sorted and without
repeats: every entry of ``Depends:`` and ``Pre-Depends:``, keeping the first
alternative of each ``a | b``, without version constraints (``(>= 1.0)``),
architecture qualifiers (``:any``) or architecture restrictions (``[amd64]``).
With the bookworm main/amd64 list this gives the shipped graph: 274,855 edges
between about 63,600 packages.
"""

from __future__ import annotations

import argparse
import bz2
import glob
import gzip
import lzma
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

LISTS = "/var/lib/apt/lists/*_Packages*"
OUTPUT = Path(__file__).resolve().parent / "debian-bookworm-depends.tsv.gz"
_FIELDS = ("Depends", "Pre-Depends")
_QUALIFIERS = re.compile(r"\s*(\(.*?\)|\[.*?\]|<.*?>)")


def read_list(path: str) -> str:
    """The text of one package list, decompressed."""
    if path.endswith(".gz"):
        return gzip.decompress(Path(path).read_bytes()).decode("utf-8")
    if path.endswith(".xz"):
        return lzma.decompress(Path(path).read_bytes()).decode("utf-8")
    if path.endswith(".bz2"):
        return bz2.decompress(Path(path).read_bytes()).decode("utf-8")
    if path.endswith(".lz4"):
        for command in (["lz4cat", path], ["/usr/lib/apt/apt-helper", "cat-file", path]):
            if shutil.which(command[0]) or Path(command[0]).exists():
                return subprocess.run(command, check=True, capture_output=True).stdout.decode("utf-8")
        raise RuntimeError(f"cannot decompress {path}: install lz4 (apt-get install lz4)")
    return Path(path).read_text(encoding="utf-8")


def dependency(entry: str) -> str | None:
    """The package an entry of a dependency field names: first alternative, no version or arch."""
    first = entry.split("|", 1)[0]
    name = _QUALIFIERS.sub("", first).strip()
    name = name.split(":", 1)[0].strip()
    return name or None


def edges_of(text: str) -> Iterator[tuple[str, str]]:
    """``(package, dependency)`` for every dependency entry of every stanza of a package list."""
    for stanza in text.split("\n\n"):
        package = None
        fields: list[str] = []
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if not sep or line[:1].isspace():
                continue
            if key == "Package":
                package = value.strip()
            elif key in _FIELDS:
                fields.append(value)
        if package is None:
            continue
        for value in fields:
            for entry in value.split(","):
                name = dependency(entry)
                if name:
                    yield package, name


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lists", default=LISTS, help=f"glob of apt package lists (default {LISTS})")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="gzip TSV to write")
    args = parser.parse_args(argv)
    paths = sorted(path for path in glob.glob(args.lists) if not path.endswith(".diff_Index"))
    if not paths:
        print(f"no package lists match {args.lists}: run apt-get update first", file=sys.stderr)
        return 1
    edges: set[tuple[str, str]] = set()
    for path in paths:
        edges.update(edges_of(read_list(path)))
    lines = "".join(f"{package}\t{name}\n" for package, name in sorted(edges))
    with gzip.open(args.output, "wt", encoding="utf-8", compresslevel=9) as out:
        out.write(lines)
    nodes = {node for edge in edges for node in edge}
    print(f"{args.output}: {len(edges):,} edges between {len(nodes):,} packages from {len(paths)} list(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
