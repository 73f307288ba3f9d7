"""What the reassignment planner takes and gives: plain values, no I/O.

A replica is one (topic, partition, broker); it lives in one log dir of its broker and weighs
``size_bytes`` (its ``.log`` bytes today: what a move copies). The planner balances *weights*:
:attr:`PlanInput.weights` per replica (``kafka-audit plan`` gives each replica's bytes at
retention steady state there, today's bytes where that is unknown), or today's bytes when None
(``--balance current``). A moved replica keeps its weight. Bytes moved, and the bytes while both
copies exist, are always today's bytes: that is what a move copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TP = tuple[str, int]                 # (topic, partition)
DirKey = tuple[int, str]             # (broker, log dir path)


@dataclass(slots=True)
class BrokerSpec:
    broker_id: int
    rack: str | None
    log_dirs: list[str]              # absolute paths, as the broker's log.dirs names them
    fenced: bool = False             # not serving (offline, shutting down): no replica is planned onto it


@dataclass(slots=True)
class PartitionSpec:
    topic: str
    partition: int
    replicas: list[int]              # in order: the first is the preferred leader
    leader: int | None
    log_dirs: dict[int, str | None]  # broker -> the log dir holding its replica (None: unknown)
    sizes: dict[int, int]            # broker -> that replica's bytes today
    movable: bool = True             # False: leave it (e.g. a reassignment of it is under way)

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


@dataclass
class PlanInput:
    brokers: dict[int, BrokerSpec]
    partitions: dict[TP, PartitionSpec]
    fixed_bytes: dict[DirKey, int] = field(default_factory=dict)   # bytes no plan moves (metadata log, -delete dirs)
    capacities: dict[DirKey, int] = field(default_factory=dict)    # log dir -> its disk's bytes, when known
    weights: dict[tuple[TP, int], float] | None = None   # (tp, broker) -> weight to balance; absent/None: today's bytes
    notes: list[str] = field(default_factory=list)
    disks: dict[DirKey, str] = field(default_factory=dict)         # log dir -> its file system, when known
    disk_capacity: dict[str, int] = field(default_factory=dict)    # file system -> its size in bytes
    disk_used: dict[str, int] = field(default_factory=dict)        # file system -> bytes used today (anything)
    balance: str = "current"        # what is balanced: "steady" (``weights`` = ``steady``) or "current" (today's bytes)
    steady: dict[tuple[TP, int], float] | None = None   # (tp, broker) -> bytes at steady state (unknown: today's)
    fallbacks: dict[str, tuple[int, int]] = field(default_factory=dict)  # why unknown -> (replicas, bytes today)


@dataclass
class PlanOptions:
    tolerance: float = 0.10          # every broker (log dir) within this fraction of its peers' mean
    headroom: float = 0.85           # no log dir above this fraction of its capacity while both copies exist
    drain: frozenset[int] = frozenset()
    exclude_topics: tuple[str, ...] = ()   # regular expressions, matched whole (re.fullmatch)
    max_move_bytes: int | None = None
    max_moves: int | None = None
    hot_ratio: float = 3.0           # a moved partition this many times its topic's median gets a note


@dataclass(slots=True)
class Move:
    topic: str
    partition: int
    from_broker: int
    from_dir: str | None
    to_broker: int
    to_dir: str
    size_bytes: int
    leader: bool                     # the replica moved is the partition's leader today

    @property
    def kind(self) -> str:
        return "log_dir" if self.from_broker == self.to_broker else "broker"

    def as_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "kind": self.kind,
                "from_broker": self.from_broker, "from_dir": self.from_dir, "to_broker": self.to_broker,
                "to_dir": self.to_dir, "size_bytes": self.size_bytes, "leader": self.leader}


@dataclass
class Plan:
    moves: list[Move]
    before_brokers: dict[int, int]
    after_brokers: dict[int, int]
    before_dirs: dict[DirKey, int]
    after_dirs: dict[DirKey, int]
    peak_dirs: dict[DirKey, int]     # bytes while every new copy and its old one both exist
    peak_disks: dict[str, int]       # the same per file system (bytes used today + every new copy landing there)
    lower_bound_bytes: int
    target_reached: bool
    reasons: list[str]               # why the target is not reached (empty when it is)
    notes: list[str]
    final: dict[TP, tuple[list[int], dict[int, str | None]]]   # changed partitions: replicas, broker -> dir
    options: PlanOptions
    mean_broker_bytes: float
    capacities_known: bool

    @property
    def bytes_moved(self) -> int:
        return sum(m.size_bytes for m in self.moves)

    @property
    def bytes_moved_between_brokers(self) -> int:
        return sum(m.size_bytes for m in self.moves if m.kind == "broker")
