"""Clusters from the command line: timely's flags, and ``execute_from_args``.

``execute_from_args`` runs ``main`` as the flags say: in this process
(``-n 1``), as ``P`` processes spawned on this machine (``-n P``, see
:mod:`runtime.launcher`), or as one process of a cluster whose other
processes were started separately with the same flags, on this or other
hosts (``-p``; see :mod:`runtime.cluster_member`): they find each other
through the hostfile.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn, TypeVar

from runtime.cluster_member import run_process
from runtime.communication.tcp import Endpoint, read_hostfile
from runtime.communication.tls import TlsConfig, tls_config
from runtime.environment_observers import LOG_VARIABLE, recording_processes
from runtime.errors import ConfigurationError, MetricsUnavailable
from runtime.execute import execute
from runtime.instrumentation.registry import check_log
from runtime.launcher import CONNECT_TIMEOUT, TOKEN_VARIABLE, execute_processes
from runtime.main_guard import refuse_while_importing_main
from runtime.metrics import METRICS_VARIABLE, check_metrics
from runtime.settings import check_stall_timeout, settings_for_run
from runtime.worker import Worker

R = TypeVar("R")

DEFAULT_PORT = 2101
"""Process ``i`` of a cluster without a hostfile listens at ``127.0.0.1:2101+i``."""


@dataclass(frozen=True)
class ClusterConfig:
    """timely's cluster flags: workers per process, processes, this process, hostfile, token."""

    workers: int = 1
    processes: int = 1
    process: int | None = None
    hostfile: str | None = None
    token: str | None = None
    log: str | None = None
    metrics: str | None = None
    tls: tuple[str, str, str] | None = None
    """Certificate, key and CA files: every connection is TLS (``--tls CERT KEY --tls-ca CA``)."""


class _FlagParser(argparse.ArgumentParser):
    """An argument parser whose errors (a flag's value that is not a number, a missing value) are
    :class:`ConfigurationError`, as the checks of the values that follow are."""

    def error(self, message: str) -> NoReturn:
        """Raise ``message`` as :class:`ConfigurationError` rather than print usage and exit."""
        raise ConfigurationError(message)


def cluster_arguments() -> argparse.ArgumentParser:
    """A parser of the cluster flags only (``add_help=False``: ``-h`` is the hostfile, as in timely).

    A malformed flag (``-w abc``) is a :class:`ConfigurationError`, not an exit.
    """
    parser = _FlagParser(add_help=False)
    group = parser.add_argument_group("cluster (timely's flags)")
    group.add_argument("-w", "--workers", type=int, default=1, help="worker threads per process (default 1)")
    group.add_argument("-n", "--processes", type=int, default=1, help="number of processes (default 1)")
    group.add_argument(
        "-p", "--process", type=int, default=None, help="run as this process of a cluster started separately"
    )
    group.add_argument("-h", "--hostfile", default=None, help="file with one host:port line per process")
    group.add_argument("--token", default=None, help=f"the cluster's shared secret (default: ${TOKEN_VARIABLE})")
    group.add_argument(
        "--log",
        default=None,
        help=f"instrumentation events to FILE (one file per process) or tcp://HOST:PORT (default: ${LOG_VARIABLE})",
    )
    group.add_argument(
        "--metrics",
        default=None,
        metavar="HOST:PORT",
        help=f"serve Prometheus /metrics at HOST:PORT, process P at PORT+P (default: ${METRICS_VARIABLE})",
    )
    group.add_argument(
        "--tls",
        nargs=2,
        default=None,
        metavar=("CERT", "KEY"),
        help="encrypt every connection with TLS: this process's certificate and key (PEM); needs --tls-ca",
    )
    group.add_argument(
        "--tls-ca", default=None, metavar="CA", help="the CA (PEM) that signed every process's --tls certificate"
    )
    return parser


def parse_cluster_args(argv: Sequence[str] | None = None) -> tuple[ClusterConfig, list[str]]:
    """Parse the cluster flags in ``argv`` (default ``sys.argv[1:]``); return them and the other arguments.

    A malformed or inconsistent flag is a :class:`ConfigurationError` naming it.
    """
    args, rest = cluster_arguments().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if (args.tls is None) != (args.tls_ca is None):
        raise ConfigurationError(
            "--tls CERT KEY and --tls-ca CA go together: each process needs its certificate and key, and the CA "
            "that signed every process's certificate"
        )
    tls = (args.tls[0], args.tls[1], args.tls_ca) if args.tls is not None else None
    config = ClusterConfig(
        args.workers, args.processes, args.process, args.hostfile, args.token, args.log, args.metrics, tls
    )
    if config.workers < 1:
        raise ConfigurationError(f"-w/--workers must be at least 1, got {config.workers}")
    if config.processes < 1:
        raise ConfigurationError(f"-n/--processes must be at least 1, got {config.processes}")
    if config.process is not None and not 0 <= config.process < config.processes:
        raise ConfigurationError(
            f"-p/--process must be between 0 and {config.processes - 1} (with -n {config.processes}), "
            f"got {config.process}"
        )
    if config.hostfile is not None and config.process is None:
        raise ConfigurationError("-h/--hostfile needs -p/--process: which line of the hostfile is this process?")
    return config, rest


def endpoints_for(config: ClusterConfig) -> list[Endpoint]:
    """The addresses of the cluster's processes: the hostfile's first lines, or ``127.0.0.1:2101+i``."""
    if config.hostfile is None:
        return [Endpoint("127.0.0.1", DEFAULT_PORT + i) for i in range(config.processes)]
    try:
        endpoints = read_hostfile(config.hostfile)
    except OSError as error:
        raise ConfigurationError(
            f"-h/--hostfile {config.hostfile}: cannot read the hostfile: {error.strerror or error}"
        ) from error
    except ValueError as error:  # names the file and the line
        raise ConfigurationError(f"-h/--hostfile: cannot read the hostfile {error}") from error
    if len(endpoints) < config.processes:
        raise ConfigurationError(
            f"the hostfile {config.hostfile} lists {len(endpoints)} process(es), but -n is {config.processes}"
        )
    return endpoints[: config.processes]


def execute_from_args(
    main: Callable[[Worker], R],
    argv: Sequence[str] | None = None,
    stall_timeout: float | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> list[R]:
    """Run ``main`` as timely's command-line flags in ``argv`` say; return every worker's result in order.

    Flags (other arguments are ignored, so that a program can parse its own):
    ``-w/--workers W`` worker threads per process; ``-n/--processes P``;
    ``-p/--process I``: run as process ``I`` of a cluster whose other processes
    are started separately (on this or other hosts) with the same flags;
    ``-h/--hostfile FILE``: one ``host:port`` per line, process ``i`` listens at
    line ``i`` (default ``127.0.0.1:2101+i``); ``--token T``: the cluster's shared
    secret, else ``$PYTIMELY_TOKEN`` (required with ``-p`` and several processes);
    ``--tls CERT KEY --tls-ca CA``: every connection TLS, certificates checked against ``CA``.

    Without ``-p``, ``-n P`` starts ``P`` processes on this machine, as
    ``execute(main, processes=P, workers=W)`` does (``main`` must then be
    importable; see :func:`execute_processes`).  With ``-p``, every process
    returns the results of all workers, which travel to every process in the
    wire encoding; processes started separately must hash strings alike, so
    set ``PYTHONHASHSEED`` to the same value everywhere (the handshake checks).

    Every flag is checked first (:func:`plan_from_args`); a bad one ends the
    program as ``argparse`` does, with one ``PROG: error: MESSAGE`` line on
    stderr and status 2 (see :func:`refuse_flags`).  So does a ``--metrics``
    port taken after that check, when the run (or a process it starts) finds
    it taken: :class:`~runtime.errors.MetricsUnavailable`.
    """
    refuse_while_importing_main("execute_from_args(main)")
    check_stall_timeout(stall_timeout, "execute_from_args")
    try:
        plan = plan_from_args(argv)
    except ConfigurationError as error:
        refuse_flags(error)
    config = plan.config
    # every process of the cluster reads them (execute too, in this one), from the flags or from the environment;
    # set for this run only: a later execute() in this program must not log to this run's file again
    with settings_for_run({LOG_VARIABLE: config.log, METRICS_VARIABLE: config.metrics}):
        try:
            return _run_planned(main, plan, stall_timeout, connect_timeout)
        except MetricsUnavailable as error:  # the --metrics port was taken after the check: refused as then
            refuse_flags(error)


@dataclass(frozen=True)
class ClusterPlan:
    """The cluster flags, checked: what :func:`execute_from_args` runs."""

    config: ClusterConfig
    tls: TlsConfig | None = None
    """The loaded ``--tls`` files, with several processes."""
    endpoints: list[Endpoint] | None = None
    """Where each process listens, with ``-p``."""
    token: str = ""
    """The cluster's shared token, with ``-p``."""


def plan_from_args(argv: Sequence[str] | None = None) -> ClusterPlan:
    """Parse and check every cluster flag in ``argv`` before anything runs: a :class:`ConfigurationError` says
    which is wrong (a value, the hostfile, ``--metrics``, ``--log``, the TLS files, the token)."""
    config, _ = parse_cluster_args(argv)
    if config.metrics is not None:  # process P listens at PORT + P: those started here
        check_metrics(config.metrics, range(config.processes) if config.process is None else [config.process])
    check_log(config.log, config.process or 0, config.processes)
    if config.processes == 1:
        return ClusterPlan(config)
    tls = tls_config(*config.tls) if config.tls is not None else None
    if config.process is None:
        return ClusterPlan(config, tls)
    endpoints = endpoints_for(config)
    token = config.token or os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise ConfigurationError(
            f"process {config.process} of a cluster started separately needs the cluster's shared token: "
            f"set {TOKEN_VARIABLE} or pass --token, with the same value in every process"
        )
    try:
        token.encode("utf-8")  # bytes that are not UTF-8 come from os.environ as surrogates: every handshake fails
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"the cluster's token ({TOKEN_VARIABLE} or --token) must be UTF-8 text, and this one holds other "
            f"bytes; use a value such as the output of `openssl rand -hex 16`, the same in every process"
        ) from None
    return ClusterPlan(config, tls, endpoints, token)


def refuse_flags(error: ConfigurationError) -> NoReturn:
    """End the program as argparse does for a bad flag: ``PROG: error: MESSAGE`` on stderr, status 2, no traceback.

    Only for the cluster flags, checked before anything runs: errors raised later, by the run or by the
    program's own code, keep their tracebacks.
    """
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    message = " ".join(str(error).split("\n"))
    print(f"{program}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def _run_planned(
    main: Callable[[Worker], R], plan: ClusterPlan, stall_timeout: float | None, connect_timeout: float
) -> list[R]:
    """:func:`execute_from_args` once the flags are checked and in the environment."""
    config = plan.config
    if config.processes == 1:  # execute turns on what --log and --metrics asked for
        return execute(main, workers=config.workers, stall_timeout=stall_timeout)
    if config.process is None or plan.endpoints is None:
        with recording_processes(config.processes):  # a Recorder in this program gets the processes' events
            return execute_processes(main, config.processes, config.workers, stall_timeout, connect_timeout, config.tls)
    return run_process(
        main, config.process, plan.endpoints, config.workers, plan.token, stall_timeout, connect_timeout, tls=plan.tls
    )
