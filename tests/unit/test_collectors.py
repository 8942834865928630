"""The collector registry (cdcwatch/collectors.py) is what every list of collectors is read from: the configuration's
target sections, the collectors built, the reference, the static labels refused."""

from __future__ import annotations

from typing import get_args, get_origin

import pytest
from pydantic import BaseModel

from cdcwatch.collectors import COLLECTORS
from cdcwatch.config import Config, ConfigError, parse_config
from cdcwatch.exporter import build_collectors
from cdcwatch.reference import metric_types

_ONE_TARGET = {
    "debezium": "  - name: a\n    jmx: {host: h, port: 1}\n",
    "kafka": "  - name: a\n    bootstrap_servers: h:9092\n",
    "connect": "  - name: a\n    url: http://h:8083\n",
    "postgres": "  - name: a\n",
    "mysql": "  - name: a\n    user: u\n",
    "reconcile": ("  - name: a\n    source: {engine: postgres, user: u, table: public.t}\n"
                  "    target: {engine: postgres, user: u, table: public.t}\n"),
}
"""A minimal target of each section (the test fails for a section without one: a new collector adds its own)."""


def _target_sections() -> set[str]:
    """The keys of the configuration that hold a list of named targets."""
    sections = set()
    for key, field in Config.model_fields.items():
        args = get_args(field.annotation)
        if (get_origin(field.annotation) is list and args and isinstance(args[0], type)
                and issubclass(args[0], BaseModel) and "name" in args[0].model_fields):
            sections.add(key)
    return sections


def test_every_target_section_of_the_configuration_is_a_registered_collector() -> None:
    assert {entry.section for entry in COLLECTORS} == _target_sections() == set(_ONE_TARGET)
    assert len({entry.kind for entry in COLLECTORS}) == len(COLLECTORS)


def test_one_target_of_each_section_builds_its_registered_collector() -> None:
    text = "".join(f"{entry.section}:\n{_ONE_TARGET[entry.section]}" for entry in COLLECTORS)
    config = parse_config(text.replace("port: 1}", "port: 1, backend: jmxquery}"))  # no JVM started for it
    built = build_collectors(config)
    try:
        assert [(s.collector.kind, s.collector.target) for s in built] == [(e.kind, "a") for e in COLLECTORS]
    finally:
        for scheduled in built:
            scheduled.collector.close()


def test_the_reference_documents_every_registered_metric() -> None:
    documented = metric_types()
    for entry in COLLECTORS:
        for spec in entry.specs():
            assert documented.get(spec.name) == spec.type, (entry.kind, spec.name)


@pytest.mark.parametrize("section", sorted(_ONE_TARGET))
@pytest.mark.parametrize(("label", "why"), [
    ("source", "a label of cdcwatch_kafka_message_reads_total"),
    ("reason", "a label of cdcwatch_connect_task_restarts_total"),
    ("failure", "a label of cdcwatch_target_failure_info"),
    ("collector", "the kind of target"),
    ("target", "the target's name"),
    ("server", "a label of every debezium series"),
])
def test_a_static_label_cdcwatch_sets_itself_is_refused_naming_it_and_why(section: str, label: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(f"{section}:\n{_ONE_TARGET[section]}    labels: {{{label}: x}}\n")
    [problem] = refused.value.problems
    assert problem.startswith(f"{section}[0].labels: label name {label!r} is set by cdcwatch itself ({why}")
    assert problem.endswith("choose another name")


def test_the_configuration_names_every_registered_section_when_there_is_nothing_to_scrape() -> None:
    with pytest.raises(ConfigError, match="nothing to scrape") as refused:
        parse_config("log_level: info\n")
    assert all(entry.section in refused.value.problems[0] for entry in COLLECTORS)
