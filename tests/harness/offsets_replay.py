"""The ``__consumer_offsets`` replay both ways: the C fold of plain batches (auditor/formats/_coffsets.c)
against the pure-Python replay, on the same log dirs (:func:`assert_same_both_ways`)."""

from __future__ import annotations

from auditor.cluster import offsets_segments
from auditor.cluster.consumer_groups import fold_partition_dir, offsets_partition_dirs, read_groups
from auditor.formats import offsets_records as orec


def _replay(log_dirs, monkeypatch, use_c: bool) -> tuple:
    """Per replica dir: (store, pending, notes, records); then the groups and notes of read_groups."""
    monkeypatch.setattr(offsets_segments, "USE_C_FOLD", use_c)
    monkeypatch.setattr(orec, "USE_C_STREAM", use_c)
    folds = {}
    for part, dirs in sorted(offsets_partition_dirs(log_dirs).items()):
        for d in dirs:
            f = fold_partition_dir(d, part)
            folds[str(d)] = (f.store, f.pending, f.notes, f.records)
    result = read_groups(log_dirs)
    return folds, {g: grp.to_dict() for g, grp in result.groups.items()}, result.notes, result.records


def assert_same_both_ways(log_dirs, monkeypatch) -> tuple[tuple, int]:
    """Both replays equal; returns the result and how many records the C calls folded."""
    folded = []
    real = orec.fold_plain_batches

    def counting(*args):
        out = real(*args)
        folded.append(out[1])
        return out

    monkeypatch.setattr(orec, "fold_plain_batches", counting)
    with_c = _replay(log_dirs, monkeypatch, True)
    calls = len(folded)
    pure = _replay(log_dirs, monkeypatch, False)
    assert len(folded) == calls     # the pure-Python run made no C call
    assert with_c[0] == pure[0]
    assert with_c[1:] == pure[1:]
    return with_c, sum(folded)
