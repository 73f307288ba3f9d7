"""Text files of a log dir and a partition dir.

* Offset checkpoints (`replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
  `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`) and `leader-epoch-checkpoint`:
  `CheckpointFile.java` — line 1 the version (0), line 2 the entry count, then one entry per line,
  fields split on Java ``\\s+`` (`OffsetCheckpointFile.Formatter`, `LeaderEpochCheckpointFile`).
  Like Kafka, an empty file, or one with only a version line, reads as no entries.
* `meta.properties`: Java properties (`MetaProperties.java`): v0 `broker.id`, v1 `node.id`
  and `cluster.id` required, optional `directory.id` (a base64 Uuid).
* `partition.metadata`: ``version: 0`` / ``topic_id: <base64 Uuid>`` split on ``:\\s+``
  (`PartitionMetadataReadBuffer.java`).

Every error is a FormatError naming the file, the byte position of the line, the line number
and field, the value found and what was expected. Files are read with os.open + os.pread, capped
at MAX_TEXT_BYTES (a log dir with a million partitions writes ~50 MB checkpoints).
"""

from __future__ import annotations

import base64
import os
import re

from auditor.formats.errors import FormatError

MAX_TEXT_BYTES = 256 * 1024 * 1024
OFFSET_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
META_PROPERTIES_VERSIONS = ("0", "1")

_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")          # Java's \s
_LINE_BREAK = re.compile(r"\r\n|\r|\n")             # BufferedReader.readLine
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")             # Integer.parseInt / Long.parseLong (ASCII)
_UUID_B64 = re.compile(r"[A-Za-z0-9_-]{22}(==)?\Z")  # Uuid.fromString: URL-safe base64 of 16 bytes
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


def _read_bytes(path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        if size > MAX_TEXT_BYTES:
            raise FormatError(path, 0, "file size", size, f"<= {MAX_TEXT_BYTES} bytes for a text file")
        parts, pos = [], 0
        while pos < size:
            chunk = os.pread(fd, min(1 << 20, size - pos), pos)
            if not chunk:
                break
            parts.append(chunk)
            pos += len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _lines(path, encoding: str = "utf-8") -> list[tuple[int, int, str]]:
    """(line number from 1, byte position, text) as Java's BufferedReader.readLine yields them."""
    data = _read_bytes(path)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise FormatError(path, exc.start, "text", data[exc.start:exc.start + 8], f"valid {encoding}") from None
    one_byte = len(text) == len(data)  # every character one byte (ASCII): byte positions are character positions
    out, start, number = [], 0, 1
    byte_pos = 0   # of `start`, counted line by line (encoding each line's prefix anew was quadratic: issue 24)
    for m in _LINE_BREAK.finditer(text):
        line = text[start:m.start()]
        out.append((number, start if one_byte else byte_pos, line))
        if not one_byte:
            byte_pos += len(line.encode(encoding)) + len(m.group().encode(encoding))
        start, number = m.end(), number + 1
    if start < len(text):
        out.append((number, start if one_byte else byte_pos, text[start:]))
    return out


def _java_int(path, pos, field, text, bounds, expected) -> int:
    if not _JAVA_INT.match(text):
        raise FormatError(path, pos, field, text, expected)
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise FormatError(path, pos, field, text, f"{expected} within [{bounds[0]}, {bounds[1]}]")
    return value


def _java_split(line: str) -> list[str]:
    parts = _JAVA_WS.split(line)
    while parts and parts[-1] == "":                  # Java's split drops trailing empty strings
        parts.pop()
    return parts


def _read_checkpoint(path, version: int, fields: int, what: str) -> list[tuple[int, int, list[str]]]:
    """Entries as (line number, byte position, fields) after checking version and count."""
    lines = _lines(path)
    if not lines:
        return []
    number, pos, text = lines[0]
    found_version = _java_int(path, pos, f"line {number}: version", text, INT32, f"the integer {version}")
    if found_version != version:
        raise FormatError(path, pos, f"line {number}: version", found_version, str(version))
    if len(lines) == 1:
        return []
    number, pos, text = lines[1]
    count = _java_int(path, pos, f"line {number}: entry count", text, INT32, "an integer entry count")
    entries = []
    for number, pos, text in lines[2:]:
        parts = _java_split(text)
        if len(parts) != fields:
            raise FormatError(path, pos, f"line {number}: entry", text, f"{fields} whitespace-separated fields ({what})")
        entries.append((number, pos, parts))
    if len(entries) != count:
        raise FormatError(path, lines[1][1], "line 2: entry count", count,
                          f"the number of entry lines, {len(entries)}")
    return entries


def read_offset_checkpoint(path) -> dict[tuple[str, int], int]:
    """`topic partition offset` lines -> {(topic, partition): offset} (a later duplicate wins, as in Kafka)."""
    out: dict[tuple[str, int], int] = {}
    for number, pos, (topic, partition, offset) in _read_checkpoint(
            path, OFFSET_CHECKPOINT_VERSION, 3, "topic partition offset"):
        p = _java_int(path, pos, f"line {number}: partition", partition, INT32, "an int32 partition")
        o = _java_int(path, pos, f"line {number}: offset", offset, INT64, "an int64 offset")
        out[(topic, p)] = o
    return out


def read_leader_epoch_checkpoint(path) -> list[tuple[int, int]]:
    """`epoch startOffset` lines -> [(epoch, start_offset)] in file order."""
    out = []
    for number, pos, (epoch, start) in _read_checkpoint(
            path, LEADER_EPOCH_CHECKPOINT_VERSION, 2, "epoch start_offset"):
        out.append((_java_int(path, pos, f"line {number}: epoch", epoch, INT32, "an int32 epoch"),
                    _java_int(path, pos, f"line {number}: start_offset", start, INT64, "an int64 offset")))
    return out


def parse_uuid(text: str) -> str | None:
    """Kafka's Uuid.fromString (URL-safe base64, 16 bytes) -> canonical Uuid.toString (no padding)."""
    if not _UUID_B64.match(text):
        return None
    raw = base64.urlsafe_b64decode(text[:22] + "==")
    if len(raw) != 16:
        return None
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6] or ""):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_PROP_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(path) -> dict[str, str]:
    """java.util.Properties.load: comments # and !, key=value / key:value / key value,
    backslash escapes and line continuations. ISO-8859-1, as Properties.load(InputStream)."""
    props: dict[str, str] = {}
    lines = _lines(path, "latin-1")
    i = 0
    while i < len(lines):
        _, _, text = lines[i]
        logical = text.lstrip(" \t\f")
        i += 1
        if not logical or logical[0] in "#!":
            continue
        parts = [logical]   # joined once: appending to one growing str was quadratic (issue 24)
        while _ends_with_odd_backslashes(parts[-1]) and i < len(lines):
            parts[-1] = parts[-1][:-1]
            parts.append(lines[i][2].lstrip(" \t\f"))
            i += 1
        logical = "".join(parts)
        key_end, j = len(logical), 0
        while j < len(logical):
            c = logical[j]
            if c == "\\":
                j += 2
                continue
            if c in "=: \t\f":
                key_end = j
                break
            j += 1
        key = logical[:key_end]
        rest = logical[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):                     # at most one separator, as Properties.load
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _ends_with_odd_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def read_meta_properties(path) -> dict[str, str]:
    """Properties of `meta.properties`, validated as MetaProperties.Builder does."""
    props = parse_properties(path)
    version = props.get("version", "0")
    if version not in META_PROPERTIES_VERSIONS:
        raise FormatError(path, 0, "version", version, "0 or 1")
    id_key = "broker.id" if version == "0" else "node.id"
    if version == "1":
        for key in ("node.id", "cluster.id"):
            if key not in props:
                raise FormatError(path, 0, key, None, "present in a version 1 meta.properties")
    if id_key in props:
        _java_int(path, 0, id_key, props[id_key].strip(), INT32, "an int32 id")
    if "directory.id" in props and parse_uuid(props["directory.id"]) is None:
        raise FormatError(path, 0, "directory.id", props["directory.id"], "a base64 Uuid (22 URL-safe characters)")
    return props


def read_partition_metadata(path) -> dict:
    """{"version": int, "topic_id": canonical base64 Uuid, "topic_id_raw": as in the file}."""
    lines = _lines(path)
    if not lines:
        raise FormatError(path, 0, "line 1", "", "'version: 0'")
    number, pos, text = lines[0]
    parts = re.split(r":[ \t\n\x0b\f\r]+", text)
    if len(parts) != 2:
        raise FormatError(path, pos, f"line {number}", text, "'version: <int>'")
    version = _java_int(path, pos, f"line {number}: version", parts[1], INT32, "an integer version")
    if version < PARTITION_METADATA_VERSION:
        raise FormatError(path, pos, f"line {number}: version", version, f">= {PARTITION_METADATA_VERSION}")
    if len(lines) < 2:
        raise FormatError(path, len(text), "line 2", None, "'topic_id: <base64 uuid>'")
    number, pos, text = lines[1]
    parts = re.split(r":[ \t\n\x0b\f\r]+", text)
    if len(parts) != 2:
        raise FormatError(path, pos, f"line {number}", text, "'topic_id: <base64 uuid>'")
    topic_id = parse_uuid(parts[1])
    if topic_id is None:
        raise FormatError(path, pos, f"line {number}: topic_id", parts[1], "a base64 Uuid (16 bytes)")
    if topic_id == "AAAAAAAAAAAAAAAAAAAAAA":
        raise FormatError(path, pos, f"line {number}: topic_id", parts[1], "a non-zero Uuid")
    return {"version": version, "topic_id": topic_id, "topic_id_raw": parts[1]}


__all__ = ["parse_properties", "parse_uuid", "read_leader_epoch_checkpoint", "read_meta_properties",
           "read_offset_checkpoint", "read_partition_metadata"]
