"""The collector registry (cdcwatch/collectors.py) is what every list of collectors is read from: the configuration's
target sections, the collectors built, the reference, the static labels each kind of target refuses."""

from __future__ import annotations

import re
from typing import get_args, get_origin

import pytest
from pydantic import BaseModel

from cdcwatch.collectors import COLLECTORS, CollectorEntry
from cdcwatch.config import ConfigError
from cdcwatch.exporter import build_collectors
from cdcwatch.reference import metric_types
from cdcwatch.self_metrics import SELF_METRICS
from cdcwatch.validation import config_model, parse_config

_ONE_TARGET = {
    "debezium": "  - name: a\n    jmx: {host: h, port: 1}\n",
    "kafka": "  - name: a\n    bootstrap_servers: h:9092\n",
    "connect": "  - name: a\n    url: http://h:8083\n",
    "postgres": "  - name: a\n",
    "mysql": "  - name: a\n    user: u\n",
    "reconcile": ("  - name: a\n    source: {engine: postgres, user: u, table: public.t}\n"
                  "    target: {engine: postgres, user: u, table: public.t}\n"),
    "canary": ("  - name: a\n    server: s\n    interval_seconds: 10\n"
               "    target: {engine: postgres, user: u, table: public.cdc_canary}\n"),
    "delta": "  - name: a\n    uri: /lake/t\n",
}
"""A minimal target of each section (the test fails for a section without one: a new collector adds its own)."""


def _target_sections() -> set[str]:
    """The keys of the configuration that hold a list of named targets."""
    sections = set()
    for key, field in config_model().model_fields.items():
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


def _refusal(section: str, labels: str) -> list[str]:
    """The problems of one minimal target of `section` with the static labels `labels` (YAML flow mapping)."""
    try:
        parse_config(f"{section}:\n{_ONE_TARGET[section]}    labels: {labels}\n", env={})
    except ConfigError as refused:
        return refused.problems
    return []


@pytest.mark.parametrize("section", sorted(_ONE_TARGET))
@pytest.mark.parametrize(("label", "setter"), [
    ("job", "set by Prometheus (the scrape's job)"),
    ("instance", "set by Prometheus (the scraped address)"),
    ("le", "reserved by Prometheus (a histogram bucket's bound)"),
    ("collector", "set by cdcwatch (the kind of target, on cdcwatch's own series)"),
    ("target", "set by cdcwatch (the target's name, on every series)"),
])
def test_an_exporter_wide_label_is_refused_in_every_section_naming_who_sets_it(section: str, label: str,
                                                                               setter: str) -> None:
    assert _refusal(section, f"{{{label}: x}}") == [
        f"{section}[0].labels: label name {label!r} is {setter}: choose another name"]


@pytest.mark.parametrize(("section", "label", "setter"), [
    ("debezium", "server", "the debezium collector (on every debezium series)"),
    ("debezium", "database", "the debezium collector (on every debezium series)"),
    ("kafka", "source", "the kafka collector (a label of cdcwatch_kafka_message_reads_total)"),
    ("connect", "reason", "the connect collector (a label of cdcwatch_connect_task_restarts_total)"),
    ("postgres", "database", "the postgres collector (a label of cdcwatch_postgres_table_rows_estimate)"),
    ("mysql", "file", "the mysql collector (a label of cdcwatch_mysql_binlog_file_number)"),
    ("reconcile", "side", "the reconcile collector (a label of cdcwatch_reconcile_rows_read_total)"),
    ("canary", "topic", "the canary collector (on every canary series)"),
])
def test_a_label_the_targets_own_collector_sets_is_refused_naming_that_collector(section: str, label: str,
                                                                                 setter: str) -> None:
    assert _refusal(section, f"{{{label}: x}}") == [
        f"{section}[0].labels: label name {label!r} is set by {setter}: choose another name"]


@pytest.mark.parametrize("entry", COLLECTORS, ids=lambda entry: entry.kind)
def test_the_labels_only_other_collectors_and_cdcwatchs_own_series_carry_are_free(entry: CollectorEntry) -> None:
    """A target's static labels go on its own collector's series only: a Kafka cluster may say `database`, which
    only other kinds set, or `failure`, which only cdcwatch's own series (no static labels there) carry."""
    own = entry.reserved_labels()
    others = {label for other in COLLECTORS for label in other.reserved_labels()}
    free = sorted((others | {label for spec in SELF_METRICS.values() for label in spec.labels}) - set(own))
    assert free and ("database" in free) == (entry.kind in ("kafka", "reconcile", "canary", "delta"))
    assert _refusal(entry.section, "{" + ", ".join(f"{label}: x" for label in free) + "}") == []


@pytest.mark.parametrize("entry", COLLECTORS, ids=lambda entry: entry.kind)
def test_each_refusal_names_one_setter(entry: CollectorEntry) -> None:
    for label, setter in entry.reserved_labels().items():
        who = re.fullmatch(r"(?:set|reserved) by (Prometheus|cdcwatch|the (\w+) collector) \([^()]+\)", setter)
        assert who is not None, (label, setter)
        assert who[2] in (None, entry.kind), (label, setter)
        assert (who[1] == "Prometheus") == (label in ("job", "instance", "le", "quantile")), (label, setter)


def test_the_configuration_names_every_registered_section_when_there_is_nothing_to_scrape() -> None:
    with pytest.raises(ConfigError, match="nothing to scrape") as refused:
        parse_config("log_level: info\n")
    assert all(entry.section in refused.value.problems[0] for entry in COLLECTORS)
