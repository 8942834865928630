"""Dependencies point one way: `spark_listeners` (the listener, the apply job) imports `cdcwatch`, never the reverse.
No module of the `cdcwatch` package imports pyspark or `spark_listeners` (read from the source, so an import inside
a function counts too), and the exporter's commands (help, docs, check, serve, alerts, dashboards, mixin) run with
both imports blocked in a fresh interpreter, so a stray import fails with ModuleNotFoundError."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools import ROOT

_BLOCKED = ("pyspark", "spark_listeners")

_RUN = """
import contextlib, io, json, sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` now raises ModuleNotFoundError
import cdcwatch.cli
argv = json.loads(sys.argv[1])
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        code = cdcwatch.cli._run(argv)
except SystemExit as exit:  # argparse: --help, --version
    code = exit.code
for module in json.loads(sys.argv[2]):
    __import__(module)
loaded = sorted(m for m in sys.modules if m.startswith(("spark_listeners.commit", "pyspark", "spark_listeners"))
                and sys.modules[m] is not None)
print(json.dumps({{"code": code, "out": out.getvalue(), "loaded": loaded}}))
"""

# what `serve` runs, imported after the command
_SERVE_MODULES = ["cdcwatch.exporter", "cdcwatch.server", "cdcwatch.web", "cdcwatch.reload", "cdcwatch.check"]


def _without_spark(argv: list[str], imports: list[str] | None = None,
                   blocked: tuple[str, ...] = _BLOCKED) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _RUN.format(blocked=blocked), json.dumps(argv),
                           json.dumps(imports or [])], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    assert result["loaded"] == [], result["loaded"]
    return result | {"err": done.stderr}


def test_help_runs_without_pyspark() -> None:
    result = _without_spark(["--help"])
    assert result["code"] == 0 and "cdcwatch docs metrics|config|mixin" in str(result["out"])


@pytest.mark.parametrize("what", ["metrics", "config"])
def test_docs_run_without_pyspark(what: str) -> None:
    result = _without_spark(["docs", what])
    assert result["code"] == 0
    if what == "metrics":
        assert "cdcwatch_spark_freshness_seconds" in str(result["out"])


def test_check_of_a_bad_config_runs_without_pyspark() -> None:
    result = _without_spark(["check", "--config", "tests/conffiles/invalid-unknown-key.yaml"])
    assert result["code"] == 2


def test_alerts_and_serve_modules_import_without_pyspark() -> None:
    result = _without_spark(["alerts"], _SERVE_MODULES)
    assert result["code"] == 0 and "groups:" in str(result["out"])


def test_alerts_need_no_dashboards_extra_and_mixin_generate_names_it(tmp_path: Path) -> None:
    """grafana-foundation-sdk is the dashboards extra: the rules are generated without it; what builds dashboards
    says which extra to install, and writes nothing."""
    without_sdk = (*_BLOCKED, "grafana_foundation_sdk")
    assert _without_spark(["alerts"], blocked=without_sdk)["code"] == 0
    result = _without_spark(["mixin", "generate", "--out", str(tmp_path)], blocked=without_sdk)
    assert result["code"] == 2 and "pip install 'cdcwatch[dashboards]'" in str(result["err"]), result
    assert not any(tmp_path.iterdir())


@pytest.mark.dashboards  # renders the dashboards too
def test_mixin_generate_runs_without_pyspark(tmp_path: Path) -> None:
    result = _without_spark(["mixin", "generate", "--out", str(tmp_path)])
    assert result["code"] == 0 and (tmp_path / "alerts").is_dir()


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function (relative imports are within cdcwatch)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}


def test_the_exporter_package_imports_nothing_of_spark() -> None:
    stray = {str(path.relative_to(ROOT)): sorted(name for name in _imported_modules(path) if name.split(".")[0] in _BLOCKED)
             for path in sorted((ROOT / "cdcwatch").rglob("*.py"))}
    assert {path: names for path, names in stray.items() if names} == {}


def test_the_listeners_pure_python_modules_import_without_pyspark() -> None:
    """The listener's metrics and stages are tested (and the metric specs checked) where the spark extra is absent."""
    code = "import sys\nsys.modules['pyspark'] = None\nimport spark_listeners.metrics, spark_listeners.observation, spark_listeners.latency"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr


_KAFKA_ONLY = """
import sys
from pathlib import Path
import cdcwatch.cli, cdcwatch.server, cdcwatch.reload
from cdcwatch.validation import load_config
from cdcwatch.exporter import Exporter
Path(sys.argv[1]).write_text("kafka:\\n  - {name: main, bootstrap_servers: '127.0.0.1:9'}\\n")
exporter = Exporter.from_config(load_config(sys.argv[1]))
print(" ".join(sorted(m for m in ("psycopg", "pymysql", "jpype", "grafana_foundation_sdk", "matplotlib", "pyspark")
                      if m in sys.modules)))
exporter.close()
"""


def test_serving_kafka_alone_loads_no_library_of_other_targets(tmp_path: Path) -> None:
    """Memory is the libraries loaded: libpq (psycopg) alone is about 20 MiB, the JVM bridge, the Grafana SDK and
    matplotlib more. An exporter of Kafka targets loads none of those (each is imported where it is first used)."""
    done = subprocess.run([sys.executable, "-c", _KAFKA_ONLY, str(tmp_path / "kafka.yml")], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
