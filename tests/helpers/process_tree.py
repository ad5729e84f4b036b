"""Resident memory of a process and all its descendants, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
import subprocess
import threading
import time


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, now."""
    return _children_of().get(pid, [])


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and every process descended from it, now."""
    children = _children_of()
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _rss_bytes(pid)
        stack.extend(children.get(pid, ()))
    return total


def run_measuring_peak(command: list[str], timeout: float, env: dict[str, str]) -> tuple[str, int]:
    """Run ``command``; return its standard output and the peak of its process tree's resident bytes.

    The tree is sampled every 20 ms; the process is killed after ``timeout`` seconds.
    """
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True)
    peak = [0]
    finished = threading.Event()

    def sample() -> None:
        while not finished.is_set():
            peak[0] = max(peak[0], tree_rss(process.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        finished.set()
        sampler.join()
        if process.poll() is None:
            process.kill()
            process.wait()
    return output, peak[0]
