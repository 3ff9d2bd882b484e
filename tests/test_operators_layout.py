"""operators/ keeps its shape: Flink modules import pyflink at the top, every other module never
imports it (so its logic is testable without a JVM); ``import lakelog.operators`` stays light.
(That operators/ never imports jobs/ is tests/test_layers.py's.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

OPERATORS = Path(__file__).resolve().parent.parent / "operators"

# the modules that define PyFlink functions or build graphs (see lakelog.operators' docstring)
FLINK_MODULES = {
    "channel",
    "compact",
    "flink_env",
    "flink_types",
    "jvm",
    "lookup",
    "sink",
    "set_functions",
    "source",
    "sql.dml",
    "sql.mirror",
    "sql.reads",
    "sql.runner",
    "ticker",
}


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(OPERATORS.rglob("*.py")):
        name = ".".join(path.relative_to(OPERATORS).with_suffix("").parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def _imports(node: ast.AST) -> list[str]:
    names = []
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            names += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            names.append(n.module)
    return names


def _top_level_imports(tree: ast.Module) -> list[str]:
    return [
        name
        for stmt in tree.body
        if isinstance(stmt, (ast.Import, ast.ImportFrom))
        for name in _imports(stmt)
    ]


def test_flink_modules_import_pyflink_at_the_top_and_no_other_module_imports_it() -> None:
    modules = _modules()
    assert set(modules) >= FLINK_MODULES, FLINK_MODULES - set(modules)
    for name, tree in modules.items():
        pyflink = [m for m in _imports(tree) if m == "pyflink" or m.startswith("pyflink.")]
        if name in FLINK_MODULES:
            assert any(m.startswith("pyflink") for m in _top_level_imports(tree)), name
        else:
            assert not pyflink, f"operators/{name} imports {pyflink}: Flink-free modules must not"


def test_importing_the_flink_free_modules_loads_no_pyflink() -> None:
    free = sorted(n for n in _modules() if n not in FLINK_MODULES and n.split(".")[-1] != "__init__")
    code = (
        "import sys, importlib, lakelog.operators as o; "
        + "".join(f"importlib.import_module('lakelog.operators.{n}'); " for n in free)
        + "o.LookupTable; print([m for m in sys.modules if m.startswith('pyflink')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_package_exports_its_entry_points_lazily() -> None:
    import lakelog.operators as ops

    assert set(ops.__all__) >= {
        "sink_to_lakelog",
        "sink_table_to_lakelog",
        "read_lakelog",
        "read_lakelog_table",
        "lookup_join",
        "register_lookup_function",
        "LookupTable",
    }
    assert "future" not in (ops.__doc__ or "").lower()
