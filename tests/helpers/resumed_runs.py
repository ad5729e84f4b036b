"""The check that a run killed after some epoch and resumed from its checkpoint gives the uninterrupted run's output.

The runs write each worker's results to ``ROOT/TAG-worker-I.jsonl`` as ``[time, record]`` lines (as
``helpers.nan_key_mains`` and ``helpers.columnar_window_mains`` do), and a run that is asked to crash after an
epoch raises an error saying ``crash after epoch N`` once that epoch is complete.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime import WorkerFailed


def _seen(root: Path, tag: str) -> list[str]:
    lines = [line for path in root.glob(f"{tag}-worker-*.jsonl") for line in path.read_text().splitlines()]
    return [json.dumps(json.loads(line)) for line in lines]


def assert_resume_repeats_the_plain_run(root: Path, run: Callable[[str, int], int], crash_after: int) -> None:
    """``run(tag, crash_after)`` (which returns the epoch it resumed from) runs uninterrupted as ``plain``, crashes
    after epoch ``crash_after`` as ``first`` and resumes as ``second``: the epochs ``first`` completed before the
    resume point and ``second``'s output together are ``plain``'s output, neither lost nor twice."""
    run("plain", -1)
    with pytest.raises(WorkerFailed, match=f"crash after epoch {crash_after}"):
        run("first", crash_after)
    resumed = run("second", -1)
    assert 0 < resumed <= crash_after + 1
    kept = [line for line in _seen(root, "first") if json.loads(line)[0] < resumed]
    assert _seen(root, "plain") and Counter(kept + _seen(root, "second")) == Counter(_seen(root, "plain"))
