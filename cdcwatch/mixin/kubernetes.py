"""What the Helm chart (charts/cdcwatch) reads of the mixin, written into the chart's `files/` (`.Files.Get` can read
nothing outside the chart), and the file provisioning provider for a Grafana that reads dashboards from disk.

A chart cannot run the generator, and its values choose the deployment's `stages` (`MixinConfig.stages`) at install
time; so the chart carries the rule file, the inhibitions and each dashboard of every deployment shape (each stage on
or off: `SHAPES`, two to the power of the stages), each as one *shaped text*: the texts cut into pieces (a rule, a
panel's part, an inhibition), each piece once, in an order every shape's text follows, each with the set of shapes it
belongs to. The chart's `cdcwatch.shaped` helper joins the pieces of the shape its values select: exactly the text
`cdcwatch mixin generate` writes for those stages (the rest of the mixin config, thresholds and selectors, as given to the generator).

A shaped text is JSON: `masks` (each a set of shapes, `SHAPES / 4` hexadecimal digits: digit k, bit j is shape 4k+j), `texts`
(the distinct pieces) and `chunks` ([mask, text] in order). Shape n has stage i (`STAGES` order) on when bit i of n
is set; `stages.json` says so to the chart, with how the chart infers each stage from its values (`STAGE_SOURCES`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cdcwatch.collectors import COLLECTORS, Registry
from cdcwatch.mixin.config import MixinConfig, Stages
from cdcwatch.mixin.stages import SPARK, STAGES
from cdcwatch.mixin.yaml_text import HEADER, to_yaml

__all__ = ["CHART_DASHBOARDS_DIR", "CHART_DIR", "CHART_INHIBIT_FILE", "CHART_MIXIN_DIR", "CHART_RULES_FILE",
           "CHART_SCHEMA_FILE", "CHART_STAGES_FILE", "SHAPES", "STAGE_SOURCES", "chart_files", "dashboard_provider",
           "join_shaped", "shape_config", "shape_number", "shaped"]

CHART_DIR = "charts/cdcwatch"
CHART_MIXIN_DIR = f"{CHART_DIR}/files/mixin"
CHART_RULES_FILE = f"{CHART_MIXIN_DIR}/rules.json"
"""The rule groups of the chart's PrometheusRule, for every shape: alerts/cdcwatch.rules.yml's text (header aside)."""
CHART_INHIBIT_FILE = f"{CHART_MIXIN_DIR}/inhibit.json"
"""The Alertmanager inhibitions for every shape: alertmanager/cdcwatch-inhibit.yml's text."""
CHART_DASHBOARDS_DIR = f"{CHART_MIXIN_DIR}/dashboards"
"""One shaped text per dashboard (dashboards/<name>.json of every shape; empty where the shape has no such board)."""
CHART_STAGES_FILE = f"{CHART_MIXIN_DIR}/stages.json"
"""The stages in shape-bit order, how the chart infers each one (`STAGE_SOURCES`), and the configuration's sections of
targets (the chart's templates check that one has an entry, and each entry's name is unique in its section)."""
CHART_SCHEMA_FILE = f"{CHART_DIR}/values.schema.json"
"""The chart's values schema; its `config` and `stages` are generated (cdcwatch.mixin.chart_schema)."""

SHAPES = 1 << len(STAGES)

def stage_sources(registry: Registry = COLLECTORS) -> dict[str, dict[str, str]]:
    """Each stage's source for the chart (`STAGE_SOURCES`), from the registry."""
    sources = {stage.name: {"section": entry.section, **({"key": stage.key} if stage.key else {})}
               for entry in registry for stage in entry.pipeline_stages()}
    return sources | {SPARK.name: {"value": "podMonitor.enabled"}}


STAGE_SOURCES = stage_sources()
"""How the chart decides a stage its values leave at `auto`: on when the exporter's `config` has an entry in `section`
(one with `key` set, when given), or when the chart value `value` is true (the Spark listener is not scraped by the
exporter: its PodMonitor says whether the drivers are)."""


def shape_number(stages: frozenset[str]) -> int:
    return sum(1 << i for i, stage in enumerate(STAGES) if stage in stages)


def shape_config(config: MixinConfig, shape: int) -> MixinConfig:
    """`config` with the stages of shape number `shape`."""
    return config.model_copy(update={"stages": Stages(**{stage: bool(shape >> i & 1) for i, stage in enumerate(STAGES)})})


def _pieces(text: str, cut: re.Pattern[str]) -> list[str]:
    """`text` cut where `cut` matches (an empty match: before it)."""
    return [piece for piece in cut.split(text) if piece]


def shaped(texts: Mapping[int, str], cut: re.Pattern[str]) -> dict[str, Any]:
    """The shaped text of `texts` (shape number → text; a shape left out has no text)."""
    merged: list[tuple[str, set[int]]] = []
    matched: dict[str, tuple[tuple[str, int, int, int, int], ...]] = {}
    """Text → its opcodes against `merged`'s pieces as they are now (many shapes share a text; the pieces change only
    when a text brings new ones)."""
    for shape, text in texts.items():
        pieces = _pieces(text, cut)
        if text not in matched:
            matcher = difflib.SequenceMatcher(None, [piece for piece, _ in merged], pieces, autojunk=False)
            matched[text] = tuple(matcher.get_opcodes())
        opcodes = matched[text]
        grown: list[tuple[str, set[int]]] = []
        for op, i1, i2, j1, j2 in opcodes:
            if op == "equal":
                for piece, shapes in merged[i1:i2]:
                    shapes.add(shape)
                    grown.append((piece, shapes))
            else:
                grown += merged[i1:i2]
                grown += [(piece, {shape}) for piece in pieces[j1:j2]]
        if any(op != "equal" and j2 > j1 for op, _, _, j1, j2 in opcodes):
            matched.clear()
        merged = grown
    masks: dict[str, int] = {}
    pieces_: dict[str, int] = {}
    chunks = [[masks.setdefault(_mask(shapes), len(masks)), pieces_.setdefault(piece, len(pieces_))]
              for piece, shapes in merged]
    bundle = {"masks": list(masks), "texts": list(pieces_), "chunks": chunks}
    for shape in range(SHAPES):  # what the chart's helper does, for every shape
        if join_shaped(bundle, shape) != texts.get(shape, ""):
            raise RuntimeError(f"the shaped text does not give back shape {shape}")
    return bundle


def _mask(shapes: set[int]) -> str:
    return "".join(format(sum(1 << j for j in range(4) if 4 * k + j in shapes), "x") for k in range(SHAPES // 4))


def join_shaped(bundle: Mapping[str, Any], shape: int) -> str:
    """The text of shape number `shape` (the chart's `cdcwatch.shaped` helper does the same)."""
    digit, bit = divmod(shape, 4)
    on = [int(mask[digit], 16) >> bit & 1 for mask in bundle["masks"]]
    return "".join(bundle["texts"][text] for mask, text in bundle["chunks"] if on[mask])


def _dump(bundle: Mapping[str, Any]) -> str:
    """A shaped text as JSON, one mask, text or chunk a line (so a change shows as the lines it changes)."""
    def lines(values: list[Any]) -> str:
        return ",\n".join(json.dumps(value, ensure_ascii=False) for value in values)

    return (f'{{"masks": [\n{lines(bundle["masks"])}\n],\n"texts": [\n{lines(bundle["texts"])}\n],\n'
            f'"chunks": [\n{lines(bundle["chunks"])}\n]}}\n')


_RULE = re.compile(r"^(?=- |  - )", re.MULTILINE)
"""Before a rule group (`- name:`) or a rule (`  - record:`, `  - alert:`) of a rule file."""
_INHIBITION = re.compile(r"^(?=\S)|(?=\|)", re.MULTILINE)
"""Before an inhibition, its comment and each alert name after the first of a matcher (`|Name`)."""
_BOARD = re.compile(r"^(?= {0,6}\S)", re.MULTILINE)
"""Before each line of a dashboard's JSON at most three levels deep (a panel's members: its gridPos, targets, ...)."""


_RENDERED: dict[str, dict[str, str]] = {}
"""The chart's shaped texts by the mixin config (as JSON) they were rendered from: rendering every shape takes a while."""


def _rendered(config: MixinConfig) -> dict[str, str]:
    key = config.model_dump_json(exclude={"stages"})
    if key not in _RENDERED:
        while len(_RENDERED) >= 2:
            del _RENDERED[next(iter(_RENDERED))]
        _RENDERED[key] = _render(config)
    return _RENDERED[key]


def _render(config: MixinConfig, shapes: Iterable[int] = range(SHAPES)) -> dict[str, str]:
    """The chart's shaped texts of `config`, of `shapes` (the others empty: every shape but in tests)."""
    from cdcwatch.mixin.dashboards import DASHBOARDS, dashboard_files
    from cdcwatch.mixin.inhibit import inhibit_yaml
    from cdcwatch.mixin.rules import rule_groups

    rules: dict[int, str] = {}
    inhibitions: dict[int, str] = {}
    boards: dict[str, dict[int, str]] = {f"{spec.uid}.json": {} for spec in DASHBOARDS}
    for shape in shapes:
        shaped_config = shape_config(config, shape)
        rules[shape] = to_yaml(rule_groups(shaped_config), header=False)
        inhibitions[shape] = inhibit_yaml(shaped_config, HEADER)
        for name, text in dashboard_files(shaped_config).items():
            boards[name][shape] = text
    files = {CHART_RULES_FILE: _dump(shaped(rules, _RULE)),
             CHART_INHIBIT_FILE: _dump(shaped(inhibitions, _INHIBITION)),
             CHART_STAGES_FILE: _stages_file()}
    files |= {f"{CHART_DASHBOARDS_DIR}/{name}": _dump(shaped(texts, _BOARD)) for name, texts in boards.items()}
    return files


def _stages_file() -> str:
    return json.dumps({"stages": list(STAGES), "sources": STAGE_SOURCES,
                       "sections": [entry.section for entry in COLLECTORS]}, indent=2) + "\n"


def _chart_file_names() -> list[str]:
    from cdcwatch.mixin.dashboards import DASHBOARDS

    return [CHART_RULES_FILE, CHART_INHIBIT_FILE, CHART_STAGES_FILE,
            *(f"{CHART_DASHBOARDS_DIR}/{spec.uid}.json" for spec in DASHBOARDS)]


class _Files(Mapping[str, str]):
    """The generator's files: `eager` as given, the chart's shaped texts (every shape rendered, which takes a while)
    only once one of them is read."""

    def __init__(self, eager: dict[str, str], config: MixinConfig) -> None:
        self._eager = eager
        self._config = config
        self._lazy = _chart_file_names()
        schema = _values_schema()
        if schema is not None:
            self._eager = {**eager, CHART_SCHEMA_FILE: schema}

    def __getitem__(self, name: str) -> str:
        if name in self._eager:
            return self._eager[name]
        if name in self._lazy:
            return _rendered(self._config)[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._eager
        yield from self._lazy

    def __len__(self) -> int:
        return len(self._eager) + len(self._lazy)


def _values_schema() -> str | None:
    """The chart's values.schema.json with its generated parts, where this is a checkout with the chart (an installed
    cdcwatch has no chart to write into)."""
    from cdcwatch.mixin.chart_schema import values_schema

    committed = Path(__file__).resolve().parents[2] / CHART_SCHEMA_FILE
    if not committed.is_file():
        return None
    return json.dumps(values_schema(json.loads(committed.read_text(encoding="utf-8"))), indent=2, ensure_ascii=False) + "\n"


def chart_files(config: MixinConfig, files: dict[str, str]) -> Mapping[str, str]:
    """The generator's `files` and the chart's: its shaped texts rendered from `config` (whatever its `stages`: the
    chart's values choose them) and its values schema."""
    return _Files(files, config)


def dashboard_provider(config: MixinConfig) -> dict[str, Any]:
    """Grafana's provisioning/dashboards/*.yaml for the dashboards copied to `kubernetes.dashboards_path`."""
    k8s = config.kubernetes
    return {"apiVersion": 1, "providers": [
        {"name": "cdcwatch", "folder": k8s.dashboard_folder, "type": "file", "disableDeletion": True,
         "allowUiUpdates": False, "updateIntervalSeconds": 60, "options": {"path": k8s.dashboards_path}}]}

