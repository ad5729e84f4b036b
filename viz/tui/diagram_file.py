"""Where the viewer's ``d`` key writes a diagram: a new numbered file, never one that exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

PATTERN = re.compile(r"pytimely-diagram-(\d+)\.svg")
"""The names the viewer writes: ``pytimely-diagram-N.svg``."""


def reserve_diagram_path(directory: Path) -> Path:
    """Create, empty, the first ``pytimely-diagram-N.svg`` in ``directory`` numbered past every existing one.

    Creating it exclusively (``O_EXCL``) reserves the name, so neither an
    earlier session's diagrams nor another viewer writing into the same
    directory at the same moment is ever overwritten.  Raises ``OSError`` if
    the directory cannot be written.
    """
    numbers = [int(found.group(1)) for name in os.listdir(directory) if (found := PATTERN.fullmatch(name))]
    number = max(numbers, default=0) + 1
    while True:
        path = directory / f"pytimely-diagram-{number}.svg"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:  # another viewer took it since the listing
            number += 1
            continue
        return path.resolve()
