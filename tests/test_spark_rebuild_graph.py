"""examples/data/rebuild_graph.py: the rules that turn an apt package list into the shipped graph."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "data"))

import rebuild_graph  # noqa: E402

PACKAGES = """Package: alpha
Version: 1.0
Pre-Depends: dpkg (>= 1.15.6~)
Depends: libc6 (>= 2.34), python3:any, mail-transport-agent | postfix, libfoo [amd64], alpha-data (>= 1), alpha-data
Description: first line
 Depends: not-a-field

Package: beta
Depends: alpha
"""


def test_the_rules_keep_first_alternatives_and_drop_versions_and_qualifiers(tmp_path: Path) -> None:
    lists = tmp_path / "deb_dists_x_Packages"
    lists.write_text(PACKAGES, encoding="utf-8")
    output = tmp_path / "graph.tsv.gz"
    assert rebuild_graph.main(["--lists", str(lists), "--output", str(output)]) == 0
    lines = gzip.decompress(output.read_bytes()).decode().splitlines()
    assert lines == [
        "alpha\talpha-data",
        "alpha\tdpkg",
        "alpha\tlibc6",
        "alpha\tlibfoo",
        "alpha\tmail-transport-agent",
        "alpha\tpython3",
        "beta\talpha",
    ]


def test_compressed_lists_are_read(tmp_path: Path) -> None:
    path = tmp_path / "x_Packages.gz"
    path.write_bytes(gzip.compress(PACKAGES.encode()))
    assert ("beta", "alpha") in set(rebuild_graph.edges_of(rebuild_graph.read_list(str(path))))


def test_no_lists_is_an_error_that_says_to_run_apt_get_update(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert rebuild_graph.main(["--lists", str(tmp_path / "none*"), "--output", str(tmp_path / "o.gz")]) == 1
    assert "apt-get update" in capsys.readouterr().err
