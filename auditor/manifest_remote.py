"""Manifests in object storage (``s3://``, ``s3a://``): found, checked, read and published with the
guarantees a manifest directory has on disk (docs/manifests.md, docs/object-storage.md).

An object store has no rename and no directory: a PUT (or a completed multipart upload) makes one
object appear whole, nothing makes several appear at once. So :func:`publish_manifest` writes as
``collect`` does on disk, in the order that makes a reader safe: the completion object
``_complete.json`` is deleted first (:func:`prepare_prefix`, before the scan starts: from then on
the prefix reads as incomplete), the data objects are uploaded one by one, objects of a previous
collect that this one did not write are deleted, and ``_complete.json`` is written last. A collect
killed at any moment leaves a prefix without it, which every reader refuses, and a re-run
completes it.

Readers list the prefix once (:func:`find_remote_manifests`: a manifest prefix, a parent prefix
meaning every manifest under it, or a glob), refuse a manifest whose ``_complete.json`` is missing
or does not list exactly the objects there, and compare every object's size with it (the listing
gives sizes: no extra request); :func:`read_remote_manifest` also checks each table object's
CRC-32 on the bytes it reads (on the driver). Every failure is one line
(:class:`auditor.object_store.ObjectStoreError`, :class:`auditor.manifest_write.IncompleteManifest`).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

from auditor import object_store as store
from auditor.manifest_write import COMPLETE_FILE, COMPLETE_FORMAT, MANIFEST_FILES, SEGMENTS_FILE, IncompleteManifest

EXTRA_FILES = ("keys.jsonl.gz",)
"""Files a manifest may hold besides MANIFEST_FILES (``collect --keys``: auditor.keys.manifest_part)."""


class ChangedManifest(IncompleteManifest):
    """An object whose size or CRC-32 is not the one ``_complete.json`` lists (changed since, or a bad copy)."""


def prepare_prefix(url: str) -> None:
    """Before a collect writes to ``url``: the bucket answers, and the prefix reads as incomplete
    from now on (its ``_complete.json`` deleted)."""
    store.check_bucket(url)
    store.delete(f"{url.rstrip('/')}/{COMPLETE_FILE}")


def publish_manifest(local_dir: Path, url: str) -> list[str]:
    """Uploads the manifest directory ``local_dir`` (written whole by ``collect``) to ``url``: data
    objects first, stale ones of a previous collect deleted, ``_complete.json`` last. The names written."""
    url = url.rstrip("/")
    prepare_prefix(url)
    names = [n for n in (*MANIFEST_FILES[:-1], *EXTRA_FILES) if (local_dir / n).is_file()]
    for name in names:
        store.put_file(local_dir / name, f"{url}/{name}")
    for name in (*MANIFEST_FILES[:-1], *EXTRA_FILES):
        if name not in names:
            store.delete(f"{url}/{name}")   # a part the broker no longer holds must not stay beside new ones
    store.put_file(local_dir / COMPLETE_FILE, f"{url}/{COMPLETE_FILE}")
    return [*names, COMPLETE_FILE]


def find_remote_manifests(spec: str) -> dict[str, dict[str, int]]:
    """{manifest URL: {object name: size}} named by ``spec`` (a manifest prefix, a parent prefix:
    every manifest under it, or a glob), each checked against its ``_complete.json``."""
    spec = spec.rstrip("/")
    has_glob = any(c in spec for c in "*?[")
    listed = store.list_objects(store.glob_prefix(spec) if has_glob else spec)
    objects: dict[str, dict[str, int]] = {}
    for obj in listed:
        parent, _, name = obj.url.rpartition("/")
        objects.setdefault(parent, {})[name] = obj.size
    found = {}
    for parent, files in objects.items():
        if SEGMENTS_FILE not in files:
            continue
        if has_glob and not _under_match(spec, parent):
            continue
        if not has_glob and not (parent == spec or parent.startswith(spec + "/")):
            continue
        found[parent] = files
    for manifest, files in sorted(found.items()):
        check_remote_complete(manifest, files)
    return dict(sorted(found.items()))


def _under_match(pattern: str, parent: str) -> bool:
    """The manifest prefix ``parent`` is a match of ``pattern``, lies under one, or its segments object is one."""
    if store.match(pattern, f"{parent}/{SEGMENTS_FILE}"):
        return True
    head = parent
    while "/" in head.split("://", 1)[1]:
        if store.match(pattern, head):
            return True
        head = head.rpartition("/")[0]
    return False


def read_marker(manifest: str) -> dict:
    try:
        marker = json.loads(store.read_bytes(f"{manifest}/{COMPLETE_FILE}"))
    except store.ObjectStoreError:
        raise
    except ValueError as exc:
        raise IncompleteManifest(f"manifest {manifest} is incomplete: {COMPLETE_FILE} unreadable ({exc}); "
                                 "run collect again") from None
    if not isinstance(marker, dict) or marker.get("format") != COMPLETE_FORMAT or \
            not isinstance(marker.get("files"), dict):
        raise IncompleteManifest(f"manifest {manifest} is incomplete: {COMPLETE_FILE} is not a manifest "
                                 "completion marker; run collect again")
    return marker


def check_remote_complete(manifest: str, sizes: dict[str, int]) -> dict:
    """The marker of a complete remote manifest, else IncompleteManifest / ChangedManifest (one line).
    Remote manifests are written by a collect of format 3 or later: a prefix without the marker is
    what a killed or failed collect (or upload) left."""
    if COMPLETE_FILE not in sizes:
        raise IncompleteManifest(f"manifest {manifest} is incomplete: no {COMPLETE_FILE}: the collect that wrote it "
                                 "did not finish (killed, or it failed); run collect again")
    marker = read_marker(manifest)
    files = marker["files"]
    for name in MANIFEST_FILES[:-1]:
        if name not in files:
            if name in sizes:
                raise IncompleteManifest(f"manifest {manifest} is incomplete: {name} is not in {COMPLETE_FILE}: "
                                         "written by a collect that did not finish; run collect again")
            continue
        if name not in sizes:
            raise IncompleteManifest(f"manifest {manifest} is incomplete: {name} is listed in {COMPLETE_FILE} but "
                                     "missing; run collect again")
        if sizes[name] != files[name].get("bytes"):
            raise ChangedManifest(f"manifest {manifest}: {name} is {sizes[name]} bytes, {COMPLETE_FILE} says "
                                  f"{files[name].get('bytes')}: changed since it was collected; run collect again")
    return marker


def read_checked(manifest: str, name: str, marker: dict) -> bytes:
    """One object's bytes, with the size and CRC-32 ``_complete.json`` lists (ChangedManifest otherwise)."""
    data = store.read_bytes(f"{manifest}/{name}")
    want = marker["files"].get(name)
    if want is not None:
        crc = f"{zlib.crc32(data):08x}"
        if len(data) != want.get("bytes") or crc != want.get("crc32"):
            raise ChangedManifest(f"manifest {manifest}: {name} is {len(data)} bytes with CRC-32 {crc}, "
                                  f"{COMPLETE_FILE} says {want.get('bytes')} bytes, {want.get('crc32')}: changed since "
                                  "it was collected; run collect again")
    return data


def read_remote_table(manifest: str, name: str, marker: dict, *, schema=None, columns=None):
    """One Parquet table of a remote manifest, its bytes checked (:func:`read_checked`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from auditor.schema import read_parquet

    data = read_checked(manifest, name, marker)
    if schema is None and columns is None:
        return pq.read_table(pa.BufferReader(data))
    return read_parquet(pa.BufferReader(data), schema=schema, columns=columns)
