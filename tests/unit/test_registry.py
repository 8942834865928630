"""A new kind of target is its module plus one registry entry: the toy kind below (what docs/development.md's "Adding
a collector" walks through) is registered and nothing else is edited, and the configuration, the references, the
mixin's stages and the chart's schema all have it."""

from __future__ import annotations

import json

import pytest
from pydantic import Field

from cdcwatch.collection import Collection
from cdcwatch.collectors import COLLECTORS, CollectorEntry
from cdcwatch.config import ConfigError, StrictModel
from cdcwatch.exporter import build_collectors
from cdcwatch.families import FamilyBuilder
from cdcwatch.mixin.chart_schema import values_schema
from cdcwatch.mixin.config import stages_model
from cdcwatch.mixin.kubernetes import stage_sources
from cdcwatch.mixin.stages import metric_stage, stage_names
from cdcwatch.reference import config_reference, metrics_reference
from cdcwatch.specs import MetricSpec, metric_specs
from cdcwatch.validation import config_model, parse_config
from tests.tools import ROOT

# --- the toy kind's module ---------------------------------------------------------------------------------------


class QueueServerConfig(StrictModel):
    name: str = Field(description="The server's name: the `target` label.")
    url: str = Field(description="Where its queue depth is read.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels.")
    timeout_seconds: float = Field(5.0, description="Deadline of one collection.")


QUEUE_METRICS = metric_specs(
    MetricSpec("cdcwatch_queue_depth", "gauge", "Messages waiting in the queue.", ("queue",)),
)


class QueueCollector:
    kind = "queue"

    def __init__(self, config: QueueServerConfig) -> None:
        self.target = config.name

    def collect(self) -> Collection:
        families = FamilyBuilder()
        families.add_spec(QUEUE_METRICS["cdcwatch_queue_depth"], 3, queue="orders")
        return Collection(families.families())

    def close(self) -> None:
        pass


# --- its registry entry -------------------------------------------------------------------------------------------

QUEUE = CollectorEntry("queue", QueueServerConfig, "Queue servers whose depth is read.", "queue server",
                       "the queue server", QueueCollector, (QUEUE_METRICS,),
                       lambda: ["### Queue servers", "", "| metric |", "|---|", "| `cdcwatch_queue_depth` |"])
REGISTRY = (*COLLECTORS, QUEUE)

CONFIG = "queue:\n  - name: q1\n    url: http://queue-1:8080\n"


def test_the_configuration_reads_its_section_and_checks_it_against_the_entry() -> None:
    config = parse_config(CONFIG, registry=REGISTRY)
    assert [target.url for target in config.targets("queue")] == ["http://queue-1:8080"]
    with pytest.raises(ConfigError) as twice:
        parse_config(CONFIG + "  - name: q1\n    url: http://queue-2:8080\n", registry=REGISTRY)
    assert "queue server name 'q1' is used twice" in str(twice.value)
    with pytest.raises(ConfigError) as clash:  # its metric's label is reserved for its targets
        parse_config(CONFIG + "    labels: {queue: x}\n", registry=REGISTRY)
    assert "queue[0].labels: label name 'queue' is set by the queue collector" in str(clash.value)
    with pytest.raises(ConfigError) as unknown:  # and without the entry, the section is unknown
        parse_config(CONFIG)
    assert "queue" in str(unknown.value)


def test_the_exporter_builds_its_collector() -> None:
    scheduled = build_collectors(parse_config(CONFIG, registry=REGISTRY), REGISTRY)
    assert [(s.collector.kind, s.collector.target) for s in scheduled] == [("queue", "q1")]
    assert [sample.labels for sample in scheduled[0].collector.collect().families[0].samples] == [{"queue": "orders"}]


def test_the_references_document_its_keys_and_metrics() -> None:
    assert "| `queue[].url` | string | required | Where its queue depth is read. |" in config_reference(REGISTRY)
    assert "| `queue[]` | list of mappings (keys below) | - | Queue servers whose depth is read. |" in config_reference(REGISTRY)
    assert "### Queue servers" in metrics_reference(REGISTRY)
    assert "queue" not in config_model().model_fields


def test_the_mixin_has_its_stage_and_the_stage_of_its_metrics() -> None:
    assert stage_names(REGISTRY)[-2:] == ("queue", "spark")  # after the registry's, before the Spark listener's
    assert metric_stage("cdcwatch_queue_depth", REGISTRY) == "queue"
    assert metric_stage("cdcwatch_queue_depth") is None
    switches = stages_model(REGISTRY)
    assert switches.model_fields["queue"].description == "Queue servers whose depth is read."
    assert "queue" not in switches(queue=False).enabled() and "queue" in switches().enabled()


@pytest.mark.chart  # jsonschema comes with the test extra
def test_the_chart_schema_takes_its_section_and_its_stage() -> None:
    import jsonschema

    base = json.loads((ROOT / "charts/cdcwatch/values.schema.json").read_text())
    schema = values_schema(base, REGISTRY)
    validator = jsonschema.Draft7Validator(schema)
    values = {"config": {"queue": [{"name": "q1", "url": "http://queue-1:8080"}]}, "stages": {"queue": False}}
    assert not list(validator.iter_errors(values))
    wrong = {"config": {"queue": [{"name": "q1", "url": "http://queue-1:8080", "port": 1}]}}
    assert [error.json_path for error in validator.iter_errors(wrong)] == ["$.config.queue[0]"]
    assert stage_sources(REGISTRY)["queue"] == {"section": "queue"}
    assert list(jsonschema.Draft7Validator(values_schema(base)).iter_errors({"stages": {"queue": False}}))
