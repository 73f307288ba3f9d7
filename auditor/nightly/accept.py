"""``--accept FILE``: findings a team decided to live with, each until a date.

The file (YAML; format and example in docs/nightly-history.md)::

    stale_after_runs: 3          # optional: an entry matching nothing this many runs in a row is stale
    accept:
      - check: skew.partition_size   # a check's name or code (KLA001)
        topic: "clicks-*"            # optional: a glob on the topic
        partition: 2                 # optional
        broker: 1                    # optional
        reason: "keyed by customer on purpose; the hot customer moves in January"
        owner: data-platform@example.com
        expires: 2027-01-31          # applies to audits before this date (UTC)

Loading checks everything and raises :class:`AcceptFileError` (exit 2 at the CLI) with
``FILE:LINE: what is wrong``: a malformed file, an unknown key or check, an entry without
reason, owner or expiry, an expiry already past at load time. Matching is pure
(:func:`split_accepted`): an entry applies while the audit time is before its expiry; an entry
expired at the audit time brings its findings back with a note naming the entry.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from auditor.nightly.identity import RANK, topic_matches

ENTRY_KEYS = {"check", "topic", "partition", "broker", "reason", "owner", "expires"}
REQUIRED = ("check", "reason", "owner", "expires")
TOP_KEYS = {"accept", "stale_after_runs"}
DEFAULT_STALE_AFTER_RUNS = 3
DAY_MS = 86_400_000


class AcceptFileError(ValueError):
    """``FILE:LINE: problem``: one line for stderr."""


@dataclass(frozen=True)
class AcceptEntry:
    check: str
    """the check's name as the finding carries it (a code in the file is turned into the name)"""
    code: str
    topic: str | None
    partition: int | None
    broker: int | None
    reason: str
    owner: str
    expires: dt.date
    where: str
    """``FILE:LINE`` of the entry, named in notes"""

    @property
    def key(self) -> str:
        """The entry's lasting name (for stale counting in the history): what it matches."""
        return (f"{self.code} topic={self.topic or '*'} partition={'*' if self.partition is None else self.partition}"
                f" broker={'*' if self.broker is None else self.broker}")

    @property
    def expires_ms(self) -> int:
        return int(dt.datetime(self.expires.year, self.expires.month, self.expires.day,
                               tzinfo=dt.timezone.utc).timestamp() * 1000)

    def matches(self, f: Mapping) -> bool:
        return (f["check"] == self.check and RANK[f["severity"]] > 0 and topic_matches(self.topic, f.get("topic"))
                and (self.partition is None or f.get("partition") == self.partition)
                and (self.broker is None or f.get("broker_id") == self.broker))

    def to_dict(self) -> dict:
        return {"entry": self.where, "key": self.key, "check": self.check, "code": self.code, "topic": self.topic,
                "partition": self.partition, "broker": self.broker, "reason": self.reason, "owner": self.owner,
                "expires": self.expires.isoformat()}


@dataclass(frozen=True)
class AcceptFile:
    path: str
    entries: tuple[AcceptEntry, ...]
    stale_after_runs: int


def _line_loader():
    """A SafeLoader whose mappings remember their line (``__line__``, 1-based)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def _value_line(text: str, exc: ValueError) -> int:
    """The line of the first impossible date in ``text`` (the YAML loader's ValueError has no mark)."""
    import re

    for n, line in enumerate(text.splitlines(), 1):
        m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", line)
        if m:
            try:
                dt.date(*map(int, m.groups()))
            except ValueError:
                return n
    return 1


def load(path: str, today: dt.date, lookup: Callable[[str], object] | None = None) -> AcceptFile:
    """The accept file, checked. ``today`` (UTC) is the load time's date: an expiry on or before
    it is refused. ``lookup`` maps a check name to its class (default: the registry)."""
    import yaml

    if lookup is None:
        from checks import REGISTRY

        by_name = dict(REGISTRY)
        by_code = {c.code: c for c in REGISTRY.values()}
        lookup = lambda s: by_name.get(s) or by_code.get(s.upper())  # noqa: E731
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise AcceptFileError(f"{path}: cannot read the accept file: {exc.strerror or exc}") from None
    try:
        doc = yaml.load(text, Loader=_line_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise AcceptFileError(f"{path}:{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # a scalar YAML resolves but cannot build, e.g. the date 2027-02-30
        raise AcceptFileError(f"{path}:{_value_line(text, exc)}: {exc} (is a date YYYY-MM-DD right?)") from None
    if doc is None:
        doc = {"__line__": 1, "accept": []}
    if not isinstance(doc, dict):
        raise AcceptFileError(f"{path}:1: expected a mapping with an 'accept:' list, got {type(doc).__name__}")
    unknown = sorted(set(doc) - TOP_KEYS - {"__line__"})
    if unknown:
        raise AcceptFileError(f"{path}:{doc['__line__']}: unknown key {unknown[0]!r} (expected accept, stale_after_runs)")
    stale = doc.get("stale_after_runs", DEFAULT_STALE_AFTER_RUNS)
    if not isinstance(stale, int) or isinstance(stale, bool) or stale < 1:
        raise AcceptFileError(f"{path}:{doc['__line__']}: stale_after_runs must be an integer >= 1, got {stale!r}")
    items = doc.get("accept")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise AcceptFileError(f"{path}:{doc['__line__']}: 'accept' must be a list of entries")
    entries = []
    for item in items:
        if not isinstance(item, dict):
            raise AcceptFileError(f"{path}:{doc['__line__']}: each entry of 'accept' must be a mapping, got {item!r}")
        entries.append(_entry(path, item, today, lookup))
    return AcceptFile(path, tuple(entries), stale)


def _entry(path: str, item: dict, today: dt.date, lookup) -> AcceptEntry:
    line = item.pop("__line__")
    where = f"{path}:{line}"
    unknown = sorted(set(item) - ENTRY_KEYS)
    if unknown:
        raise AcceptFileError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(ENTRY_KEYS))})")
    for key in REQUIRED:
        value = item.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise AcceptFileError(f"{where}: entry has no {key}")
    cls = lookup(str(item["check"]))
    if cls is None:
        raise AcceptFileError(f"{where}: no check named or coded {item['check']!r}")
    expires = item["expires"]
    if isinstance(expires, str):
        try:
            expires = dt.date.fromisoformat(expires)
        except ValueError:
            raise AcceptFileError(f"{where}: expires {expires!r} is not a date (YYYY-MM-DD)") from None
    if isinstance(expires, dt.datetime) or not isinstance(expires, dt.date):
        raise AcceptFileError(f"{where}: expires {expires!r} is not a date (YYYY-MM-DD)")
    if expires <= today:
        raise AcceptFileError(f"{where}: expired on {expires.isoformat()} (today is {today.isoformat()} UTC): "
                              f"renew it with a new date and reason, or delete it")
    ints = {}
    for key in ("partition", "broker"):
        value = item.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise AcceptFileError(f"{where}: {key} must be a non-negative integer, got {value!r}")
        ints[key] = value
    topic = item.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise AcceptFileError(f"{where}: topic must be a string (a glob), got {topic!r}")
    return AcceptEntry(check=cls.name, code=cls.code, topic=topic, partition=ints["partition"], broker=ints["broker"],
                       reason=str(item["reason"]).strip(), owner=str(item["owner"]).strip(), expires=expires,
                       where=where)


@dataclass
class Split:
    findings: list[dict]
    accepted: list[dict]
    entries: list[dict]
    """each entry with ``matched`` (this run), ``expired`` (at the audit time)"""
    notes: list[str]


def split_accepted(findings: Sequence[dict], accept: AcceptFile | None, as_of_ms: int) -> Split:
    """Findings matched by an entry in force at ``as_of_ms`` move to ``accepted`` (with their
    ``acceptance``); those matched by an expired entry stay, with ``acceptance_expired`` and a note."""
    if accept is None:
        return Split(list(findings), [], [], [])
    kept, accepted, notes = [], [], []
    matched = {e.where: 0 for e in accept.entries}
    for f in findings:
        entry = next((e for e in accept.entries if e.matches(f)), None)
        if entry is None:
            kept.append(f)
            continue
        matched[entry.where] += 1
        info = {"reason": entry.reason, "owner": entry.owner, "expires": entry.expires.isoformat(), "entry": entry.where}
        if as_of_ms < entry.expires_ms:
            accepted.append({**f, "acceptance": info})
        else:
            kept.append({**f, "acceptance_expired": info})
    for e in accept.entries:
        if as_of_ms >= e.expires_ms and matched[e.where]:
            notes.append(f"accept entry {e.where} ({e.key}, owner {e.owner}) expired on {e.expires.isoformat()}: "
                         f"its {matched[e.where]} finding(s) count again")
    entries = [dict(e.to_dict(), matched=matched[e.where], expired=as_of_ms >= e.expires_ms) for e in accept.entries]
    return Split(kept, accepted, entries, notes)


def mark_stale(entries: list[dict], unmatched_before: Mapping[str, int], stale_after_runs: int) -> list[str]:
    """Each entry gets ``runs_unmatched`` (this run and the runs in a row before it, from the
    history: ``unmatched_before`` by entry key) and ``stale``; returns the notes for stale ones."""
    notes = []
    for e in entries:
        e["runs_unmatched"] = 0 if e["matched"] else unmatched_before.get(e["key"], 0) + 1
        e["stale"] = e["runs_unmatched"] >= stale_after_runs
        if e["stale"]:
            notes.append(f"accept entry {e['entry']} ({e['key']}) matched nothing for {e['runs_unmatched']} run(s): "
                         f"stale, delete it or fix its match")
    return notes
