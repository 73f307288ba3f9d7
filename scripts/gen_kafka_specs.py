#!/usr/bin/env python3
"""Generate the decoding tables of auditor/formats/specs/ from Kafka's JSON message specs.

Kafka describes every record it keeps on disk (KRaft metadata records, ``__consumer_offsets``
keys and values, remote log metadata, snapshot control records, ...) in JSON message specs that
ship inside its jars on Maven Central. This script opens those jars (as resolved into
``.cache/m2`` by ``scripts/kafka-jars.sh``), strips the specs' ``//`` comments, keeps only the
data a decoder needs (names, types, versions, nullable/tagged versions, tags, defaults, nested
and common structs, api key, valid/flexible versions; never the prose) and writes one Python
module per jar, stamped with the Kafka version, the Maven coordinates and the jar's SHA-256.

    .venv/bin/python scripts/gen_kafka_specs.py                  # Kafka 4.2.1 (kafka-jars.sh's default)
    .venv/bin/python scripts/gen_kafka_specs.py --kafka-version 4.3.0 --fetch
    .venv/bin/python scripts/gen_kafka_specs.py --check          # exit 1 when the committed tables differ

``--fetch`` resolves missing jars with ``mvn dependency:get`` into the same Maven cache.
tests/test_kafka_specs.py runs ``--check``'s logic, so committed tables that differ from what
the jars give fail the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pprint
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.2.1")
DEFAULT_M2 = ROOT / ".cache" / "m2"
DEFAULT_OUT = ROOT / "auditor" / "formats" / "specs"
GROUP_ID = "org.apache.kafka"


@dataclass(frozen=True)
class Source:
    """One jar and which of its specs to keep."""
    module: str          # generated module name under auditor/formats/specs/
    artifact: str        # Maven artifactId (groupId org.apache.kafka)
    prefix: str          # folder inside the jar holding the specs
    spec_types: tuple[str, ...] | None = None   # keep only specs whose "type" is one of these (None: all)
    purpose: str = ""


SOURCES = (
    Source("kafka_metadata", "kafka-metadata", "common/metadata/", None,
           "KRaft metadata records (__cluster_metadata)"),
    Source("kafka_clients", "kafka-clients", "common/message/", ("data", "header"),
           "control records of the KRaft log and snapshots (SnapshotHeader/Footer, LeaderChange, "
           "Voters, KRaftVersion), consumer protocol and request/response headers"),
    Source("kafka_group_coordinator", "kafka-group-coordinator", "common/message/", None,
           "__consumer_offsets record keys and values"),
    Source("kafka_storage", "kafka-storage", "message/", None,
           "__remote_log_metadata records (KIP-405) and the producer snapshot"),
    Source("kafka_transaction_coordinator", "kafka-transaction-coordinator", "common/message/", None,
           "__transaction_state record keys and values"),
    Source("kafka_share_coordinator", "kafka-share-coordinator", "common/message/", None,
           "__share_group_state record keys and values"),
)

#: Spec keys carried into the tables, per level. Prose ("about") and code-generation hints
#: (ignorable, mapKey, zeroCopy, entityType, ...) are left out.
MESSAGE_KEYS = ("name", "type", "apiKey", "validVersions", "flexibleVersions", "latestVersionUnstable")
FIELD_KEYS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag",
              "flexibleVersions", "default")
VERSION_KEYS = ("validVersions", "flexibleVersions", "versions", "nullableVersions", "taggedVersions")


class SpecError(Exception):
    pass


def strip_comments(text: str) -> str:
    """Remove // line comments (outside JSON strings) from a spec file."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_versions(text, where: str):
    """'0+' -> (0, None); '3' -> (3, 3); '1-3' -> (1, 3); 'none' -> None."""
    if isinstance(text, int):
        return (text, text)
    text = str(text).strip()
    if text == "none":
        return None
    try:
        if text.endswith("+"):
            return (int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return (int(lo), int(hi))
        v = int(text)
        return (v, v)
    except ValueError:
        raise SpecError(f"{where}: version range {text!r} not understood") from None


def clean_field(field: dict, where: str) -> dict:
    out = {}
    for key in FIELD_KEYS:
        if key in field:
            value = field[key]
            if key in VERSION_KEYS:
                value = parse_versions(value, f"{where}.{field.get('name')}.{key}")
            out[key] = value
    if "fields" in field:
        out["fields"] = [clean_field(f, f"{where}.{field.get('name')}") for f in field["fields"]]
    return out


def clean_message(spec: dict, where: str) -> dict:
    out = {}
    for key in MESSAGE_KEYS:
        if key in spec:
            value = spec[key]
            if key in VERSION_KEYS:
                value = parse_versions(value, f"{where}.{key}")
            out[key] = value
    out["fields"] = [clean_field(f, where) for f in spec.get("fields", [])]
    common = spec.get("commonStructs") or []
    if common:
        out["commonStructs"] = {s["name"]: [clean_field(f, f"{where}.{s['name']}") for f in s["fields"]]
                                for s in common}
    return out


def jar_path(m2: Path, artifact: str, version: str) -> Path:
    return m2 / "org" / "apache" / "kafka" / artifact / version / f"{artifact}-{version}.jar"


def fetch_jar(m2: Path, artifact: str, version: str) -> None:
    subprocess.run(["mvn", "-q", "-B", "dependency:get", f"-Dmaven.repo.local={m2}",
                    f"-Dartifact={GROUP_ID}:{artifact}:{version}", "-Dtransitive=false"], check=True)


def read_source(source: Source, m2: Path, version: str, fetch: bool = False) -> tuple[dict, str]:
    """(messages by name, sha256 of the jar) of one source jar."""
    path = jar_path(m2, source.artifact, version)
    if not path.is_file() and fetch:
        fetch_jar(m2, source.artifact, version)
    if not path.is_file():
        raise SpecError(f"{path} not found: run `bash scripts/kafka-jars.sh` (KAFKA_VERSION={version}) "
                        f"or pass --fetch")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    messages = {}
    with zipfile.ZipFile(path) as jar:
        names = sorted(n for n in jar.namelist()
                       if n.startswith(source.prefix) and n.endswith(".json") and "/" not in n[len(source.prefix):])
        for name in names:
            where = f"{path.name}!{name}"
            try:
                spec = json.loads(strip_comments(jar.read(name).decode("utf-8")))
            except ValueError as e:
                raise SpecError(f"{where}: not JSON after stripping comments: {e}") from None
            if source.spec_types is not None and spec.get("type") not in source.spec_types:
                continue
            if spec["name"] in messages:
                raise SpecError(f"{where}: message {spec['name']} defined twice")
            messages[spec["name"]] = clean_message(spec, where)
    if not messages:
        raise SpecError(f"{path}: no message specs under {source.prefix}")
    return messages, sha


def render_module(source: Source, version: str, sha: str, messages: dict) -> str:
    coords = f"{GROUP_ID}:{source.artifact}:{version}"
    body = pprint.pformat(messages, indent=1, width=110, sort_dicts=True)
    return (
        f'"""GENERATED by scripts/gen_kafka_specs.py from {coords} (Maven Central): do not edit.\n\n'
        f"Decoding tables for {source.purpose}: every message spec under {source.prefix} of the jar,\n"
        "reduced to the data a decoder needs. Version ranges are (lowest, highest) tuples, highest None\n"
        "meaning open-ended ('N+'), None meaning 'none'. Decoded by auditor.formats.kafka_message.\n"
        '"""\n\n'
        f"KAFKA_VERSION = {version!r}\n"
        f"MAVEN_COORDINATES = {coords!r}\n"
        f"SPEC_FOLDER = {source.prefix!r}\n"
        f"JAR_SHA256 = {sha!r}\n\n"
        f"MESSAGES = {body}\n"
    )


def generate(version: str = DEFAULT_KAFKA_VERSION, m2: Path = DEFAULT_M2, fetch: bool = False) -> dict[str, str]:
    """{file name: module text} for every source."""
    files = {}
    index_lines = []
    for source in SOURCES:
        messages, sha = read_source(source, m2, version, fetch)
        files[f"{source.module}.py"] = render_module(source, version, sha, messages)
        index_lines.append(source.module)
    files["__init__.py"] = (
        '"""GENERATED by scripts/gen_kafka_specs.py: the decoding tables, one module per Kafka jar."""\n\n'
        f"KAFKA_VERSION = {version!r}\n"
        f"SOURCES = {tuple(index_lines)!r}\n"
    )
    return files


def differences(files: dict[str, str], out: Path) -> list[str]:
    diffs = []
    for name, text in files.items():
        path = out / name
        if not path.is_file():
            diffs.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            diffs.append(f"{path}: differs from what the generator makes")
    for path in sorted(out.glob("*.py")):
        if path.name not in files:
            diffs.append(f"{path}: not made by the generator")
    return diffs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    p.add_argument("--m2", type=Path, default=DEFAULT_M2, help="Maven repository (default .cache/m2)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--fetch", action="store_true", help="resolve missing jars with mvn dependency:get")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 when the tables differ")
    args = p.parse_args(argv)
    try:
        files = generate(args.kafka_version, args.m2, args.fetch)
    except SpecError as e:
        print(f"gen_kafka_specs: {e}", file=sys.stderr)
        return 2
    if args.check:
        diffs = differences(files, args.out)
        for d in diffs:
            print(d, file=sys.stderr)
        return 1 if diffs else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
    count = sum(t.count("'validVersions'") for t in files.values())
    print(f"wrote {len(files)} modules ({count} message specs) for Kafka {args.kafka_version} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
