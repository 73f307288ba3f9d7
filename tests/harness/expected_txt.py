"""The one parser of ../shared/fixtures/real/EXPECTED.txt: per real .log or record set, the facts
an independent scan found (the fixtures README says how it was made). One line per file:

    PATH size N batches N magic {m: n} codec {c: n} txn N ctrl N offs (first, last)
         ts ('YYYY-MM-DDTHH:MM:SS'|None, ...) crc_bad N trail N {'index': (entries, ...), ...}
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

_LINE = re.compile(
    r"^(?P<path>\S+) size (?P<size>\d+) batches (?P<batches>\d+) magic (?P<magic>\{[^}]*\}) "
    r"codec (?P<codec>\{[^}]*\}) txn (?P<txn>\d+) ctrl (?P<ctrl>\d+) offs (?P<offs>\([^)]*\)) "
    r"ts (?P<ts>\([^)]*\)) crc_bad (?P<crc_bad>\d+) trail (?P<trail>\d+) (?P<indexes>\{.*\})$"
)


def read_expected(path: Path) -> dict[str, dict]:
    """``{relative path: facts}``; facts: size, batches, txn, ctrl, crc_bad, trail (ints), magic and
    codec ({value: batches}), offs ((first, last)), ts ((min, max) UTC seconds as text, None when
    absent), indexes ({'index'|'timeindex': (entries, ...)}). A line not understood is an error
    naming it."""
    out = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"{path} line {number} not understood: {line!r}")
        out[m["path"]] = {
            "size": int(m["size"]),
            "batches": int(m["batches"]),
            "magic": ast.literal_eval(m["magic"]),
            "codec": ast.literal_eval(m["codec"]),
            "txn": int(m["txn"]),
            "ctrl": int(m["ctrl"]),
            "offs": ast.literal_eval(m["offs"]),
            "ts": tuple(None if t == "None" else t for t in ast.literal_eval(m["ts"])),
            "crc_bad": int(m["crc_bad"]),
            "trail": int(m["trail"]),
            "indexes": ast.literal_eval(m["indexes"]),
        }
    return out
