"""Random valid messages of Kafka's message specs (auditor.formats.kafka_message), encoded from the spec
tables as Kafka's own ``MessageDataGenerator`` writes them: for the C decoder's tests and the fuzzers'
seeds (tests/fuzz/make_seeds.py)."""

from __future__ import annotations

import struct

from auditor.formats.message_codegen import FIXED, in_versions
from harness.encoding import uvarint


class Encoder:
    """Random valid messages of one spec at one version, encoded from the spec tables as Kafka's
    MessageDataGenerator writes them (nulls, tagged fields present or not, unknown tags)."""

    def __init__(self, spec, version, rnd):
        self.s, self.v, self.rnd = spec, version, rnd
        self.flexible = in_versions(spec.flexible_versions, version)

    def struct(self, fields) -> bytes:
        present = [f for f in fields if in_versions(f.get("versions"), self.v)]
        tagged = [f for f in present if self.flexible and in_versions(f.get("taggedVersions"), self.v)]
        out = b"".join(self.value(f, False) for f in present if f not in tagged)
        if not self.flexible:
            return out
        items = [(int(f["tag"]), self.value(f, True)) for f in tagged if self.rnd.random() < 0.6]
        if self.rnd.random() < 0.25:
            items.append((self.rnd.choice([90, 200, 5000]), self.rnd.randbytes(self.rnd.randint(0, 4))))
        items.sort(key=lambda t: t[0])
        return out + uvarint(len(items)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in items)

    def value(self, f, tagged: bool) -> bytes:
        t, rnd = f["type"], self.rnd
        nullable = in_versions(f.get("nullableVersions"), self.v)
        flex = True if tagged else (in_versions(f["flexibleVersions"], self.v) if "flexibleVersions" in f
                                    else self.flexible)
        if t.startswith("[]"):
            if nullable and rnd.random() < 0.15:
                return uvarint(0) if flex else struct.pack(">i", -1)
            n = rnd.choice([0, 1, 2, 3, 33] if t[2:] in FIXED else [0, 1, 2])
            head = uvarint(n + 1) if flex else struct.pack(">i", n)
            return head + b"".join(self.scalar(t[2:], f, flex, False, tagged) for _ in range(n))
        return self.scalar(t, f, flex, nullable, tagged)

    def scalar(self, t, f, flex, nullable, tagged) -> bytes:
        rnd = self.rnd
        if t in FIXED:
            return bytes([rnd.choice([0, 1, 2])]) if t == "bool" else rnd.randbytes(FIXED[t][1])
        if t in ("string", "bytes", "records"):
            width = ">h" if t == "string" else ">i"
            if nullable and rnd.random() < 0.2:
                return uvarint(0) if flex else struct.pack(width, -1)
            data = (rnd.choice(["", "a", "topic-ü", "€" * 30]).encode() if t == "string"
                    else rnd.randbytes(rnd.randint(0, 40)))
            return (uvarint(len(data) + 1) if flex else struct.pack(width, len(data))) + data
        body = self.struct(self.s.struct_fields(f))
        if nullable and not tagged:
            return b"\xff" if rnd.random() < 0.2 else b"\x01" + body
        return body
