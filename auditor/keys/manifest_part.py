"""The key statistics of a manifest (``keys.jsonl.gz``): one line per partition dir, serialised.

A header line ``{"format": KEYS_FORMAT}``, then per partition dir its location (broker, log dir,
topic, partition, dir kind: live, future, delete, dir name), what was read (mode, sample asked, bytes scanned of the .log bytes,
offsets, unreadable batches, notes) and its :class:`~auditor.keys.sketches.KeyStats` as a dict
(fingerprints and hashes, no key bytes). The part is optional: manifests without it still read.

``kafka-audit collect --keys`` writes it beside the manifest's tables (:func:`collect_keys_part`,
under a temporary name renamed into place, like the manifest's other files);
:func:`read_keys_parts` reads it from manifest directories (local paths; :func:`auditor.manifest.find_manifests`
names them).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import IO, Iterable, Iterator

from auditor import object_store
from auditor.formats.filenames import parse_partition_dir
from auditor.keys.partition_keys import PartitionKeys, scan_partition_keys
from auditor.keys.sketches import KeyStats

KEYS_FORMAT = "kafka-audit keys v1"
KEYS_FILE = "keys.jsonl.gz"
LOCATION = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")


class KeysPartError(ValueError):
    """A keys part that is not whole (wrong header, cut, unreadable line)."""


def write_keys(rows: Iterable[tuple[dict, PartitionKeys]], out: IO[bytes]) -> int:
    """``(location, PartitionKeys)`` pairs as a gzip JSON-lines part; lines written (header included)."""
    lines = 0
    with gzip.open(out, "wt", encoding="utf-8") as text:
        text.write(json.dumps({"format": KEYS_FORMAT}) + "\n")
        lines += 1
        for location, found in rows:
            line = {**{k: location.get(k) for k in LOCATION}, "mode": found.mode,
                    "sample_bytes": found.sample_bytes, "log_bytes": found.log_bytes,
                    "scanned_bytes": found.scanned_bytes, "first_offset": found.first_offset,
                    "last_offset": found.last_offset, "unreadable_batches": found.unreadable_batches,
                    "legacy_records": found.legacy_records, "legacy_records_read": found.legacy_records_read,
                    "notes": found.notes,
                    "stats": found.stats.to_dict()}
            text.write(json.dumps(line, separators=(",", ":")) + "\n")
            lines += 1
    return lines


def read_keys(source: IO[bytes], label: str) -> list[tuple[dict, PartitionKeys]]:
    """The pairs :func:`write_keys` wrote; KeysPartError naming ``label`` when the part is not whole."""
    return list(_iter_keys(source, label))


def _iter_keys(source: IO[bytes], label: str) -> Iterator[tuple[dict, PartitionKeys]]:
    try:
        with gzip.open(source, "rt", encoding="utf-8") as text:
            header = json.loads(text.readline() or "null")
            if not isinstance(header, dict) or header.get("format") != KEYS_FORMAT:
                raise KeysPartError(f"{label}: first line = {header!r}, expected {{'format': {KEYS_FORMAT!r}}}")
            for raw in text:
                line = json.loads(raw)
                found = PartitionKeys(KeyStats.from_dict(line["stats"]), line["mode"], line["sample_bytes"],
                                      line["log_bytes"], line["scanned_bytes"], line["first_offset"],
                                      line["last_offset"], line["unreadable_batches"], line["legacy_records"],
                                      list(line["notes"]), legacy_records_read=line.get("legacy_records_read", 0))
                yield {k: line[k] for k in LOCATION}, found
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise KeysPartError(f"{label}: unreadable: {type(exc).__name__}: {exc}") from exc


def _partition_dirs(log_dir: Path) -> Iterator[tuple[Path, object]]:
    try:
        names = sorted(os.listdir(log_dir))
    except OSError:
        return
    for name in names:
        parsed = parse_partition_dir(name)
        path = log_dir / name
        if parsed is not None and path.is_dir() and not path.is_symlink():
            yield path, parsed


def collect_keys_part(log_dirs: list[dict], out_dir: Path, sample_bytes: int | None) -> str:
    """The key statistics of every partition dir of the scanned log dirs (``log_dirs``: their
    ``log_dir`` and ``broker_id``, as collect's result lists them) into ``out_dir/keys.jsonl.gz``;
    one line saying what was written."""
    def rows():
        for info in log_dirs:
            root = Path(info["log_dir"])
            for path, parsed in _partition_dirs(root):
                location = {"broker_id": info.get("broker_id"), "log_dir": str(root), "topic": parsed.topic,
                            "partition": parsed.partition, "dir_kind": parsed.kind, "dir_name": path.name}
                yield location, scan_partition_keys(path, sample_bytes=sample_bytes)

    final = Path(out_dir) / KEYS_FILE
    tmp = final.with_name(f".{KEYS_FILE}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as out:
            lines = write_keys(rows(), out)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    mode = "all records" if sample_bytes is None else f"the newest {sample_bytes:,} bytes of each partition"
    return f"key statistics: {lines - 1} partition dirs ({mode}) -> {KEYS_FILE}"


def read_keys_parts(manifests: Iterable[str | os.PathLike]) -> tuple[list[tuple[dict, PartitionKeys]], list[str]]:
    """Every manifest's key statistics, and a note per part that is there but unreadable;
    manifests without the part (older ones, or collected without --keys) add nothing."""
    pairs, notes = [], []
    for manifest in manifests:
        remote = object_store.is_s3(str(manifest))
        path = f"{str(manifest).rstrip('/')}/{KEYS_FILE}" if remote else Path(manifest) / KEYS_FILE
        if not (object_store.exists(path) if remote else path.is_file()):
            continue
        try:
            with (object_store.open_input(path) if remote else open(path, "rb")) as source:
                pairs.extend(read_keys(source, str(path)))
        except (KeysPartError, OSError) as exc:
            notes.append(f"{path}: not used: {str(exc).removeprefix(str(path) + ': ')}")
    return pairs, notes
