"""The package's architecture, enforced: layers import downwards only, and no module-level cycles.

Layers, lowest first: ``lakelog.connector.errors``; the on-disk format (``connector.format``); the
LSM merge tree (``connector.lsm``); the Kafka log (``connector.log``); the metastores
(``connector.catalog``); the table layer (``connector.table``); the PyFlink operators
(``lakelog.operators``); runnable jobs (``lakelog.jobs``). An import is allowed when it points to the
same layer or a lower one, wherever it is written (module level, inside a function, or only for type
checking). Module-level imports between lakelog modules form no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"lakelog.connector": ROOT / "connector", "lakelog.operators": ROOT / "operators",
                "lakelog.jobs": ROOT / "jobs"}
LAYERS = [
    "lakelog.connector.errors",
    "lakelog.connector.format",
    "lakelog.connector.lsm",
    "lakelog.connector.log",
    "lakelog.connector.catalog",
    "lakelog.connector.table",
    "lakelog.operators",
    "lakelog.jobs",
]
# modules that only name others lazily (strings resolved on attribute access)
LAZY_FACADES = {"lakelog", "lakelog.connector"}
NO_ENGINE = ("lakelog.connector.format", "lakelog.connector.lsm")  # never import pyflink or kafka


def _modules() -> Iterator[tuple[str, Path]]:
    for prefix, base in PACKAGE_DIRS.items():
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            if rel.parts[0] == "_root":
                continue
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([prefix, *parts]), path


def layer_of(module: str) -> int | None:
    best = None
    for i, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            best = i
    return best


def _imports(module: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) of every import in the file."""
    tree = ast.parse(path.read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top.add(id(node))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                # ``from pkg import submodule`` imports the submodule
                yield (f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base), node.lineno, (
                    id(node) in top
                )


_ALL = dict(_modules())


def _is_module(name: str) -> bool:
    return name in _ALL


def test_every_module_belongs_to_a_layer() -> None:
    orphans = [m for m in _ALL if layer_of(m) is None and m not in LAZY_FACADES]
    assert orphans == [], f"modules outside every layer: {orphans}; add them to a layer in {__file__}"


def test_lower_layers_never_import_higher_ones() -> None:
    bad = []
    for module, path in _ALL.items():
        own = layer_of(module)
        if own is None:
            continue
        for target, line, _top in _imports(module, path):
            if not target.startswith("lakelog"):
                continue
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({LAYERS[own]}) imports {target} ({LAYERS[theirs]})")
    assert bad == [], "layer violations:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", NO_ENGINE)
def test_format_and_lsm_never_import_an_engine(layer: str) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for module, path in _ALL.items()
        if module.startswith(layer)
        for target, line, _top in _imports(module, path)
        if target.split(".")[0] in ("pyflink", "kafka", "confluent_kafka")
    ]
    assert bad == []


def test_no_import_cycles_at_module_level() -> None:
    graph: dict[str, set[str]] = {m: set() for m in _ALL}
    for module, path in _ALL.items():
        for target, _line, top in _imports(module, path):
            if top and target in _ALL and target != module:
                graph[module].add(target)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == [], f"module-level import cycles: {cycles}"


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """The layer check is not vacuous: a format module importing the table layer is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from lakelog.connector.table.table import Table\n")
    found = [t for t, _l, _top in _imports("lakelog.connector.format.bad", bad)]
    assert found == ["lakelog.connector.table.table"]
    assert layer_of(found[0]) == LAYERS.index("lakelog.connector.table") > layer_of("lakelog.connector.format.bad")
