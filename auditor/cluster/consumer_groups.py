"""Consumer groups read offline from ``__consumer_offsets``: committed offsets, protocol, state.

The group coordinator keeps every group's state as records of ``__consumer_offsets`` (one
partition per group: ``abs(hash(group)) % offsets.topic.num.partitions``) and rebuilds it on
load by replaying that partition in offset order (``OffsetMetadataManager.replay`` and
``GroupMetadataManager.replay`` in Kafka 4.x). :class:`OffsetsFold` replays the same way:

* a record's **key** says what it is about (its leading int16 is the record type: 0/1 an offset
  commit for (group, topic, partition), 2 a classic group, 3 and up the new protocol's records);
  the last record per key wins (the log cleaner keeps exactly that one, so compaction changes
  nothing); a null value (**tombstone**) deletes the key;
* offset commits written in a **transaction** (``send_offsets_to_transaction``: a transactional
  batch of the producer) wait for that producer's control marker: COMMIT applies them, but only
  over a plain commit written *before* them (record offset, as the coordinator does so that
  compaction cannot change the answer), ABORT drops them. A tombstone also drops a pending
  transactional commit of the same key;
* offset keys of version 0 and 1 have one layout and are one key (``OffsetCommitKey`` v0/v1).

Only the winning record per key is decoded into fields (``auditor.formats.offsets_records`` +
the generated spec tables): a superseded record cannot change the answer. Decoding problems
(an unknown record type, a value cut short, a group name that is not UTF-8) become notes naming
the file, byte position, record offset, field and value: never a crash.

A group's **protocol** is ``classic`` (GroupMetadata records, or only offset commits: a "simple"
group Kafka creates as an empty classic group), ``consumer`` (KIP-848 ConsumerGroup* records),
or ``share`` / ``streams`` for those record families. Its **state as last recorded**: a classic
group is ``Empty`` without members, else ``Stable`` (what the coordinator sets on load); a
consumer group is ``Empty`` without members, ``Assigning`` while its target assignment epoch is
behind the group epoch, ``Reconciling`` while a member's epoch is behind the target, else
``Stable``. A group whose last records are tombstones (deleted, or expired with no group record)
is **deleted**: not live.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

# OFFSETS_TOPIC, live_segments and offsets_partition_dirs are this module's names too (their callers import them here)
from auditor.cluster.offsets_segments import (MAX_READS, OFFSETS_TOPIC, offsets_partition_dirs,
                                              replay_partition_dir, segments_identity, settled_segments)
from auditor.formats import offsets_records as orec
from auditor.formats.errors import FormatError

#: Record types (key versions) of ``__consumer_offsets`` whose meaning the fold uses.
OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE = 6
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE = 8

_INT16 = struct.Struct(">h")


@dataclass
class CommittedOffset:
    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp_ms: int | None
    expire_timestamp_ms: int | None
    record_offset: int
    """offset of the winning record in __consumer_offsets."""
    offsets_partition: int | None
    transactional: bool
    value_version: int


@dataclass
class Group:
    group: str
    protocol: str
    """classic | consumer | share | streams"""
    protocol_type: str | None
    """classic groups: the recorded protocolType ("consumer", "connect", ...; "" for a simple group)."""
    state: str
    generation: int | None
    """classic: generation; consumer: group epoch."""
    members: int
    assignor: str | None
    state_timestamp_ms: int | None
    deleted: bool
    offsets_partition: int | None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)

    def to_dict(self) -> dict:
        topics: dict[str, dict[str, dict]] = {}
        for (t, p), c in sorted(self.offsets.items()):
            topics.setdefault(t, {})[str(p)] = {
                "committed_offset": c.offset, "leader_epoch": c.leader_epoch, "metadata": c.metadata,
                "commit_timestamp_ms": c.commit_timestamp_ms, "expire_timestamp_ms": c.expire_timestamp_ms,
                "transactional": c.transactional, "record_offset": c.record_offset}
        return {"group": self.group, "protocol": self.protocol, "protocol_type": self.protocol_type,
                "state": self.state, "generation": self.generation, "members": self.members,
                "assignor": self.assignor, "state_timestamp_ms": self.state_timestamp_ms,
                "deleted": self.deleted, "offsets_partition": self.offsets_partition, "topics": topics}


@dataclass
class GroupsResult:
    groups: dict[str, Group]
    """every group seen, live and deleted (``Group.deleted``)."""
    notes: list[str]
    partitions: dict[int, str]
    """__consumer_offsets partition -> the replica dir read."""
    records: int
    """records folded."""

    @property
    def live(self) -> dict[str, Group]:
        return {g: v for g, v in self.groups.items() if not v.deleted}


class OffsetsFold:
    """Replays one ``__consumer_offsets`` partition, record by record, in offset order.

    Pure: fed ``(record offset, timestamp, key, value)`` per record with its batch's producer
    id and flags; :meth:`groups` decodes the winners. ``where`` (file label, byte position) is
    kept per winner for notes.
    """

    __slots__ = ("partition", "store", "pending", "notes", "records", "where")

    def __init__(self, partition: int | None = None):
        self.partition = partition
        #: key bytes -> (record offset, timestamp_ms, value bytes | None, transactional, where)
        self.store: dict[bytes, tuple] = {}
        #: producer id -> key bytes -> (record offset, timestamp_ms, value, True, where)
        self.pending: dict[int, dict[bytes, tuple]] = {}
        self.notes: list[str] = []
        self.records = 0
        self.where: tuple[str, int] | None = None

    # -- replay -------------------------------------------------------------------------------
    def add_batch(self, header, batch_bytes, where: tuple[str, int]) -> None:
        """One data batch (its whole bytes): every record replayed in order."""
        bad = orec.BadKeys()
        if header.is_transactional:
            pend = self.pending.setdefault(header.producer_id, {})
            self.records += orec.fold_records_into(pend, header, batch_bytes, True, where, bad, label=where[0])
        elif self.pending:
            # a tombstone also drops a pending transactional commit of its key: the slow path
            before: dict[bytes, tuple] = {}
            self.records += orec.fold_records_into(before, header, batch_bytes, False, where, bad, label=where[0])
            # replay in record order: sort the batch's records back by offset
            for key, rec in sorted(before.items(), key=lambda kv: kv[1][0]):
                if rec[2] is None:
                    for p in self.pending.values():
                        p.pop(key, None)
                self.store[key] = rec
        else:
            self.records += orec.fold_records_into(self.store, header, batch_bytes, False, where, bad, label=where[0])
        self.bad_keys(bad, where)

    def control(self, producer_id: int, control_type: int | None, where: tuple[str, int] | None = None,
                key=None) -> None:
        """A transaction marker of ``producer_id``: COMMIT applies its pending records, ABORT drops them.
        Any other control record (an unknown type, a key too short for one: ``control_type`` None)
        drops them too, as the coordinator does for anything but a COMMIT, with a note naming the
        marker (``where``: file, batch position), its key and what was dropped."""
        pend = self.pending.pop(producer_id, None)
        if pend and control_type not in (orec.CONTROL_COMMIT, orec.CONTROL_ABORT):
            label, pos = where if where is not None else ("<control record>", None)
            self.notes.append(f"{label}: byte {pos}: control record key = "
                              f"{'null' if key is None else bytes(key).hex() or 'empty'}, expected a COMMIT "
                              f"(type {orec.CONTROL_COMMIT}) or ABORT (type {orec.CONTROL_ABORT}) marker: the "
                              f"{len(pend)} pending transactional record(s) of producer {producer_id} dropped "
                              f"as for an ABORT")
        if not pend or control_type != orec.CONTROL_COMMIT:
            return
        store = self.store
        for key, rec in pend.items():
            old = store.get(key)
            if old is None or rec[0] > old[0]:
                store[key] = rec

    def _check_utf8(self, key: bytes, kname: str, group: str, rec_off: int, where) -> None:
        """The group name is a key's first field (int16 length + bytes at byte 2): note it when
        those bytes are not UTF-8 (Kafka decodes them with replacement characters, as here)."""
        (n,) = _INT16.unpack_from(key, orec.VERSION_LENGTH)
        raw = bytes(key[orec.VERSION_LENGTH + 2:orec.VERSION_LENGTH + 2 + max(n, 0)])
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.notes.append(f"{where[0]}: byte {where[1]}: record {rec_off}: {kname}.group = {raw!r}, expected "
                              f"UTF-8 ({exc.reason} at byte {exc.start} of the name); kept as {group!r}, the name "
                              f"Kafka's own decoder gives it")

    def bad_key(self, rec_off: int, key, where) -> None:
        self.notes.append(f"{where[0]}: byte {where[1]}: record {rec_off}: key = {key!r}, expected a coordinator "
                          f"key (int16 version + fields); record ignored")

    def bad_keys(self, bad: "orec.BadKeys", where) -> None:
        """The notes of one batch's records whose key is null or too short (``bad``): one per record
        for the first ``orec.BAD_KEYS_NOTED``, then one for the rest of the batch, with their count
        and offsets. (Kafka's coordinator does not skip such a record: deserializing its key fails
        and the load of the partition stops with an error; here the record is ignored and noted.)"""
        for rec_off in bad.first:
            self.bad_key(rec_off, None, where)
        if bad.more:
            self.notes.append(f"{where[0]}: byte {where[1]}: {bad.more} more record(s) of this batch, offsets "
                              f"{bad.more_first} (first) to {bad.more_last} (last): key null or shorter than 2 bytes, "
                              f"expected a coordinator key (int16 version + fields); records ignored")

    # -- result -------------------------------------------------------------------------------
    def groups(self, decode: "Decoder") -> dict[str, Group]:
        """Decode the winning records into groups (tombstoned ones marked deleted)."""
        w = _Winners()
        for key, rec in self.store.items():
            self._decode_winner(key, rec, decode, w)
        # sorted: names() is a set, whose order follows the process's string hash seed; groups in
        # one order make the manifest part and every listing the same from run to run
        return {g: self._group(g, w) for g in sorted(w.names())}

    def _decode_winner(self, key: bytes, rec: tuple, decode: "Decoder", w: "_Winners") -> None:
        """One winning record: decoded and filed by its record type (or a note)."""
        rec_off, ts, value, txn, where = rec
        at = f"{where[0]}: byte {where[1]}: record {rec_off}"
        rtype = _INT16.unpack_from(key, 0)[0]
        try:
            kname, kdata = decode.key(rtype, key)
        except FormatError as exc:
            self.notes.append(f"{at}: key not decoded: {exc}; ignored")
            return
        if kname is None:
            self.notes.append(f"{at}: key version = {rtype}, expected a known __consumer_offsets record type "
                              f"({decode.known_types()}); ignored (the coordinator skips unknown record types too)")
            return
        group = kdata.get("group", kdata.get("groupId"))
        if not isinstance(group, str):
            self.notes.append(f"{at}: {kname} has no group name; ignored")
            return
        if "\ufffd" in group:
            self._check_utf8(key, kname, group, rec_off, where)
        vdata = vversion = None
        if value is not None:
            try:
                vversion, vdata = decode.value(rtype, value)
            except FormatError as exc:
                self.notes.append(f"{at}: {kname} of group {group!r}: value not decoded: {exc}; record ignored")
                return
        if rtype in OFFSET_COMMIT_TYPES:
            if vdata is None:
                w.tombstoned.add(group)
                return
            topic, part = kdata["topic"], int(kdata["partition"])
            le, exp = vdata.get("leaderEpoch"), vdata.get("expireTimestamp")
            w.offsets.setdefault(group, {})[(topic, part)] = CommittedOffset(
                group, topic, part, int(vdata["offset"]), None if le is None or le < 0 else le,
                vdata.get("metadata") or "", vdata.get("commitTimestamp"),
                None if exp is None or exp < 0 else exp, rec_off, self.partition, txn, vversion)
        elif rtype == GROUP_METADATA_TYPE:
            w.classic[group] = (vdata, ts)
        elif rtype == CONSUMER_GROUP_METADATA_TYPE:
            w.consumer[group] = (vdata, ts)
        elif rtype == CONSUMER_GROUP_MEMBER_METADATA_TYPE:
            w.families.setdefault(group, "consumer")
            if vdata is not None:
                w.members.setdefault(group, set()).add(kdata.get("memberId", ""))
        elif rtype == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE:
            if vdata is not None:
                w.target_epoch[group] = vdata.get("assignmentEpoch")
        elif rtype == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE:
            if vdata is not None:
                w.member_epochs.setdefault(group, {})[kdata.get("memberId", "")] = vdata.get("memberEpoch")
        elif decode.family(kname) in ("share", "streams"):
            w.families.setdefault(group, decode.family(kname))

    def _group(self, g: str, w: "_Winners") -> Group:
        offs = w.offsets.get(g, {})
        n_members = len(w.members.get(g, ()))
        if g in w.consumer:
            vdata, ts = w.consumer[g]
            if vdata is None:
                return Group(g, "consumer", "consumer", "Dead", None, n_members, None, ts, not offs, self.partition, offs)
            epoch = vdata.get("epoch")
            return Group(g, "consumer", "consumer", _consumer_state(n_members, epoch, w.target_epoch.get(g),
                                                                    w.member_epochs.get(g, {})),
                         epoch, n_members, None, ts, False, self.partition, offs)
        if g in w.classic:
            vdata, ts = w.classic[g]
            if vdata is None:
                return Group(g, "classic", None, "Dead" if not offs else "Empty", None, 0, None, ts, not offs,
                             self.partition, offs)
            n = len(vdata.get("members") or [])
            return Group(g, "classic", vdata.get("protocolType"), "Stable" if n else "Empty", vdata.get("generation"),
                         n, vdata.get("protocol"), vdata.get("currentStateTimestamp"), False, self.partition, offs)
        if g in w.families:
            return Group(g, w.families[g], None, "Stable" if n_members else "Empty", None, n_members, None, None,
                         False, self.partition, offs)
        # only offset commits (a "simple" group) or only tombstones (deleted / expired)
        return Group(g, "classic", "" if offs else None, "Empty" if offs else "Dead", None, 0, None, None, not offs,
                     self.partition, offs)


@dataclass
class _Winners:
    """The decoded winners of one partition, filed by what they say about which group."""
    offsets: dict = field(default_factory=dict)
    classic: dict = field(default_factory=dict)
    consumer: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)
    member_epochs: dict = field(default_factory=dict)
    target_epoch: dict = field(default_factory=dict)
    families: dict = field(default_factory=dict)
    tombstoned: set = field(default_factory=set)

    def names(self) -> set[str]:
        return set(self.offsets) | set(self.classic) | set(self.consumer) | set(self.families) | self.tombstoned


def _consumer_state(n_members: int, epoch: int | None, target: int | None, member_epochs: dict) -> str:
    """A consumer group's state as the coordinator derives it (``ConsumerGroup.maybeUpdateGroupState``)."""
    if n_members == 0:
        return "Empty"
    if target is not None and epoch is not None and target < epoch:
        return "Assigning"
    if any(e != target for e in member_epochs.values()):
        return "Reconciling"
    return "Stable"


class Decoder:
    """Decodes ``__consumer_offsets`` keys and values (``auditor.formats.offsets_records``, from
    the generated spec tables). ``key(rtype, key_bytes) -> (spec name | None when the type is
    unknown, fields)``; ``value(rtype, value_bytes) -> (version, fields)``; FormatError on bad
    bytes (a value cut short, a string that is not UTF-8, ...)."""

    def __init__(self):
        self.types = orec.known_record_types()

    def key(self, rtype: int, key: bytes):
        return orec.decode_key(key)

    def value(self, rtype: int, value: bytes):
        return orec.decode_value(rtype, value)

    def known_types(self) -> str:
        return ", ".join(f"{t} {n}" for t, n in sorted(self.types.items()))

    def family(self, name: str) -> str | None:
        return orec.record_family(name)


def fold_partition_dir(partition_dir: str | os.PathLike, partition: int | None = None, pace=None) -> OffsetsFold:
    """Replay every live segment of one __consumer_offsets replica dir (read-only); ``pace``: see
    :func:`auditor.cluster.offsets_segments.replay_partition_dir`.

    On a live broker the log cleaner and retention replace and delete segments at any moment:
    the listing is taken when no cleaner swap is half done, and the dir is read again (up to
    ``MAX_READS`` times) when a segment read was replaced or deleted meanwhile."""
    pdir = Path(partition_dir)
    for _ in range(MAX_READS):
        fold = OffsetsFold(partition)
        segments = settled_segments(pdir, fold.notes)
        before = segments_identity(segments)
        replay_partition_dir(pdir, fold, pace, segments)
        if before is not None and segments_identity(segments) == before:
            return fold
    fold.notes.append(f"{pdir}: its segments were replaced or deleted while read, {MAX_READS} times (the log "
                      f"cleaner or retention at work): the last read is given and may miss offsets")
    return fold


def read_groups(log_dirs: Iterable[str | os.PathLike], decoder: Decoder | None = None, *, pace=None) -> GroupsResult:
    """Every group recorded in the __consumer_offsets partitions under ``log_dirs``.

    When a partition has several replicas (several brokers' log dirs), the one with the most
    records folded is used and the others are named in a note. ``pace()``, when given, is called
    between reads (``collect --max-read-rate``)."""
    decoder = decoder or Decoder()
    groups: dict[str, Group] = {}
    notes: list[str] = []
    chosen: dict[int, str] = {}
    total = 0
    for part, dirs in sorted(offsets_partition_dirs(log_dirs).items()):
        folds = [(fold_partition_dir(d, part, pace), d) for d in dirs]
        fold, d = max(folds, key=lambda fd: (max((r[0] for r in fd[0].store.values()), default=-1), fd[0].records))
        if len(folds) > 1:
            notes.append(f"{OFFSETS_TOPIC}-{part}: {len(folds)} replicas ({', '.join(str(x) for _, x in folds)}); "
                         f"read {d} (the furthest)")
        chosen[part] = str(d)
        total += fold.records
        for pid, pend in sorted(fold.pending.items()):
            if pend:
                notes.append(f"{OFFSETS_TOPIC}-{part}: producer {pid} has {len(pend)} transactional offset commit(s) "
                             f"with no COMMIT/ABORT marker yet (an open transaction): not counted as committed")
        got = fold.groups(decoder)
        notes.extend(fold.notes)
        for g, grp in got.items():
            if g in groups and not groups[g].deleted and not grp.deleted:
                notes.append(f"group {g!r} found in {OFFSETS_TOPIC} partitions {groups[g].offsets_partition} and "
                             f"{part}; kept the one from {part}")
            groups[g] = grp
    return GroupsResult(groups, notes, chosen, total)


def commit_rows(result: GroupsResult) -> tuple[dict, ...]:
    """The live groups' committed offsets as plain dicts (what checks are handed:
    ``checks.framework.base.AuditContext.group_offsets``)."""
    rows = []
    for g, grp in sorted(result.live.items()):
        for (topic, part), c in sorted(grp.offsets.items()):
            rows.append({"group": g, "topic": topic, "partition": part, "committed_offset": c.offset,
                         "commit_timestamp_ms": c.commit_timestamp_ms, "protocol": grp.protocol})
    return tuple(rows)
