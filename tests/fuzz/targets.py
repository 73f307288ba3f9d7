"""The harnesses: name -> (module, dictionary file, libFuzzer -max_len). One per decoder family."""

from __future__ import annotations

import importlib
from pathlib import Path

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


#: The native libFuzzer harnesses (tests/fuzz/native/driver.c, fuzz.native_targets): name -> (the
#: atheris harness whose input layout and committed seeds it shares, its dictionary, -max_len).
NATIVE = {
    "c_walk": ("segment", "binary.dict", 65536),
    "c_index": ("index", "binary.dict", 65536),
    "c_offsets": ("offsets_fold", "binary.dict", 131072),
    "c_keys": ("key_fold", "binary.dict", 65536),
    "c_message": ("message", "binary.dict", 16384),
    "c_metadata_batch": ("metadata_batch", "binary.dict", 65536),
}


def seeds(name: str) -> str:
    """The committed seeds' folder of a harness, atheris or native (relative to the checkout)."""
    return f"tests/fuzz/corpus/{NATIVE[name][0] if name in NATIVE else name}"


#: The Python modules atheris instruments for each harness (module-name prefixes): the decoders it
#: fuzzes, not the harness's own comparisons (tests/fuzz/*.py) nor the rest of the tool that its
#: imports bring in (schema, scan planning, JSON output ...). Their lines guide the search only
#: where a decoder decides something; each instrumented line costs a callback per execution.
INSTRUMENT = {
    "segment": ("auditor.formats", "auditor.scan.segment"),
    "index": ("auditor.formats", "auditor.scan.segment", "auditor.scan.resume", "auditor.scan.state"),
    "offsets_fold": ("auditor.formats",),
    "key_fold": ("auditor.formats", "auditor.keys"),
    "message": ("auditor.formats",),
    "metadata_batch": ("auditor.formats",),
    "checkpoints": ("auditor.formats.checkpoints",),
    "producer_snapshot": ("auditor.formats.producer_snapshot",),
    "manifest_parts": ("auditor.manifest", "auditor.cluster"),
}


def not_instrumented(name: str) -> list[str]:
    """Every module of the checkout (auditor/ and tests/fuzz/, by file name: nothing imported)
    that harness ``name`` does not instrument: atheris.instrument_imports' exclude list (its
    include list takes top-level packages only)."""
    root = Path(__file__).resolve().parents[2]
    names = [".".join(p.relative_to(root).with_suffix("").parts) for p in (root / "auditor").rglob("*.py")]
    names = [n.removesuffix(".__init__") for n in names]
    names += ["fuzz", *("fuzz." + p.stem for p in Path(__file__).parent.glob("*.py") if p.stem != "__init__")]
    keep = INSTRUMENT[name]
    return sorted(n for n in names if not any(n == k or n.startswith(k + ".")
                                              for k in keep))


def load(name: str):
    return importlib.import_module(HARNESSES[name][0])
