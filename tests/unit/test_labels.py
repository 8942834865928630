"""Bean discovery labels: any key order, SQL Server task/database, custom metric tags."""

from cdcwatch.debezium import bean_labels
from cdcwatch.jmx import MBean, parse_object_name


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
