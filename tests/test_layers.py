"""One-way layers: an ``ast`` walk of every import in auditor/, checks/, reports/ and airflow_dags/
(module-level and inside functions) against :data:`LAYERS`, the one statement of the order.

Fails on: an import of a higher layer, a cycle between modules, a private ``_name`` imported from
another package, a module the order does not place, and a docs/layers.md whose table is not the one
:func:`layers_table` renders from :data:`LAYERS` (``python tests/test_layers.py --write`` writes it).
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

# every module parsed, a fresh Python importing the CLI: 1.4 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=1.4)]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("auditor", "checks", "reports", "airflow_dags")
LAYERS_DOC = ROOT / "docs" / "layers.md"

LAYER_RULES: dict[int, str] = {
    1: "the foundation: units and times, the tables' schemas declared once, output files whole or absent; no project import but each other",
    2: "pure functions on bytes, one module per on-disk structure; every parse error names file, position, field, value, expectation",
    3: "files to rows, pure Python, read-only; key statistics and partitioners",
    4: "what the cluster records about itself (metadata log, consumer groups, remote storage), read offline; the reassignment planner (pure: loads in, a plan out)",
    5: "the replay search: the broker's time lookups on segment views, reading segment files when asked; the capacity projection (Kafka's retention rules run forward on numpy columns)",
    6: "manifests: collect on a broker, read, find (the one discovery rule), write whole",
    7: "the rule checks (pure: what needs files is handed in), grouped by family, and their framework",
    8: "the engines behind one interface (local: pyarrow and pandas in this process; spark), each with its aggregates, check runner and Great Expectations path; never print, never parse arguments",
    9: "the pipeline (engine, checks, a typed outcome) and the nightly (identity, comparison, accepted findings, history)",
    10: "the outputs: the findings document, HTML, charts, Prometheus text",
    11: "commands: kafka-audit, one module per command, and the spark-submit entry",
    12: "the Airflow DAGs and their operators",
}
"""What each layer holds and may do (docs/layers.md's table is rendered from this and LAYERS)."""

LAYERS: list[tuple[str, int]] = [
    ("auditor", 1),  # the package itself (its __init__: the version)
    ("auditor.units", 1),
    ("auditor.schema", 1),
    ("auditor.json_stream", 1),  # a streaming JSON encoder: no project import
    ("auditor.atomic", 1),  # output files whole or absent: no project import
    ("auditor.arrow_compact", 1),  # the driver's segment table smaller in memory: no project import
    ("auditor.object_store", 1),  # s3:// / s3a:// from the AWS environment, one line per failure: no project import
    ("auditor.formats", 2),
    ("auditor.formats.specs", 2),
    ("auditor.scan", 3),
    ("auditor.keys", 3),  # key partitioners and sketches (pure), one partition's keys (reads .log files)
    ("auditor.cluster", 4),
    ("auditor.plan", 4),  # the reassignment planner: pure, loads in, moves out (no file read)
    ("auditor.replay", 5),
    ("auditor.capacity", 5),  # the capacity projection: numpy columns and dicts in, plain values out
    ("auditor.manifest", 6),
    ("auditor.manifest_write", 6),  # how collect writes a manifest so no reader trusts half of one
    ("auditor.manifest_remote", 6),  # manifests in object storage: found, checked, read, published marker last
    ("checks", 7),  # checks.framework and the families' rules
    ("auditor.check_runner", 8),  # what both engines' check runners share (replay-check runs one check with it)
    ("auditor.live_config", 8),
    ("auditor.engines", 8),  # base, choose, local/, spark/
    ("auditor.audit", 9),
    ("auditor.nightly", 9),  # finding identity, the comparison, accepted findings, the history stores
    ("reports", 10),
    ("auditor.cli", 11),
    ("auditor.submit_app", 11),
    ("airflow_dags", 12),
]


def module_path(prefix: str) -> str:
    """Where a LAYERS prefix lives, as docs/layers.md names it (a package as its folder)."""
    path = ROOT / Path(*prefix.split("."))
    return f"`{prefix.replace('.', '/')}/`" if path.is_dir() else f"`{prefix.replace('.', '/')}.py`"


def layers_table() -> str:
    """docs/layers.md's table, rendered from LAYERS and LAYER_RULES."""
    rows = ["| # | modules | what the layer holds |", "|---|---|---|"]
    for layer, rule in sorted(LAYER_RULES.items()):
        names = ", ".join(module_path(p) if p != "auditor" else "`auditor/__init__.py`" for p, n in LAYERS if n == layer)
        rows.append(f"| {layer} | {names} | {rule} |")
    return "\n".join(rows) + "\n"


TABLE_START, TABLE_END = "<!-- layers table: rendered from tests/test_layers.py -->", "<!-- /layers table -->"


def test_layers_doc_is_the_rendered_table():
    text = LAYERS_DOC.read_text()
    found = re.search(re.escape(TABLE_START) + r"\n(.*?)" + re.escape(TABLE_END), text, re.S)
    assert found, f"{LAYERS_DOC.name} lacks the markers {TABLE_START} ... {TABLE_END}"
    assert found.group(1) == layers_table(), \
        "docs/layers.md's table differs from LAYERS: run `python tests/test_layers.py --write`"


def layer_of(module: str) -> int | None:
    """The layer of the longest prefix of ``module`` in LAYERS (``auditor`` alone only for itself)."""
    best = None
    for prefix, layer in LAYERS:
        if module == prefix or (module.startswith(prefix + ".") and prefix != "auditor"):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return best[1] if best else None


def module_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = module_files()


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> list[tuple[str, str, int]]:
    """(imported project module, name imported from it or "", line) for every import statement."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            source = resolve(module, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES or (ROOT / Path(*sub.split("."))).with_suffix(".c").exists():
                    found.append((sub, "", node.lineno))  # a submodule (or the C extension)
                else:
                    found.append((source, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in found if m.split(".")[0] in PACKAGES]


def own_package(module: str) -> str:
    return module if is_package(module) else module.rpartition(".")[0]


@functools.cache
def graph() -> dict[str, list[tuple[str, str, int]]]:
    """Every module's imports, parsed on first use (not at collection: every xdist worker of every
    tier collects this file)."""
    return {m: imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in MODULES if layer_of(m) is None)
    assert not unplaced, f"modules the layer order does not place (add them to docs/layers.md's order and LAYERS): {unplaced}"


def test_imports_go_down_only():
    wrong = []
    for module, found in graph().items():
        mine = layer_of(module)
        for target, _, line in found:
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} (layer {mine}) imports "
                             f"{target} (layer {theirs})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_no_private_name_crosses_a_package():
    wrong = []
    for module, found in graph().items():
        for target, name, line in found:
            def private(part: str) -> bool:
                return part.startswith("_") and not part.startswith("__")

            parent, _, last = target.rpartition(".")
            # a package may use its own private submodules (auditor/formats/_fixed_index.py, _cwalk)
            sibling = parent == own_package(module)
            if not private(name) and not any(private(p) for p in parent.split(".")) and (not private(last) or sibling):
                continue
            wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} imports "
                         f"{target}{'.' + name if name else ''}")
    assert not wrong, "private names imported across modules:\n" + "\n".join(wrong)


@functools.cache
def type_only_lines(module: str) -> frozenset[int]:
    """Lines of the imports under ``if TYPE_CHECKING:`` (annotations only: never run, so no cycle)."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return frozenset(lines)


def test_no_import_cycle():
    edges = {m: sorted({t for t, _, line in found if t in MODULES and t != m and line not in type_only_lines(m)})
             for m, found in graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for t, _, _ in graph().get(m, []):
            if t in MODULES and t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def test_engine_does_not_reach_the_cli_and_replay_check_not_the_engine():
    engine = [m for m in MODULES if m.startswith("auditor.engines")]
    assert engine, "no engine module found"
    for m in engine:
        assert not {t for t in reachable(m) if t.startswith("auditor.cli")}, m
    assert not {t for t in reachable("auditor.cli.replay_check") if t.startswith("auditor.engines")}


def test_replay_check_runs_without_importing_spark():
    code = ("import sys; import auditor.cli.replay_check, auditor.cli; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'great_expectations')); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_walk_sees_function_local_imports():
    # the walk must not be satisfied by module-level imports alone: a known function-local one is found
    local = [(t, line) for t, _, line in graph()["auditor.submit_app"] if t == "auditor.cli"]
    assert local, "auditor.submit_app imports auditor.cli inside main(): the walk missed it"


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_holds_modules(package):
    assert any(m == package or m.startswith(package + ".") for m in MODULES)


# ---------------------------------------------------------------------------------------------
# Size: no module over 500 lines, no function over 60 lines in auditor/, checks/, reports/,
# except where the code says why: a comment "# long module: <why>" in the module (or a GENERATED
# module docstring), "# long function: <why>" inside the function or in the comment block above its def.
# ---------------------------------------------------------------------------------------------

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
SIZED = ("auditor", "checks", "reports")


def _sized_modules():
    return [(m, p) for m, p in MODULES.items() if m.split(".")[0] in SIZED]


def long_modules() -> list[str]:
    out = []
    for module, path in _sized_modules():
        text = path.read_text()
        lines = text.splitlines()
        if len(lines) <= MAX_MODULE_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if doc.startswith("GENERATED") or any(line.strip().startswith("# long module:") for line in lines):
            continue
        out.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    return out


def long_functions() -> list[str]:
    out = []
    for module, path in _sized_modules():
        text = path.read_text()
        lines = text.splitlines()
        if (ast.get_docstring(ast.parse(text)) or "").startswith("GENERATED"):
            continue
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1
            if length <= MAX_FUNCTION_LINES:
                continue
            top = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1  # 0-based index of the def
            while top > 0 and lines[top - 1].strip().startswith("#"):  # the comment block right above it
                top -= 1
            span = lines[top: node.end_lineno]
            if any(line.strip().startswith("# long function:") for line in span):
                continue
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    return out


def test_no_module_over_500_lines_without_a_reason():
    found = long_modules()
    assert not found, (f"modules over {MAX_MODULE_LINES} lines (split them, or say why in a '# long module:' "
                       "comment):\n" + "\n".join(found))


def test_no_function_over_60_lines_without_a_reason():
    found = long_functions()
    assert not found, (f"functions over {MAX_FUNCTION_LINES} lines (split them, or say why in a "
                       "'# long function:' comment):\n" + "\n".join(found))


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    doc = LAYERS_DOC.read_text()
    head, _, rest = doc.partition(TABLE_START + "\n")
    _, _, tail = rest.partition(TABLE_END)
    LAYERS_DOC.write_text(head + TABLE_START + "\n" + layers_table() + TABLE_END + tail)
