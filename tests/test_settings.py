"""A wrong value of any runtime setting is refused before any work starts, the same at every worker count.

Each setting used to be read only where it is used: the transport, ring and send-window settings only by
processes (``PYTIMELY_TRANSPORT=udp`` ran on threads), ``PYTIMELY_THREAD_CORES`` only by a process of several
worker threads (``two`` was refused with ``-w 2`` and ran with ``-n 2``), and ``PYTIMELY_AUDIT=2`` or ``enabled``
ran without the audit, saying nothing.  Found giving each setting of docs/operations.md a wrong value.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime import execute
from runtime.audit import audit_setting
from runtime.errors import ConfigurationError
from runtime.settings import check_settings
from scopes.native import pure_requested

WRONG = [
    ("PYTIMELY_TRANSPORT", "udp", "'shm' or 'tcp'"),
    ("PYTIMELY_SHM_RING_BYTES", "2G", "from 65536 to 1073741824"),
    ("PYTIMELY_SEND_WINDOW", "4 MB?", "of at least 65536"),
    ("PYTIMELY_MAX_FRAME_BYTES", "-1", "from 65536 to 4294967295"),
    ("PYTIMELY_THREAD_CORES", "two", "'auto'"),
    ("PYTIMELY_AUDIT", "enabled", "1 (or true, yes, on)"),
    ("PYTIMELY_AUDIT", "2", "0 (or false, no, off, or unset)"),
    ("PYTIMELY_PURE", "compiled", "1 (or true, yes, on)"),
]

CONFIGURATIONS: list[dict[str, Any]] = [{"workers": 1}, {"workers": 2}, {"processes": 2}]


def never_runs(worker: Any) -> None:
    raise AssertionError("main ran though a setting was wrong")


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=["1 worker", "2 threads", "2 processes"])
@pytest.mark.parametrize(("name", "value", "takes"), WRONG)
def test_a_wrong_setting_is_refused_before_any_worker_runs(
    monkeypatch: pytest.MonkeyPatch, configuration: dict[str, Any], name: str, value: str, takes: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as refused:
        execute(never_runs, **configuration)
    message = str(refused.value)
    assert message.startswith(f"{name} must be") and repr(value) in message and takes in message, message


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=["1 worker", "2 threads", "2 processes"])
@pytest.mark.parametrize("stall_timeout", [-1, 0, "5", True, float("nan")], ids=repr)
def test_a_wrong_stall_timeout_is_refused_the_same_way_at_every_worker_count(
    configuration: dict[str, Any], stall_timeout: Any
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        execute(never_runs, stall_timeout=stall_timeout, **configuration)
    assert str(refused.value) == f"execute needs stall_timeout > 0 (a number of seconds) or None, got {stall_timeout!r}"


@pytest.mark.parametrize("name", [name for name, _, _ in WRONG])
def test_an_empty_setting_is_the_default(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, " ")
    check_settings()
    assert execute(lambda worker: worker.index, workers=2) == [0, 1]


@pytest.mark.parametrize("value", ["1", "TRUE", " yes", "on", "0", "false", "No", "off", ""])
def test_every_documented_audit_value_is_taken(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    check_settings({"PYTIMELY_AUDIT": value})  # no ConfigurationError
    assert audit_setting(value) is (value.strip().lower() in ("1", "true", "yes", "on"))


@pytest.mark.parametrize(
    ("value", "pure"),
    [
        ("1", True),
        ("Yes", True),
        ("on", True),
        ("0", False),
        ("no", False),
        ("off", False),
        ("", False),
        (None, False),
        ("maybe", None),
    ],
)
def test_the_pure_setting_takes_the_audits_words(value: str | None, pure: bool | None) -> None:
    """``PYTIMELY_PURE=no`` used to select pure Python (any value but "" and "0" did)."""
    assert pure_requested(value) is pure


def test_a_setting_for_one_run_is_restored_after_it() -> None:
    """``settings_for_run`` (execute's audit for new processes, execute_from_args's --log and --metrics) leaves
    the environment as it found it, also after an error."""
    import os

    from runtime.settings import settings_for_run

    os.environ.pop("PYTIMELY_LOG", None)
    os.environ["PYTIMELY_METRICS"] = "off"
    try:
        with pytest.raises(RuntimeError), settings_for_run({"PYTIMELY_LOG": "x.msgpack", "PYTIMELY_METRICS": ":0"}):
            assert os.environ["PYTIMELY_LOG"] == "x.msgpack" and os.environ["PYTIMELY_METRICS"] == ":0"
            raise RuntimeError("the run failed")
        assert "PYTIMELY_LOG" not in os.environ and os.environ["PYTIMELY_METRICS"] == "off"
        with settings_for_run({"PYTIMELY_METRICS": None}):  # None: left as it is
            assert os.environ["PYTIMELY_METRICS"] == "off"
    finally:
        os.environ.pop("PYTIMELY_METRICS", None)


def test_a_wrong_stall_setting_of_a_worker_is_refused() -> None:
    wrong = [("stall_timeout", -1), ("stall_timeout", "5"), ("stall_warning", 0), ("certain_stall", None)]

    def main(worker: Any) -> list[str]:
        refused = []
        for name, value in wrong:
            with pytest.raises(ConfigurationError) as error:
                setattr(worker, name, value)
            refused.append(str(error.value))
        worker.stall_warning = None  # never warn: allowed
        return refused

    (refused,) = execute(main)
    assert refused == [
        "worker needs stall_timeout > 0 (a number of seconds) or None, got -1",
        "worker needs stall_timeout > 0 (a number of seconds) or None, got '5'",
        "worker needs stall_warning > 0 (a number of seconds) or None, got 0",
        "worker needs certain_stall > 0 (a number of seconds), got None",
    ]
