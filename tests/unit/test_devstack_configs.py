"""The configuration builders of devstack/configs.py write YAML that cdcwatch's own loaders read into the intended
models: what a test states in Python is what its `cdcwatch serve` runs with."""

from __future__ import annotations

from cdcwatch.config import parse_yaml_model
from cdcwatch.validation import parse_config
from cdcwatch.web import WebConfig
from devstack.configs import (
    connect_worker,
    exporter_config,
    jmx,
    jmx_target,
    kafka_cluster,
    listen,
    mysql_source,
    postgres_source,
    reconcile_pair,
    reconcile_side,
    web_config,
)


def test_every_section_builder_loads_into_its_model() -> None:
    config = parse_config(exporter_config(
        listen=listen(9999, address="0.0.0.0", web_config_file="/etc/web.yml"),
        debezium=[jmx_target("jvm", 9010, timeout_seconds=2)],
        kafka=[kafka_cluster("k", "b1:9092,b2:9092", timeout_seconds=3, client={"security.protocol": "SASL_SSL"},
                             groups={"allow": ["app-.*"]})],
        connect=[connect_worker("w", "https://connect:8083", jmx_port=9011, username="u", password="${PW}",
                                ca_file="/ca.pem"), connect_worker("rest-only", "http://c:8083")],
        postgres=[postgres_source("pg", 5433, host="db", slot_servers={"s": "srv"}, timeout_seconds=4)],
        mysql=[mysql_source("my", 3307, "monitor", host="maria", password="${PW}", server="srv")],
        reconcile=[reconcile_pair("orders", reconcile_side("postgres", 5433, "postgres", table="public.orders"),
                                  reconcile_side("mysql", 3307, "monitor", host="maria", table="shop.orders"),
                                  key="id", settle_seconds=1)]), env={"PW": "pw"})
    assert (config.listen.address, config.listen.port, config.listen.web_config_file) == ("0.0.0.0", 9999, "/etc/web.yml")
    assert (config.debezium[0].jmx.host, config.debezium[0].jmx.port, config.debezium[0].timeout_seconds) == \
        ("127.0.0.1", 9010, 2)
    (cluster,) = config.kafka
    assert (cluster.name, cluster.bootstrap_servers, cluster.timeout_seconds) == ("k", "b1:9092,b2:9092", 3)
    assert (cluster.client, cluster.groups.allow) == ({"security.protocol": "SASL_SSL"}, ["app-.*"])
    worker, rest_only = config.connect
    assert (worker.url, worker.username, worker.ca_file) == ("https://connect:8083", "u", "/ca.pem")
    assert worker.password is not None and worker.password.get_secret_value() == "pw"
    assert worker.jmx is not None and (worker.jmx.host, worker.jmx.port) == ("127.0.0.1", 9011)
    assert rest_only.jmx is None
    (pg,) = config.postgres
    assert (pg.name, pg.host, pg.port, pg.slot_servers, pg.timeout_seconds) == ("pg", "db", 5433, {"s": "srv"}, 4)
    (my,) = config.mysql
    assert (my.name, my.host, my.port, my.user, my.server) == ("my", "maria", 3307, "monitor", "srv")
    (pair,) = config.reconcile
    assert (pair.name, pair.key, pair.settle_seconds) == ("orders", "id", 1)
    assert (pair.source.engine, pair.source.port, pair.source.table) == ("postgres", 5433, "public.orders")
    assert (pair.target.engine, pair.target.host, pair.target.user, pair.target.table) == \
        ("mysql", "maria", "monitor", "shop.orders")


def test_a_jmx_mapping_carries_its_settings() -> None:
    config = parse_config(exporter_config(debezium=[{"name": "j", "jmx": jmx(9010, host="h", ssl=True, ca_file="/c")}]),
                          env={})
    settings = config.debezium[0].jmx
    assert (settings.host, settings.port, settings.ssl, settings.ca_file) == ("h", 9010, True, "/c")


def test_the_web_config_builder_loads_into_the_web_model() -> None:
    hashed = "$2b$04$" + "a" * 53
    web = parse_yaml_model(web_config(
        tls_server_config={"cert_file": "s.crt", "key_file": "s.key", "client_ca_file": "ca.crt",
                           "client_auth_type": "RequireAndVerifyClientCert"},
        basic_auth_users={"prometheus": hashed}), WebConfig, "<web>")
    assert web.tls_server_config is not None
    assert (web.tls_server_config.cert_file, web.tls_server_config.client_auth_type) == ("s.crt", "RequireAndVerifyClientCert")
    assert web.basic_auth_users == {"prometheus": hashed}
