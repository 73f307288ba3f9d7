"""What ``kafka-audit plan`` balances by default: each replica's bytes at retention steady state.

The capacity projection (:mod:`auditor.capacity.steady`) run on the segment rows the plan reads
(an ``index`` scan, or the manifests' rows), with each topic's retention rules from the KRaft
metadata log (the topic's dynamic config, else the dynamic cluster default, else Kafka's
default) or from the live cluster (``--bootstrap-server``). Where a replica's steady state is
unknown it weighs its bytes of today, and the plan's summary says how many and why.
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
    return {t: rules_for(t, _setting(configs, cluster)) for t in configs}


def rules_from_cluster(bootstrap: str) -> dict:
    """The same from a live cluster's topic configs (the admin API)."""
    from auditor.live_config import fetch_topic_configs

    configs = {t: {k: (v, "live cluster") for k, v in cfg.items()} for t, cfg in fetch_topic_configs(bootstrap).items()}
    return {t: rules_for(t, _setting(configs, {})) for t in configs}


def _setting(configs: dict, cluster: dict):
    def setting(topic: str, key: str):
        if key in BROKER_KEYS:
            return (cluster[key], "metadata log: cluster default") if key in cluster else (None, "")
        return configs.get(topic, {}).get(key, (None, ""))
    return setting


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


def weigh_steady(inp, segments, log_dir_rows: list[dict], rules: dict, balance: str) -> None:
    """``inp.steady`` (and, balancing the steady state, ``inp.weights``) from the projection."""
    states = replica_steady_states(segment_columns(segments), log_dir_rows, rules)
    add_steady_state(inp, states.get, UNKNOWN, balance)
