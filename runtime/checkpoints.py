"""Checkpoints: resume a dataflow after a crash from the last epoch every worker completed.

``worker.dataflow(build, checkpoint=CheckpointStore(path))`` turns them on.  At
every ``every``-th epoch boundary ``E`` that the whole dataflow has passed,
each worker writes one file holding every stateful operator's state as of the
times before ``E`` (:mod:`scopes.state_registry`).  A restarted program with
the same dataflow and worker count finds the latest ``E`` for which *every*
worker's file is there and sound, restores each operator's state from its file,
advances the dataflow's inputs to ``E``, and tells the program where to resume
(:attr:`CheckpointStore.resume_epoch`): it sends its inputs again from epoch
``E``, and the output is what an uninterrupted run gives.

Files, one per worker and boundary, under ``path/workers-W/worker-I/``::

    magic (8 bytes)  version (u16)  header length (u32)  header (msgpack)
    body length (u64)  body (msgpack: operator key -> encoded state)
    BLAKE2b-256 of everything before it (32 bytes)

A file is written under a hidden name (``.epoch-...tmp``), flushed to disk and
renamed, so a file that has its name is whole; the hidden files of a run killed
while writing are removed when the job runs again.  A damaged file is refused with
its path and byte offset, and the previous complete boundary is used instead; a
file written by another dataflow shape or another worker count, or for another
epoch than its name says, is refused with a message that says so, and so is one
whose keyed state holds a key that the current routing sends to another worker
(:mod:`scopes.key_owners`): written by a pytimely that routed keys otherwise, or
moved from another worker's directory.  Restored state is checked to be state
the operators make (windows of the spec, timers and closes not before the
checkpoint's epoch), as far as that can be told: the checksum is no signature.
Only the last ``keep`` boundaries that every worker has are kept (with any newer
ones).  The path may be any directory every worker can reach (a local disk for
one host, a shared file system for several).
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import warnings
from pathlib import Path
from time import monotonic
from typing import Any

import msgpack  # type: ignore[import-untyped]

from runtime.codec import shown
from runtime.communication.wire import WireError, decode_value, encode_value
from runtime.errors import CheckpointCorrupt, CheckpointError, CheckpointMismatch, ConfigurationError
from runtime.fingerprint import Fingerprint, fingerprint
from scopes.errors import BuildError, KeyNotOwned, StateRestoreFailed
from scopes.progress.reachability import Tracker
from scopes.progress.subgraph import Subgraph
from scopes.progress.timestamp import INTEGER, TimestampType
from scopes.state_registry import ENDED, StateRegistry

MAGIC = b"\x89PTCK\r\n\x1a"
"""The first 8 bytes of a checkpoint file."""

VERSION = 1
"""The checkpoint format this module writes and reads."""

_HEAD = struct.Struct(">HI")
_BODY = struct.Struct(">Q")
_DIGEST = 32
MAX_HEADER = 1 << 20
"""Headers declaring more bytes than this are damage."""

UNSHARED_GRACE = 300.0
"""Seconds another worker's checkpoint directory may stay unseen before the store is judged not shared: a network
file system's cache can hide a directory another host made for a while (a minute by NFS's defaults)."""

_NAME = re.compile(r"^epoch-(\d{20})\.ckpt$")
_HIDDEN = re.compile(r"^\.epoch-\d{20}\.ckpt\.\d+\.tmp$")


def shape_of(fingerprint: Fingerprint) -> str:
    """A short digest of a dataflow's structure, to recognise checkpoints of the same dataflow."""
    return hashlib.blake2b(repr(fingerprint).encode(), digest_size=16).hexdigest()


class CheckpointStore:
    """A directory of checkpoints for one dataflow (see the module docstring).

    ``keep`` complete boundaries are kept; a checkpoint is taken at every
    ``every``-th epoch boundary.  After the dataflow is built,
    :attr:`resume_epoch` is the epoch the program sends its inputs from: 0 for
    a fresh start.

    ``own_outputs=True`` says the program writes its outputs itself (not
    through ``write_files``) and reports them with :meth:`written_before`: a
    checkpoint then never claims an epoch whose outputs the program has not
    reported, from the first step of the first run and of every resumed one.
    """

    def __init__(self, path: str | os.PathLike[str], keep: int = 3, every: int = 1, own_outputs: bool = False) -> None:
        """Checkpoints under ``path`` (made if missing)."""
        if keep.__class__ is not int or keep < 1:
            raise ConfigurationError(f"CheckpointStore needs keep >= 1 (an int), got {keep!r}")
        if every.__class__ is not int or every < 1:
            raise ConfigurationError(f"CheckpointStore needs every >= 1 (an int), got {every!r}")
        self.path = Path(path)
        self.keep = keep
        self.every = every
        self.resume_epoch = 0
        self.own_outputs = own_outputs
        self.durable: dict[int, int] = {}
        """Per worker of a store with ``own_outputs``: the times before this have durable outputs."""
        self._unseen_since: dict[int, float] = {}  # per worker: when it first missed another worker's directory

    def written_before(self, worker: int, time: int) -> None:
        """Say that worker ``worker`` has made durable every output of the times before ``time``.

        Only for a store made with ``own_outputs=True``: without it, checkpoints
        taken before the first call could claim outputs a crash then loses, so
        the call is refused.
        """
        if not self.own_outputs:
            raise ConfigurationError(
                f"written_before on the checkpoint store {self.path} made without own_outputs=True: make it with "
                "CheckpointStore(path, own_outputs=True), so that no checkpoint claims an epoch before its outputs "
                "are reported (one taken before this first call could lose them in a crash)"
            )
        self.durable[worker] = max(self.durable.get(worker, 0), time)

    def claim_output(self, location: str, record: bool) -> bool:
        """Whether an earlier run of this store's job already wrote to ``location`` (a sink's directory).

        With ``record``, remember (durably, before the run writes anything there)
        that this job writes it.  A sink resumed at epoch 0, after a crash before
        the first checkpoint, thereby knows that the epochs it finds are its own.
        """
        marker = self.path / "outputs" / f"{hashlib.blake2b(location.encode(), digest_size=16).hexdigest()}.claim"
        try:
            claimed = marker.read_text(encoding="utf-8") == location
        except OSError:
            claimed = False
        if record and not claimed:
            marker.parent.mkdir(parents=True, exist_ok=True)
            for stale in marker.parent.glob(f".{marker.name}.*.tmp"):  # a crashed run's unfinished claim
                stale.unlink(missing_ok=True)
            _write_whole(marker, location.encode("utf-8"))
        return claimed

    def directory(self, worker: int, peers: int) -> Path:
        """Where worker ``worker`` of ``peers`` keeps its files."""
        return self.path / f"workers-{peers}" / f"worker-{worker}"

    # ------------------------------------------------------------------ writing

    def write(self, worker: int, peers: int, shape: str, boundary: int, states: dict[str, bytes]) -> Path:
        """Write worker ``worker``'s file for ``boundary``: hidden, flushed, then renamed into place."""
        directory = self.directory(worker, peers)
        header = encode_value({"shape": shape, "workers": peers, "worker": worker, "epoch": boundary})
        body = encode_value(states)
        data = b"".join([MAGIC, _HEAD.pack(VERSION, len(header)), header, _BODY.pack(len(body)), body])
        data += hashlib.blake2b(data, digest_size=_DIGEST).digest()
        final = directory / f"epoch-{boundary:020d}.ckpt"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            _write_whole(final, data)
        except OSError as error:  # a full disk, a file where a directory should be: the run cannot go on safely
            raise CheckpointError(
                f"worker {worker} cannot write its checkpoint of epoch {boundary} as {final}: {error.strerror or error}"
            ) from error
        return final

    def prepare(self, worker: int, peers: int) -> None:
        """Make worker ``worker``'s directory now, so that a path no checkpoint can be written under is refused when
        the dataflow is built, not at its first checkpoint."""
        directory = self.directory(worker, peers)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CheckpointError(
                f"the checkpoint store {str(self.path)!r} cannot hold worker {worker}'s checkpoints: making "
                f"{str(directory)!r} failed ({error.strerror or error}); give CheckpointStore a directory it can write"
            ) from error

    def discard_unfinished(self, worker: int, peers: int) -> None:
        """Remove the hidden files a run killed while writing left in worker ``worker``'s directory.

        Only this worker writes there, and a run calls this before it writes, so
        every hidden file found belongs to a run that has ended.
        """
        directory = self.directory(worker, peers)
        if not directory.is_dir():
            return
        for name in os.listdir(directory):
            if _HIDDEN.match(name):
                (directory / name).unlink(missing_ok=True)

    def prune(self, worker: int, peers: int) -> None:
        """Remove this worker's files older than the last ``keep`` boundaries that every worker has.

        A worker may write ahead of another; pruning by its own files alone could
        leave no boundary common to all, so the others' files decide what goes.
        """
        if not self._shared(worker, peers):
            return
        common = sorted(set.intersection(*(self.boundaries(w, peers) for w in range(peers))))
        if len(common) < self.keep:
            return
        floor = common[-self.keep]
        for boundary in self.boundaries(worker, peers):
            if boundary < floor:
                (self.directory(worker, peers) / f"epoch-{boundary:020d}.ckpt").unlink(missing_ok=True)

    def _shared(self, worker: int, peers: int) -> bool:
        """Whether worker ``worker`` sees every other worker's directory, as a store every worker reaches shows it.

        Every worker makes its directory when it builds the dataflow, before any
        boundary can pass, so one missing at a checkpoint is a store each process
        or host has its own of: no checkpoint would ever be common to all workers,
        so a resumed run would start from epoch 0, and nothing would be pruned.
        A network file system's cache may hide a new directory for a while, so
        the first time is a warning, and :class:`CheckpointError` follows only if
        it is still missing :data:`UNSHARED_GRACE` seconds later.
        """
        unseen = [w for w in range(peers) if w != worker and not self.directory(w, peers).is_dir()]
        if not unseen:
            self._unseen_since.pop(worker, None)
            return True
        now = monotonic()
        since = self._unseen_since.setdefault(worker, now)
        missing = (
            f"worker {worker} wrote its checkpoint under {str(self.path)!r}, where the directories of worker(s) "
            f"{', '.join(map(str, unseen))} are missing"
        )
        advice = (
            "Give CheckpointStore a directory every worker reaches (a shared file system across hosts): without "
            "one, no checkpoint is ever common to all workers, so a resumed run starts from epoch 0, and no file "
            "is pruned"
        )
        if now - since < UNSHARED_GRACE:
            if since == now:
                warnings.warn(
                    f"{missing}; a network file system's cache may hide them for a while, and the run fails if they "
                    f"are still missing {UNSHARED_GRACE:.0f} s from now. {advice}",
                    stacklevel=2,
                )
            return False
        raise CheckpointError(
            f"{missing}, {now - since:.0f} s after it first missed them: the store is not one directory every "
            f"worker reaches (each process or host has its own). {advice}"
        )

    # ------------------------------------------------------------------ reading

    def boundaries(self, worker: int, peers: int) -> set[int]:
        """The boundaries worker ``worker`` has a file for (by name; not yet checked)."""
        directory = self.directory(worker, peers)
        if not directory.is_dir():
            return set()
        return {int(match.group(1)) for name in os.listdir(directory) if (match := _NAME.match(name))}

    def read(self, path: Path, peers: int, worker: int, shape: str, epoch: int | None = None) -> dict[str, bytes]:
        """The operator states in ``path``; :class:`CheckpointCorrupt` or :class:`CheckpointMismatch` if unfit.

        With ``epoch``, the file must have been written for that boundary (the one its name gives).
        """
        try:
            data = path.read_bytes()
        except OSError as error:  # a directory, an unreadable file, an I/O error: no checkpoint to use
            raise CheckpointCorrupt(
                f"{path}: cannot be read ({error.strerror or error}); it is not a checkpoint this run can use"
            ) from error
        if len(data) < len(MAGIC) and MAGIC.startswith(data):
            raise CheckpointCorrupt(f"{path}: cut short at byte {len(data)}, within the magic number")
        if not data.startswith(MAGIC):
            raise CheckpointCorrupt(f"{path}: not a pytimely checkpoint (no magic number at byte 0)")
        if len(data) < len(MAGIC) + _HEAD.size + _BODY.size + _DIGEST:
            raise CheckpointCorrupt(f"{path}: cut short at byte {len(data)}")
        version, header_length = _HEAD.unpack_from(data, len(MAGIC))
        if version != VERSION:
            if _whole_with_version(data, VERSION):  # every other byte is a sound file of ours: damage, not a format
                raise CheckpointCorrupt(
                    f"{path}: the format version at byte {len(MAGIC)} reads {version}, in a file that is a whole "
                    f"version {VERSION} checkpoint but for it: damaged"
                )
            raise CheckpointMismatch(
                f"{path}: checkpoint format version {version} at byte {len(MAGIC)}; this pytimely reads version "
                f"{VERSION} only"
            )
        at = len(MAGIC) + _HEAD.size
        if header_length > MAX_HEADER or at + header_length + _BODY.size + _DIGEST > len(data):
            raise CheckpointCorrupt(f"{path}: header length {header_length} at byte {at - 4} overruns the file")
        (body_length,) = _BODY.unpack_from(data, at + header_length)
        end = at + header_length + _BODY.size + body_length
        if end + _DIGEST != len(data):
            raise CheckpointCorrupt(
                f"{path}: body length {body_length} at byte {at + header_length} does not match the file's "
                f"{len(data)} bytes"
            )
        if hashlib.blake2b(data[:end], digest_size=_DIGEST).digest() != data[end:]:
            raise CheckpointCorrupt(f"{path}: the checksum at byte {end} does not match the {end} bytes before it")
        header = _decode(path, data[at : at + header_length], at, "header")
        if not isinstance(header, dict) or header.get("workers") != peers or header.get("worker") != worker:
            raise CheckpointMismatch(
                f"{path}: written for another worker or worker count: its header at byte {at} is {shown(header, 200)}"
            )
        if epoch is not None and header.get("epoch") != epoch:
            raise CheckpointMismatch(
                f"{path}: written at epoch boundary {shown(header.get('epoch'))} (its header at byte {at}), not at "
                f"{epoch} as its name says: a file copied or renamed from another epoch would resume with the state "
                "of the wrong epoch; move it aside to resume from an earlier checkpoint"
            )
        if header.get("shape") != shape:
            raise CheckpointMismatch(
                f"{path}: written by another dataflow (its shape {shown(header.get('shape'))} in its header at "
                f"byte {at} is not this one's {shape!r}): resume with the same dataflow, or start afresh in another "
                "directory"
            )
        body = at + header_length + _BODY.size
        states = _decode(path, data[body:end], body, "body")
        if not isinstance(states, dict) or not all(
            key.__class__ is str and value.__class__ is bytes for key, value in states.items()
        ):
            raise CheckpointCorrupt(f"{path}: the body at byte {body} is not a state map (operator key -> bytes)")
        return states

    def latest(self, worker: int, peers: int, shape: str) -> tuple[int, dict[str, bytes] | None]:
        """The latest boundary every worker's sound file holds, and this worker's states there (0, None: none)."""
        self._refuse_other_worker_counts(peers)
        common = set.intersection(*(self.boundaries(w, peers) for w in range(peers)))
        for boundary in sorted(common, reverse=True):
            files = [self.directory(w, peers) / f"epoch-{boundary:020d}.ckpt" for w in range(peers)]
            try:
                found = [self.read(path, peers, w, shape, boundary) for w, path in enumerate(files)]
            except CheckpointCorrupt as error:
                warnings.warn(f"{error}; resuming from an earlier checkpoint", stacklevel=2)
                continue
            return boundary, found[worker]
        return 0, None

    def _refuse_other_worker_counts(self, peers: int) -> None:
        if not self.path.is_dir():
            return
        for entry in sorted(os.listdir(self.path)):
            match = re.match(r"^workers-(\d+)$", entry)
            if match and int(match.group(1)) != peers and any((self.path / entry).rglob("epoch-*.ckpt")):
                raise CheckpointMismatch(
                    f"{self.path} holds checkpoints written by {match.group(1)} workers, and this run has {peers}: "
                    f"resume with {match.group(1)} workers, or start afresh in another directory"
                )


def _whole_with_version(data: bytes, version: int) -> bool:
    """Whether ``data`` with ``version`` in its version field is a whole file: lengths and checksum right."""
    data = data[: len(MAGIC)] + struct.pack(">H", version) + data[len(MAGIC) + 2 :]
    (header_length,) = struct.unpack_from(">I", data, len(MAGIC) + 2)
    at = len(MAGIC) + _HEAD.size + header_length
    if at + _BODY.size + _DIGEST > len(data):
        return False
    end = at + _BODY.size + _BODY.unpack_from(data, at)[0]
    return end + _DIGEST == len(data) and hashlib.blake2b(data[:end], digest_size=_DIGEST).digest() == data[end:]


def _state_offsets(path: Path) -> tuple[int | str, dict[str, int]]:
    """The byte offset of the body of the checkpoint at ``path``, and of each operator's state in it, for an error.

    Only called once the file has been read as sound; ``"?"`` and ``{}`` if it cannot be read again.
    """
    try:
        data = path.read_bytes()
        (header_length,) = struct.unpack_from(">I", data, len(MAGIC) + 2)
        body = len(MAGIC) + _HEAD.size + header_length + _BODY.size
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data))
        unpacker.feed(memoryview(data)[body : len(data) - _DIGEST])
        offsets = {}
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key.__class__ is str:
                offsets[key] = body + unpacker.tell()
            unpacker.skip()
        return body, offsets
    except Exception:  # the file changed since it was read: the message names the file all the same
        return "?", {}


def _unfit(path: Path, error: Exception) -> CheckpointCorrupt:
    """:class:`CheckpointCorrupt` for the sound file at ``path``, whose operator states failed with ``error``."""
    key = error.key if isinstance(error, StateRestoreFailed) else None
    _, offsets = _state_offsets(path)
    whose = f" (the state at byte {offsets.get(key, '?')} for {key!r})" if key is not None else ""
    return CheckpointCorrupt(
        f"{path}: the operator states it holds do not restore this dataflow's operators{whose} "
        f"({type(error).__name__}: {error!s:.300}); it was not written by this dataflow as it is, or was "
        "changed: move it aside to resume from an earlier checkpoint, or start afresh in another directory"
    )


def _decode(path: Path, data: bytes, offset: int, what: str) -> Any:
    """The value encoded in ``data`` (the file's ``what``, at byte ``offset``); :class:`CheckpointCorrupt` if none.

    The checksum has been checked, but it is no signature (anyone can recompute
    it): what it covers is decoded as hostile, by the wire's bounded decoder.
    """
    try:
        return decode_value(data)
    except WireError as error:
        raise CheckpointCorrupt(f"{path}: the {what} at byte {offset} cannot be decoded: {error}") from error


class CheckpointManager:
    """Writes one worker's checkpoints of one dataflow as the dataflow passes epoch boundaries."""

    def __init__(
        self,
        store: CheckpointStore,
        registry: StateRegistry,
        tracker: Tracker,
        inputs: list[Any],
        worker: int,
        peers: int,
        shape: str,
    ) -> None:
        """Checkpoints of the dataflow whose top-level progress ``tracker`` follows, fed by ``inputs``."""
        self.inputs = inputs
        self.store = store
        self.registry = registry
        self.tracker = tracker
        self.worker = worker
        self.peers = peers
        self.shape = shape
        self.written = store.resume_epoch
        self.locations = len(tracker.locations())

    def poll(self) -> None:
        """Write the latest boundary the dataflow has passed and every operator covers, if it is new."""
        every = self.store.every
        covered = self.registry.common_boundary()
        if covered is None or covered - covered % every <= self.written:
            return
        if self.store.durable.get(self.worker, ENDED) - every < self.written:
            return
        boundary = min(covered, self.passed(), self.store.durable.get(self.worker, ENDED))
        if boundary >= ENDED:  # the dataflow has ended: its last boundary is where its inputs stopped
            boundary = max((handle.time for handle in self.inputs), default=0)
        boundary -= boundary % every
        if boundary <= self.written:
            return
        states = {key: operator.covering(boundary) for key, operator in self.registry.operators.items()}
        ready = {key: state for key, state in states.items() if state is not None}
        if len(ready) != len(states):
            return
        self.store.write(self.worker, self.peers, self.shape, boundary, ready)
        self.written = boundary
        for operator in self.registry.operators.values():
            operator.forget_before(boundary)
        self.store.prune(self.worker, self.peers)

    def passed(self) -> int:
        """The earliest time that may still be seen anywhere in the dataflow (``ENDED`` once nothing can)."""
        earliest = ENDED
        tracker = self.tracker
        for index in range(self.locations):
            for time in tracker.frontier_index(index).elements:
                if time < earliest:
                    earliest = time
        return earliest


def new_registry(store: CheckpointStore | None, timestamp: TimestampType, label: str) -> StateRegistry | None:
    """The state registry for a dataflow built with ``store`` (None without checkpoints)."""
    if store is None:
        return None
    if not isinstance(store, CheckpointStore):
        raise ConfigurationError(f"checkpoint= takes a runtime.checkpoints.CheckpointStore, not {store!r}")
    if timestamp is not INTEGER:
        raise ConfigurationError(
            f"dataflow {label!r} has {timestamp.name} timestamps; checkpoints are taken at integer epoch boundaries, "
            "so build it over integer times (loops inside it may have any)"
        )
    registry = StateRegistry(store.every, encode_value, decode_value)
    registry.claim_output = store.claim_output
    return registry


def resume(
    store: CheckpointStore, registry: StateRegistry, root: Subgraph, inputs: list[Any], worker: int, peers: int
) -> CheckpointManager:
    """Restore the latest complete checkpoint, if any, advance ``inputs`` to it, and start checkpointing."""
    shape = shape_of(fingerprint(root))
    store.discard_unfinished(worker, peers)
    boundary, states = store.latest(worker, peers, shape)
    store.prepare(worker, peers)
    if states is not None:
        path = store.directory(worker, peers) / f"epoch-{boundary:020d}.ckpt"
        try:
            registry.restore(boundary, states)
        except KeyNotOwned as error:  # sound, and of this dataflow, but a key's state is not where its records go
            raise CheckpointMismatch(
                f"{path}: {error}. The checkpoint was written by a version of pytimely that routed keys differently "
                "(or the file was moved); start afresh in a new checkpoint directory"
            ) from error
        except BuildError as error:  # the checkpoint is sound but does not fit this dataflow: say which file
            body, _ = _state_offsets(path)
            raise BuildError(f"{path} (its body at byte {body}): {error}") from error
        except Exception as error:  # an operator's restore met state of another shape than it keeps
            raise _unfit(path, error) from error
    try:
        registry.settle(boundary)
    except StateRestoreFailed as error:  # restored state that decoded but cannot resume (a window closed before it)
        if states is None:
            raise
        raise _unfit(store.directory(worker, peers) / f"epoch-{boundary:020d}.ckpt", error) from error
    store.resume_epoch = boundary
    if store.own_outputs:
        store.durable[worker] = boundary  # the outputs before it are the earlier run's; none after it yet
    if boundary:
        for handle in inputs:
            handle.advance_to(boundary)
            handle.resumed_at = boundary
    return CheckpointManager(store, registry, root.tracker, inputs, worker, peers, shape)


def _write_whole(final: Path, data: bytes) -> None:
    """Write ``data`` as ``final``: under a hidden name (``.NAME.PID.tmp``), flushed to disk, renamed into place and
    the rename flushed, so that a file with ``final``'s name is always whole."""
    hidden = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    with open(hidden, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(hidden, final)
    _sync_directory(final.parent)


def _sync_directory(directory: Path) -> None:
    """Flush a directory's entries (a rename) to disk, where the platform allows."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
