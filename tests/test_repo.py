"""The repository promises: README commands, layout, import hygiene, the demo job."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    main_cmd, test_cmd = _readme_commands()[:2]
    # the main job is the PyFlink pipeline (tests/flink/test_main_job.py runs it)
    assert "pip install" in main_cmd and "'.[flink]'" in main_cmd
    assert main_cmd.endswith(".venv/bin/python -m lakelog.jobs.pipeline")
    assert (ROOT / "jobs" / "pipeline.py").is_file()
    assert "pytest" in test_cmd and "pip install" in test_cmd
    ci = (ROOT / ".ci" / "run").read_text()
    assert f'TEST_CMD="{test_cmd}"' in ci
    # CI installs what the test command installs (the flink extra the main job needs included)
    assert ".venv/bin/pip install -q -e '.[test,flink]'" in ci


def test_readme_keeps_the_no_flink_demo_and_documents_clusters() -> None:
    text = (ROOT / "README.md").read_text()
    assert "python -m lakelog.jobs.demo" in text
    for needle in ("lakelog sql -f", "--remote", "flink run -py jobs/sql.py", "start-cluster.sh", "flink-conf/"):
        assert needle in text, needle


def test_layout() -> None:
    for name in ("pyproject.toml", "connector", "operators", "jobs", "tests", "flink-conf", "benchmarks", "README.md"):
        assert (ROOT / name).exists(), name
    for name in ("config.yaml", "workers", "masters", "log4j.properties", "log4j-cli.properties"):
        assert (ROOT / "flink-conf" / name).is_file(), name  # a complete FLINK_CONF_DIR for pyflink/bin
    assert (ROOT / ".ci" / "run").exists()
    assert not (ROOT / "pom.xml").exists()


def test_import_lakelog_is_light_and_never_imports_pyflink() -> None:
    code = (
        "import sys, lakelog, lakelog.connector; lakelog.Catalog; import lakelog.connector.table.table; "
        "bad = [m for m in sys.modules if m.startswith(('pyflink', 'pandas', 'duckdb', 'kafka'))]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_demo_job_runs_without_optional_packages() -> None:
    """The README's main job uses no optional package (pyarrow itself imports pandas when pandas
    is installed, so only duckdb and pyflink can be checked here; a base-only install ran it)."""
    code = (
        "import runpy, sys; runpy.run_module('lakelog.jobs.demo', run_name='__main__'); "
        "print([m for m in ('duckdb', 'pyflink') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "== snapshot history ==" in out and "COMPACT" in out and "-U" in out
    assert out.strip().splitlines()[-1] == "[]"
