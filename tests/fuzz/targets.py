"""The harnesses: name -> (module, dictionary file, libFuzzer -max_len). One per decoder family."""

from __future__ import annotations

import importlib

HARNESSES = {
    "segment": ("fuzz.fuzz_segment", "binary.dict", 65536),
    "index": ("fuzz.fuzz_index", "binary.dict", 65536),
    # (past the C fold's first 64 KiB window: a batch across it takes the refill path)
    "offsets_fold": ("fuzz.fuzz_offsets_fold", "binary.dict", 131072),
    "key_fold": ("fuzz.fuzz_key_fold", "binary.dict", 65536),  # auditor/keys/_ckeys.c (issue 23)
    "message": ("fuzz.fuzz_message", "binary.dict", 16384),
    "metadata_batch": ("fuzz.fuzz_metadata_batch", "binary.dict", 65536),
    "checkpoints": ("fuzz.fuzz_checkpoints", "text.dict", 16384),
    "producer_snapshot": ("fuzz.fuzz_producer_snapshot", "binary.dict", 16384),
    "manifest_parts": ("fuzz.fuzz_manifest_parts", "json.dict", 65536),
}


def load(name: str):
    return importlib.import_module(HARNESSES[name][0])
