"""What the README and the documentation's pages show works as shown: the configurations load with cdcwatch's own
loader, the Prometheus configurations pass promtool, the commands and Python names exist, the links resolve, the
README stays a summary, and the documented project layout is the tree's. (`mkdocs build --strict` in
scripts/lint.sh checks the site's own links, anchors and navigation.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from cdcwatch import __version__
from cdcwatch.cli import _parser
from cdcwatch.mixin import MixinConfig, load_mixin_config
from cdcwatch.mixin.alerts import ALERTS
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.reference import metrics_reference
from cdcwatch.validation import parse_config
from tests.tools import ROOT, tool

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
README_MAX_LINES = 200
PENDING_PAGES: set[str] = set()
"""Pages the README links to that are being written beside it (the container image, the Helm chart)."""
COLLECTOR_SECTIONS = ("listen", "debezium", "connect", "kafka", "postgres", "mysql")
_ENV_REF = re.compile(r"\$\{(\w+)(?::-[^}]*)?\}")


def blocks(page: Path, language: str) -> list[str]:
    """The fenced code blocks of `language` in a Markdown page."""
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def exporter_configs(page: Path) -> list[str]:
    """The YAML blocks that are (part of) an exporter configuration: they start with one of its sections."""
    return [b for b in blocks(page, "yaml") if re.match(rf"({'|'.join(COLLECTOR_SECTIONS)}):", b)]


def test_readme_is_a_summary() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, \
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move the details into a page under docs/"


def test_readme_shows_one_picture_that_exists() -> None:
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README.read_text(encoding="utf-8"))
    assert len(pictures) == 1, pictures
    assert (ROOT / pictures[0]).is_file() and pictures[0].endswith(".png"), pictures[0]


def test_readme_configuration_is_the_typical_deployment_and_loads() -> None:
    """One Connect worker with Debezium (its JMX and REST), one Kafka cluster, one PostgreSQL source."""
    configs = exporter_configs(README)
    assert len(configs) == 1, "the README shows one exporter configuration"
    text = configs[0]
    config = parse_config(text, "README.md", env={name: "secret" for name in _ENV_REF.findall(text)})
    assert (len(config.debezium), len(config.connect), len(config.kafka), len(config.postgres)) == (1, 1, 1, 1)


@pytest.mark.parametrize("page", [p for p in PAGES if exporter_configs(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_configuration_shown_loads(page: Path) -> None:
    for text in exporter_configs(page):
        parse_config(text, str(page.relative_to(ROOT)), env={name: "secret" for name in _ENV_REF.findall(text)})


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.startswith("# mixin.yml") for b in blocks(p, "yaml"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_mixin_configuration_shown_loads(page: Path, tmp_path: Path) -> None:
    for text in (b for b in blocks(page, "yaml") if b.startswith("# mixin.yml")):
        (tmp_path / "mixin.yml").write_text(text)
        load_mixin_config(tmp_path / "mixin.yml")


def test_readme_scrapes_the_jobs_the_rules_select(tmp_path: Path) -> None:
    """Both jobs, named as the generated rules select them, in a configuration promtool accepts (with the rules
    file it names, as `cdcwatch alerts` writes it)."""
    [prometheus] = [b for b in blocks(README, "yaml") if "scrape_configs:" in b]
    jobs = re.findall(r"job_name: (\S+)", prometheus)
    selectors = MixinConfig().selectors
    assert sorted(f'job="{job}"' for job in jobs) == sorted([selectors.cdcwatch, selectors.spark])
    (tmp_path / "cdcwatch.rules.yml").write_text(rules_yaml(MixinConfig()))
    (tmp_path / "prometheus.yml").write_text(prometheus)
    checked = subprocess.run([tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("page", [p for p in PAGES if any("scrape_configs:" in b for b in blocks(p, "yaml"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_scrape_configuration_shown_passes_promtool(page: Path, tmp_path: Path) -> None:
    (tmp_path / "cdcwatch.rules.yml").write_text(rules_yaml(MixinConfig()))
    for text in (b for b in blocks(page, "yaml") if "scrape_configs:" in b):
        (tmp_path / "prometheus.yml").write_text(text)
        checked = subprocess.run([tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def _commands(page: Path) -> list[list[str]]:
    """Each command of the page's shell blocks, as words (comments, continuations and `&&` chains split)."""
    commands = []
    for block in blocks(page, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            for command in line.split("&&"):
                words = shlex.split(command, comments=True)
                if words:
                    commands.append(words)
    return commands


def test_readme_commands_exist() -> None:
    """Scripts are executable files of the repository, `cdcwatch` command lines parse with its own parser,
    other programs are installed or those of a virtual environment the block makes; the wheel named is this
    version's, with extras the package declares."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    venvs: list[str] = []  # what `python3 -m venv DIR` made: DIR/bin/ holds its pip and, once installed, cdcwatch
    for words in _commands(README):
        program = words[0]
        if words[1:3] == ["-m", "venv"]:
            venvs.append(words[3])
        in_venv = next((v for v in venvs if program.startswith(f"{v}/bin/")), None)
        if in_venv is not None:
            program = program.removeprefix(f"{in_venv}/bin/")
            assert program in ("pip", "cdcwatch", "python"), f"{words[0]}: no such program in a virtual environment"
        if program.startswith("scripts/"):
            assert (ROOT / program).is_file() and (ROOT / program).stat().st_mode & 0o111, program
        elif program == "cdcwatch" and words[1:] == ["--version"]:
            assert "--version" in _parser().format_help()
        elif program == "cdcwatch":
            _parser().parse_args(words[1:])
        elif in_venv is None:
            assert shutil.which(program), f"{program} is not installed"
        for local in (w for w in words if w.startswith(".[")):  # pip install '.[extra]' from the checkout
            assert local.removeprefix(".[").rstrip("]") in extras, local
        for wheel in (w for w in words if ".whl" in w):
            name, _, extra = wheel.partition("[")
            assert Path(name).name == f"cdcwatch-{__version__}-py3-none-any.whl", wheel
            assert extra.rstrip("]") in extras, wheel
    named = re.search(r"^Extras: (.*?)\.", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert named, "the README names the extras"
    assert set(re.findall(r"`(\w+)` \(", named.group(1))) <= set(extras)


@pytest.mark.spark
@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "python")], ids=lambda p: str(p.relative_to(ROOT)))
def test_python_shown_parses_and_names_what_exists(page: Path) -> None:
    """Every Python block parses; what it imports exists, and its calls of imported functions, classes and their
    methods pass only parameters those take."""
    for source in blocks(page, "python"):
        tree = ast.parse(source)
        imported = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{page.name}: {node.module} has no {alias.name}"
                    imported[alias.asname or alias.name] = getattr(module, alias.name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            if isinstance(function, ast.Name) and function.id in imported:
                target = imported[function.id]
            elif isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) \
                    and function.value.id in imported:
                target = getattr(imported[function.value.id], function.attr, None)
                assert target is not None, f"{page.name}: {function.value.id} has no {function.attr}"
            else:
                continue
            parameters = inspect.signature(target).parameters
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
                continue
            for keyword in node.keywords:
                assert keyword.arg in parameters, f"{page.name}: {ast.unparse(function)} takes no {keyword.arg}"


def test_every_metric_named_in_the_docs_exists() -> None:
    """A metric a page names (not a recording rule: those have colons, nor a `%(name)s` placeholder of the mixin) is
    one cdcwatch exports."""
    exported = set(re.findall(r"`(cdcwatch_\w+)`", metrics_reference()))
    not_metrics = {"cdcwatch_apply"}  # the reference apply job's target schema
    for page in (p for p in PAGES if p.name not in ("metrics.md", "configuration.md")):
        for name in re.findall(r"(?<![:\w])(?<!%\()(cdcwatch_[a-z_]*[a-z])(?![:\w])", page.read_text(encoding="utf-8")):
            if name not in not_metrics:
                assert re.sub(r"_(bucket|sum|count)$", "", name) in exported or name in exported, \
                    f"{page.relative_to(ROOT)} names {name}, which cdcwatch does not export"


def test_every_alert_named_in_the_docs_exists() -> None:
    alerts = {alert.name for alert in ALERTS}
    for page in PAGES:
        for name in set(re.findall(r"\b(Cdc[A-Z]\w+)\b", page.read_text(encoding="utf-8"))) - {"CdcMetricsListener"}:
            assert name in alerts, f"{page.relative_to(ROOT)} names the alert {name}, which the rules do not have"


def test_readme_links_resolve() -> None:
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8")):
        if "://" in link:
            continue
        assert (ROOT / link).exists() or link in PENDING_PAGES, f"README.md links to {link}, which does not exist"


def test_dashboards_page_lists_every_dashboard() -> None:
    rows = re.findall(r"^\| ([^|]+?) \| `([\w.-]+\.json)` \|", (DOCS / "dashboards.md").read_text(encoding="utf-8"), flags=re.M)
    committed = {path.name: json.loads(path.read_text(encoding="utf-8"))["title"] for path in (ROOT / "dashboards").glob("*.json")}
    assert {name: title for title, name in rows} == committed


def _documented_layout() -> str:
    text = (DOCS / "development.md").read_text(encoding="utf-8")
    return text[text.index("## Project layout"):]


def test_documented_layout_matches_the_tree() -> None:
    """The top-level folders (one item each) and every subpackage of cdcwatch/ (named by its path under it)."""
    layout = _documented_layout()
    documented = {name for names in re.findall(r"^- (.*?):", layout, flags=re.M)
                  for name in re.findall(r"`([\w.]+)/`", names)}
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {path.split("/")[0] for path in tracked if "/" in path and not path.startswith(".")}
    assert documented == folders

    package_item = re.search(r"^- `cdcwatch/`:.*?(?=^- )", layout, flags=re.S | re.M)
    assert package_item, "the layout has an item for cdcwatch/"
    documented_packages = set(re.findall(r"`([\w/]+)/`", package_item.group(0))) - {"cdcwatch"}
    packages = {str(init.parent.relative_to(ROOT / "cdcwatch")) for init in (ROOT / "cdcwatch").rglob("__init__.py")}
    assert documented_packages == packages - {"."}


def test_documented_layout_names_every_module_of_spark_listeners() -> None:
    item = re.search(r"^- `spark_listeners/`.*?(?=^- )", _documented_layout(), flags=re.S | re.M)
    assert item, "the layout has an item for spark_listeners/"
    documented = set(re.findall(r"`(\w+\.py)`", item.group(0)))
    assert documented == {path.name for path in (ROOT / "spark_listeners").glob("*.py")} - {"__init__.py"}
