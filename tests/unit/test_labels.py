"""Bean discovery labels: any key order, SQL Server task/database, custom metric tags, and the static labels a
Debezium target may carry (not the labels its collector sets; those of other collectors, yes)."""

from cdcwatch.collectors import registered
from cdcwatch.debezium import bean_labels
from cdcwatch.jmx import MBean, parse_object_name
from cdcwatch.validation import parse_config


def labels_of(name, static=None):
    domain, keys = parse_object_name(name)
    return bean_labels(MBean(name, domain, keys), "t1", static or {})


def test_key_order_does_not_matter():
    a = labels_of("debezium.postgres:type=connector-metrics,context=streaming,server=pg1")
    b = labels_of("debezium.postgres:server=pg1,context=streaming,type=connector-metrics")
    assert a == b == {"target": "t1", "plugin": "postgres", "server": "pg1", "context": "streaming"}


def test_sql_server_task_and_database():
    got = labels_of("debezium.sql_server:type=connector-metrics,server=fulfillment,task=0,context=streaming,database=testDB1")
    assert got == {"target": "t1", "plugin": "sql_server", "server": "fulfillment", "context": "streaming",
                   "task": "0", "database": "testDB1"}


def test_custom_metric_tags_become_labels_without_clashing():
    got = labels_of('debezium.mysql:type=connector-metrics,context=streaming,server=m,k1=v1,target=x,"weird-key"=v', {"env": "prod"})
    assert got["k1"] == "v1"
    assert got["tag_target"] == "x"  # a tag may not overwrite cdcwatch's own target label
    assert got["target"] == "t1"
    assert got["env"] == "prod"
    assert any(k.endswith("weird_key_") or "weird_key" in k for k in got)


def test_quoted_values():
    domain, keys = parse_object_name('debezium.oracle:type=connector-metrics,server="a,b",context=streaming')
    assert domain == "debezium.oracle"
    assert keys == {"type": "connector-metrics", "server": "a,b", "context": "streaming"}


def test_every_label_a_bean_gives_is_one_a_debezium_targets_static_labels_may_not_use():
    """The labels the collector sets on every series of a Debezium target are the registry's for that kind, so the
    configuration refuses them as static labels (and names the debezium collector)."""
    debezium = registered("debezium")
    assert debezium is not None
    given = labels_of("debezium.sql_server:type=connector-metrics,server=s,task=0,context=streaming,database=d")
    assert set(given) <= set(debezium.reserved_labels())
    assert all(debezium.reserved_labels()[label].startswith("set by the debezium collector")
               for label in set(given) - {"target"})


def test_a_static_label_only_other_collectors_set_is_kept_and_a_tag_of_its_name_is_renamed():
    """`topic` and `slot` are the kafka and postgres collectors' labels, never a Debezium series': a Debezium target
    may carry them; a custom metric tag of the same name gives way, as one named like cdcwatch's own does."""
    static = {"topic": "orders", "slot": "s1"}
    [target] = parse_config("debezium:\n  - name: t1\n    jmx: {host: h, port: 1}\n"
                            "    labels: {topic: orders, slot: s1}\n", env={}).debezium
    assert target.labels == static
    got = labels_of("debezium.postgres:type=connector-metrics,context=streaming,server=pg1,topic=t", target.labels)
    assert (got["topic"], got["slot"], got["tag_topic"]) == ("orders", "s1", "t")
