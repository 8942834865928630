"""What the Helm chart reads of the mixin (charts/cdcwatch/files/, `cdcwatch/mixin/kubernetes.py`): each shaped text
gives back, for every deployment shape, exactly the text the mixin generates for those stages, from the config the
generator was given; the committed files are current and nothing else is there; and the Grafana file provisioning
provider reads the dashboards' folder. (tests/unit/test_chart_stages.py checks what `helm template` makes of them.)"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from cdcwatch.mixin import INHIBIT_FILE, RULES_FILE, MixinConfig, render_files
from cdcwatch.mixin.generate import _HEADER, DASHBOARD_PROVIDER_FILE, to_yaml
from cdcwatch.mixin.inhibit import inhibit_yaml
from cdcwatch.mixin.kubernetes import (
    CHART_DASHBOARDS_DIR,
    CHART_INHIBIT_FILE,
    CHART_RULES_FILE,
    CHART_STAGES_FILE,
    SHAPES,
    STAGE_SOURCES,
    _render,
    join_shaped,
    shape_config,
    shape_number,
    shaped,
)
from cdcwatch.mixin.rules import rule_groups
from cdcwatch.mixin.stages import STAGES
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
_CONFIG = MixinConfig.model_validate({"thresholds": {"kafka_lag_seconds": 42}, "kubernetes": {"dashboard_folder": "cdc"}})


def committed(relative: str) -> dict[str, object]:
    return dict(json.loads((ROOT / relative).read_text(encoding="utf-8")))


@pytest.mark.parametrize("stages", [frozenset(STAGES), frozenset(), frozenset({"debezium", "kafka"}),
                                    frozenset(STAGES) - {"spark"}, frozenset({"connect_rest", "mysql", "reconcile"})],
                         ids=["everything", "nothing", "debezium-kafka", "no-spark", "connect-mysql-reconcile"])
def test_the_committed_shaped_texts_give_back_each_shapes_files(stages: frozenset[str]) -> None:
    config = shape_config(MixinConfig(), shape_number(stages))
    assert config.stages.enabled() == stages
    rules = join_shaped(committed(CHART_RULES_FILE), shape_number(stages))
    assert rules == to_yaml(rule_groups(config), header=False)
    assert join_shaped(committed(CHART_INHIBIT_FILE), shape_number(stages)) == inhibit_yaml(config, _HEADER)
    if stages == frozenset(STAGES):  # the repository's own files are every stage's
        assert _HEADER + rules == (ROOT / RULES_FILE).read_text(encoding="utf-8")
        assert join_shaped(committed(CHART_INHIBIT_FILE), SHAPES - 1) == (ROOT / INHIBIT_FILE).read_text(encoding="utf-8")
        for path in (ROOT / CHART_DASHBOARDS_DIR).glob("*.json"):
            board = join_shaped(committed(str(path.relative_to(ROOT))), SHAPES - 1)
            assert board == (ROOT / "dashboards" / path.name).read_text(encoding="utf-8"), path.name


def test_a_shaped_text_keeps_each_piece_once_and_gives_back_every_shape() -> None:
    texts = {0: "a\nb\n", 1: "a\nc\nb\n", 3: "c\nb\nd\n", 200: "b\n"}
    bundle = shaped(texts, re.compile(r"^(?=\S)", re.MULTILINE))
    assert sorted(bundle["texts"]) == ["a\n", "b\n", "c\n", "d\n"]
    assert {shape: join_shaped(bundle, shape) for shape in range(SHAPES) if join_shaped(bundle, shape)} == texts


@pytest.mark.dashboards  # renders the dashboards too
def test_the_chart_rules_are_rendered_from_the_given_config_and_promtool_accepts_them(tmp_path: Path) -> None:
    """The generator's own config reaches the chart (a threshold of 42), whatever the stages: each shape's rule file
    is the mixin's for those stages (two shapes rendered here; the generator renders every one)."""
    shapes = (SHAPES - 1, shape_number(frozenset({"kafka", "spark"})))
    bundle = json.loads(_render(_CONFIG, shapes)[CHART_RULES_FILE])
    for shape in shapes:
        rules = join_shaped(bundle, shape)
        assert rules == to_yaml(rule_groups(shape_config(_CONFIG, shape)), header=False) and "> 42" in rules
    (tmp_path / "rules.yml").write_text(join_shaped(bundle, SHAPES - 1))
    checked = subprocess.run([tool("promtool"), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_chart_holds_no_file_the_generator_does_not_write(mixin_files: Mapping[str, str]) -> None:
    """A dashboard the mixin dropped must leave the chart too (test_mixin checks the ones it writes)."""
    generated = {name for name in mixin_files if name.startswith("charts/cdcwatch/files/")}
    committed_files = {str(path.relative_to(ROOT)) for path in (ROOT / "charts" / "cdcwatch" / "files").rglob("*")
                       if path.is_file()}
    assert committed_files == generated


def test_the_stages_file_says_how_the_chart_infers_each_stage() -> None:
    from cdcwatch.collectors import COLLECTORS
    from cdcwatch.validation import config_model

    spec = committed(CHART_STAGES_FILE)
    assert spec["stages"] == list(STAGES) and list(STAGE_SOURCES) == list(STAGES)
    assert spec["sections"] == [entry.section for entry in COLLECTORS]
    sections = config_model().model_fields
    for stage, source in STAGE_SOURCES.items():
        if "section" in source:  # an exporter section (the chart's `config`): its entries, or those with `key`
            assert source["section"] in sections and source["section"] in spec["sections"], stage
            assert "key" not in source or source["key"] in sections[source["section"]].annotation.__args__[0].model_fields
        else:  # a chart value
            values = yaml.safe_load((ROOT / "charts" / "cdcwatch" / "values.yaml").read_text())
            for key in source["value"].split("."):
                values = values[key]
            assert isinstance(values, bool), stage


@pytest.mark.dashboards  # renders the dashboards too
def test_the_provisioning_provider_reads_the_dashboards_folder() -> None:
    (provider,) = yaml.safe_load(render_files(_CONFIG)[DASHBOARD_PROVIDER_FILE])["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == _CONFIG.kubernetes.dashboards_path
    assert provider["folder"] == "cdc"
