"""What ``kafka-audit plan`` balances by default: each replica's bytes at retention steady state.

The capacity projection (:mod:`auditor.capacity.steady`) run on the segment rows the plan reads
(an ``index`` scan, or the manifests' rows), with each topic's retention rules from the KRaft
metadata log (the topic's dynamic config, else the dynamic cluster default, else Kafka's
default) or from the live cluster (``--bootstrap-server``). A compact-only topic is bounded by its
distinct keys when key statistics are there (manifests collected with ``--keys``, or ``plan
--keys``). Where a replica's steady state is unknown it weighs its bytes of today, and the plan's
summary says how many and why.
"""

from __future__ import annotations

from auditor.capacity.columns import from_arrow, from_pandas
from auditor.capacity.rules import BROKER_KEYS, CAPACITY_KEYS, rules_for
from auditor.capacity.steady import UNKNOWN, replica_steady_states
from auditor.plan.inputs import add_steady_state


def rules_from_state(state) -> dict:
    """{topic: TopicRules} from a metadata log's state (None: every topic at Kafka's defaults)."""
    if state is None:
        return {}
    from auditor.cluster.metadata_audit import effective_topic_configs

    configs = effective_topic_configs(state, CAPACITY_KEYS)
    cluster = state.broker_configs(None)
    return {t: rules_for(t, _setting(configs, cluster, "metadata log: cluster default")) for t in configs}


def rules_from_cluster(bootstrap: str) -> dict:
    """The same from a live cluster's topic configs and one broker's settings (the admin API)."""
    from auditor.live_config import fetch_broker_configs, fetch_topic_configs

    configs = {t: {k: (v, "live cluster") for k, v in cfg.items()}
               for t, cfg in fetch_topic_configs(bootstrap, keys=CAPACITY_KEYS).items()}
    cluster = fetch_broker_configs(bootstrap, BROKER_KEYS)
    return {t: rules_for(t, _setting(configs, cluster, "live cluster: broker config")) for t in configs}


def _setting(configs: dict, cluster: dict, cluster_source: str):
    def setting(topic: str, key: str):
        if key in BROKER_KEYS:
            return (cluster[key], cluster_source) if key in cluster else (None, "")
        return configs.get(topic, {}).get(key, (None, ""))
    return setting


def compact_only(rules: dict) -> set[str]:
    """Topics the log cleaner alone bounds (``cleanup.policy=compact``): their key statistics bound them."""
    return {t for t, r in rules.items() if r.compacts and not r.deletes}


def key_statistics(log_dirs: list[str], manifests: list[str], topics: set[str], read_log_dirs: bool) -> tuple[dict, list[str]]:
    """The key statistics that bound compact-only ``topics`` (:func:`auditor.capacity.compaction.key_bounds`)
    and notes: the manifests' key parts (``collect --keys``) when there are manifests, else, when
    ``read_log_dirs`` (``plan --keys``), every record of those topics' partition dirs."""
    from auditor.capacity.compaction import keys_from_audit
    from auditor.keys.audit_keys import build_key_audit, from_manifests, scan_keys_local

    if not topics or not (manifests or read_log_dirs):
        return {}, []
    if manifests:
        from auditor.manifest import find_manifests

        pairs, notes = from_manifests(find_manifests(manifests))
        source = "manifests (collect --keys)"
    else:
        pairs, notes, source = scan_keys_local(log_dirs, None, topics=topics), [], "log dirs (all records)"
    pairs = [(where, found) for where, found in pairs if where.get("topic") in topics]
    keys = keys_from_audit(build_key_audit(pairs, source, notes=notes))
    return keys, [f"keys: {n}" for n in notes]


def segment_columns(segments):
    """The capacity columns of the segment rows (a list of dicts from a scan, or Arrow tables from manifests)."""
    if isinstance(segments, list) and segments and isinstance(segments[0], dict):
        import pandas as pd

        return from_pandas(pd.DataFrame(segments))
    import pyarrow as pa

    tables = [t for t in segments if t is not None and t.num_rows]
    if not tables:
        return from_pandas(__import__("pandas").DataFrame())
    return from_arrow(pa.concat_tables(tables, promote_options="default"))


def weigh_steady(inp, segments, log_dir_rows: list[dict], rules: dict, balance: str, keys: dict | None = None) -> None:
    """``inp.steady`` (and, balancing the steady state, ``inp.weights``) from the projection;
    ``keys``: :func:`key_statistics`."""
    states = replica_steady_states(segment_columns(segments), log_dir_rows, rules, keys=keys)
    add_steady_state(inp, states.get, UNKNOWN, balance)
