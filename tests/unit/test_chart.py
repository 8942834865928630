"""The Helm chart (charts/cdcwatch) as a cluster would get it. No Kubernetes cluster runs here or in CI, so what a
cluster would check is checked on the rendered objects: `helm lint`; `helm template` of the defaults and of each
example values file; every object against the Kubernetes schemas of the oldest and the newest Kubernetes the chart
supports (kubernetes-validate, offline); the monitoring.coreos.com objects and the Strimzi KafkaConnect example
against the fields of their CRDs (tests/schemas/); and what the objects must do: a hardened pod, probes on the
exporter's health endpoints, passwords only from Secrets, the generated rules and dashboards, the job labels
the rules and dashboards select."""

from __future__ import annotations

import base64
import functools
import gzip
import json
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
import yaml

from cdcwatch import __version__
from cdcwatch.cli import _parser
from cdcwatch.exporter import Exporter
from cdcwatch.mixin import RULES_FILE, MixinConfig
from cdcwatch.mixin.stages import STAGES
from cdcwatch.server import build_app
from cdcwatch.validation import parse_config
from tests.tools import tool

pytestmark = pytest.mark.chart  # kubernetes-validate and jsonschema come with the test extra

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cdcwatch"
EXAMPLES = sorted((CHART / "examples").glob("values-*.yaml"))
SCHEMAS = ROOT / "tests" / "schemas"
KUBERNETES_VERSIONS = ("1.29.0", "1.37.0")
"""The oldest Kubernetes of Chart.yaml's kubeVersion, and the newest the pinned kubernetes-validate ships schemas of."""
CRD_KINDS = {"ServiceMonitor": "monitoring.coreos.com_v1_servicemonitor", "PodMonitor": "monitoring.coreos.com_v1_podmonitor",
             "PrometheusRule": "monitoring.coreos.com_v1_prometheusrule", "KafkaConnect": "kafka.strimzi.io_v1_kafkaconnect"}
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, timeout=120)


@functools.cache
def rendered(*values: str, kube_version: str = KUBERNETES_VERSIONS[-1], release: str = "pipeline") -> tuple[dict[str, Any], ...]:
    """The objects `helm template` makes with these values: files, or JSON text (written to a file)."""
    with tempfile.TemporaryDirectory() as scratch:
        flags = []
        for number, value in enumerate(values):
            if value.startswith("{"):
                (Path(scratch) / f"{number}.json").write_text(value)
                value = str(Path(scratch) / f"{number}.json")
            flags += ["-f", value]
        done = helm("template", release, str(CHART), "--namespace", "monitoring", "--kube-version", kube_version, *flags)
    assert done.returncode == 0, done.stderr
    return tuple(obj for obj in yaml.safe_load_all(done.stdout) if obj)


def of_kind(objects: tuple[dict[str, Any], ...], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def container(objects: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (deployment,) = of_kind(objects, "Deployment")
    (found,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


def exporter_config(objects: tuple[dict[str, Any], ...]) -> str:
    (config_map,) = [m for m in of_kind(objects, "ConfigMap") if "cdcwatch.yml" in m["data"]]
    return str(config_map["data"]["cdcwatch.yml"])


MINIMAL = '{"config": {"postgres": [{"name": "db"}]}}'
"""The defaults and one target (the defaults configure none, and the chart renders nothing without one)."""
ALL_ON = '{"config": {"postgres": [{"name": "db"}]}, "podMonitor": {"enabled": true}}'
EVERY_STAGE = json.dumps({"config": {"postgres": [{"name": "db"}]}, "stages": dict.fromkeys(STAGES, True)})
"""Every stage on: the rules, inhibitions and dashboards of the repository's alerts/, alertmanager/, dashboards/."""
OPENSHIFT = '{"podSecurityContext": {"runAsUser": null, "runAsGroup": null, "fsGroup": null}}'
"""docs/deploy/kubernetes.md's OpenShift setting: the UID, GID and fsGroup the restricted SCC assigns."""
EXTRAS = json.dumps({
    "config": {"postgres": [{"name": "db", "password": "${PG_PASSWORD}"}]},
    "extraEnv": [{"name": "PG_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "pg", "key": "password"}}},
                 {"name": "TZ", "value": "UTC"}],
    "envFrom": [{"configMapRef": {"name": "cdcwatch-env"}}],
    "extraVolumes": [{"name": "ca", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True}}],
    "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ca", "readOnly": True}],
    "extraContainers": [{"name": "proxy", "image": "proxy:1"}],
    "serviceMonitor": {"relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "eu-1"}],
                       "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"],
                                              "regex": "cdcwatch_kafka_consumergroup_committed_offset"}],
                       "targetLabels": ["team"]},
    "podMonitor": {"enabled": True, "relabelings": [{"action": "labeldrop", "regex": "pod_template_hash"}],
                   "metricRelabelings": [{"action": "keep", "sourceLabels": ["__name__"], "regex": "cdcwatch_.*"}],
                   "podTargetLabels": ["app"]}})
"""The community charts' hooks: more env (from Secrets too), envFrom, volumes, mounts, containers; the monitors'
relabelings, metric relabelings and target labels."""
RENDERINGS = [(MINIMAL,), (ALL_ON,), (EVERY_STAGE,), (MINIMAL, OPENSHIFT), (EXTRAS,), *((str(path),) for path in EXAMPLES)]
IDS = ["minimal", "podMonitor", "every-stage", "openshift", "extras", *(path.stem for path in EXAMPLES)]


def test_every_example_is_documented_and_rendered_here() -> None:
    docs = (ROOT / "docs" / "deploy" / "kubernetes.md").read_text()
    examples = sorted((CHART / "examples").iterdir())
    assert [path for path in examples if path.name.startswith("values-")] == EXAMPLES and len(EXAMPLES) == 5
    assert [path.name for path in examples if f"`{path.name}`" not in docs] == []
    typical = (CHART / "examples" / "values-cluster.yaml").read_text()
    assert f"```yaml\n{typical}```" in docs  # the documentation's full values file is the one rendered here


def test_helm_lint_passes_with_the_defaults_and_every_example() -> None:
    for values in [[], *(["-f", str(path)] for path in EXAMPLES)]:
        linted = helm("lint", "--strict", str(CHART), *values)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_chart_versions_follow_cdcwatch_and_the_validated_kubernetes_range() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    assert chart["kubeVersion"] == f">={KUBERNETES_VERSIONS[0]}-0"
    older = helm("template", "cdcwatch", str(CHART), "--kube-version", "1.28.15")
    assert older.returncode != 0 and "kubeVersion" in older.stderr
    assert container(rendered(MINIMAL))["image"] == f"ghcr.io/cdcwatch/cdcwatch:{__version__}"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", RENDERINGS, ids=IDS)
def test_every_object_is_valid_kubernetes(values: tuple[str, ...], version: str) -> None:
    objects = rendered(*values, kube_version=version)
    core = [obj for obj in objects if obj["kind"] not in CRD_KINDS]
    assert {obj["kind"] for obj in core} >= {"Deployment", "Service", "ConfigMap", "ServiceAccount"}
    import kubernetes_validate  # the test extra (this module's marker keeps it out of the no-extras run)

    for obj in core:
        kubernetes_validate.validate(obj, version, strict=True)


def match_crd(obj: dict[str, Any]) -> None:
    """Raises unless `obj` fits the fields of its CRD (tests/schemas/)."""
    import jsonschema  # the test extra (this module's marker keeps it out of the no-extras run)

    jsonschema.validate(obj, json.loads((SCHEMAS / f"{CRD_KINDS[obj['kind']]}.json").read_text()))


@pytest.mark.parametrize("values", RENDERINGS, ids=IDS)
def test_monitoring_objects_match_their_crds(values: tuple[str, ...]) -> None:
    objects = rendered(*values)
    monitoring = [obj for obj in objects if obj["kind"] in CRD_KINDS]
    assert {obj["kind"] for obj in monitoring} >= {"ServiceMonitor", "PrometheusRule"}
    for obj in monitoring:
        match_crd(obj)


def test_the_strimzi_kafkaconnect_example_matches_its_crd() -> None:
    (connect,) = yaml.safe_load_all((CHART / "examples" / "strimzi-kafkaconnect.yaml").read_text())
    match_crd(connect)
    assert connect["spec"]["jmxOptions"] == {"authentication": {"type": "password"}}
    # the values example reads the Secret Strimzi generates for it: <name>-kafka-connect-jmx
    values = yaml.safe_load((CHART / "examples" / "values-strimzi.yaml").read_text())
    assert {ref["secretName"] for ref in values["secretEnv"].values()} == {f"{connect['metadata']['name']}-kafka-connect-jmx"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_strimzi_network_policy_example_lets_the_exporter_reach_connect(version: str) -> None:
    import kubernetes_validate  # the test extra (this module's marker keeps it out of the no-extras run)

    (policy,) = yaml.safe_load_all((CHART / "examples" / "strimzi-connect-networkpolicy.yaml").read_text())
    kubernetes_validate.validate(policy, version, strict=True)
    (connect,) = yaml.safe_load_all((CHART / "examples" / "strimzi-kafkaconnect.yaml").read_text())
    assert policy["spec"]["podSelector"]["matchLabels"]["strimzi.io/cluster"] == connect["metadata"]["name"]
    assert policy["metadata"]["namespace"] == connect["metadata"]["namespace"]
    (deployment,) = of_kind(rendered(str(CHART / "examples" / "values-strimzi.yaml"), release="cdcwatch"), "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    urls = yaml.safe_load((CHART / "examples" / "values-strimzi.yaml").read_text())["config"]["connect"]
    assert {int(worker["url"].rsplit(":", 1)[1]) for worker in urls} == {port["port"] for port in rule["ports"]}


def test_the_pod_runs_unprivileged_on_a_read_only_root() -> None:
    objects = rendered(MINIMAL)
    (deployment,) = of_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["runAsGroup"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    found = container(objects)
    assert found["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                        "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert found["resources"]["requests"] and found["resources"]["limits"]["memory"]
    tmp = next(m for m in found["volumeMounts"] if m["mountPath"] == "/tmp")
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])


def test_openshift_assigns_the_ids_and_the_rest_stays_hardened() -> None:
    """docs/deploy/kubernetes.md's OpenShift setting: no fixed UID, GID or fsGroup (the restricted SCC assigns them
    from the namespace's range, and refuses a pod that fixes others); everything else as hardened."""
    default, objects = rendered(MINIMAL), rendered(MINIMAL, OPENSHIFT)
    ((before,), (after,)) = of_kind(default, "Deployment"), of_kind(objects, "Deployment")
    pod = after["spec"]["template"]["spec"]["securityContext"]
    assert pod == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container(objects)["securityContext"] == container(default)["securityContext"]
    docs = (ROOT / "docs" / "deploy" / "kubernetes.md").read_text()
    assert yaml.safe_load(OPENSHIFT) == yaml.safe_load(re.search(r"```yaml\n(podSecurityContext:.*?)```", docs, re.S)[1])
    assert before["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001


def test_security_contexts_are_the_values() -> None:
    objects = rendered(MINIMAL, '{"podSecurityContext": {"runAsUser": 2000, "supplementalGroups": [3000]}, '
                                '"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}')
    (deployment,) = of_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == 2000 and pod["supplementalGroups"] == [3000] and pod["fsGroup"] == 10001
    assert container(objects)["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    assert container(objects)["securityContext"]["readOnlyRootFilesystem"] is True


def test_without_a_target_helm_refuses_and_says_what_to_configure() -> None:
    done = helm("template", "cdcwatch", str(CHART), "--kube-version", KUBERNETES_VERSIONS[-1])
    assert done.returncode != 0 and "config: nothing to scrape: configure at least one of debezium, kafka" in done.stderr


def test_the_pod_runs_serve_on_the_rendered_config_and_probes_what_it_serves() -> None:
    objects = rendered(str(EXAMPLES[1]))
    found = container(objects)
    args = _parser().parse_args(found["args"])
    assert args.command == "serve" and args.config_watch_interval == 0
    mount = next(m for m in found["volumeMounts"] if args.config.startswith(m["mountPath"] + "/"))
    (deployment,) = of_kind(objects, "Deployment")
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    (config_map,) = [m for m in of_kind(objects, "ConfigMap") if m["metadata"]["name"] == volume["configMap"]["name"]]
    config = parse_config(config_map["data"][Path(args.config).name], env=dict.fromkeys(found_secret_env(found), "x"))
    assert (config.listen.address, config.listen.port) == ("0.0.0.0", 10121)
    (port,) = found["ports"]
    assert port["containerPort"] == config.listen.port
    (service,) = of_kind(objects, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    app = build_app(Exporter([]))
    statuses: list[str] = []
    for probe in (found["livenessProbe"], found["readinessProbe"]):
        assert probe["httpGet"]["port"] == port["name"] and probe["httpGet"]["scheme"] == "HTTP"
        environ: dict[str, Any] = {"PATH_INFO": probe["httpGet"]["path"]}
        setup_testing_defaults(environ)
        b"".join(app(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["200 OK", "200 OK"]
    assert found["livenessProbe"]["httpGet"]["path"] != found["readinessProbe"]["httpGet"]["path"]


def test_probes_and_the_service_monitor_speak_https_with_a_tls_web_config() -> None:
    objects = rendered(MINIMAL, '{"web": {"existingSecret": "cdcwatch-web", "tls": true}}')
    found = container(objects)
    assert found["livenessProbe"]["httpGet"]["scheme"] == found["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    (monitor,) = of_kind(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["scheme"] == "https"
    config = yaml.safe_load(exporter_config(objects))
    web = next(m for m in found["volumeMounts"] if m["name"] == "web")
    assert config["listen"]["web_config_file"] == f"{web['mountPath']}/web.yml"


def found_secret_env(found: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {env["name"]: env["valueFrom"]["secretKeyRef"] for env in found.get("env", []) if "valueFrom" in env}


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_passwords_come_only_from_secrets(example: Path) -> None:
    objects = rendered(str(example))
    found = container(objects)
    from_secrets = found_secret_env(found)
    text = exporter_config(objects)
    referenced = set(ENV_REF.findall(text))
    assert referenced and referenced <= set(from_secrets)
    config = parse_config(text, env={name: f"value-of-{name}" for name in referenced})
    secrets = [*(t.jmx.password for t in config.debezium), *(c.password for c in config.connect),
               *(c.jmx.password for c in config.connect if c.jmx), *(p.password for p in config.postgres),
               *(m.password for m in config.mysql)]
    values = [secret.get_secret_value() for secret in secrets if secret is not None]
    values += [value for kafka in config.kafka for key, value in kafka.client.items() if "password" in key]
    assert values and all(value.startswith("value-of-") for value in values)  # each one from a Secret
    assert all(ENV_REF.fullmatch(value) for value in password_values(yaml.safe_load(text)))
    assert not [env for env in found.get("env", []) if "value" in env and env["name"] in referenced]


def password_values(node: Any) -> list[str]:
    """The values of every key naming a password, anywhere in a parsed YAML tree."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if "password" in k] + [p for v in node.values() for p in password_values(v)]
    if isinstance(node, list):
        return [p for v in node for p in password_values(v)]
    return []


def test_the_prometheus_rule_holds_the_generated_rules() -> None:
    """With every stage on, the repository's rule file (test_chart_stages: each shape's)."""
    (rule,) = of_kind(rendered(EVERY_STAGE), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((ROOT / RULES_FILE).read_text())
    assert rule["metadata"]["labels"]["role"] == "alert-rules"


def test_one_dashboard_config_map_per_dashboard_with_the_sidecar_label() -> None:
    dashboards = {path.name: json.loads(path.read_text()) for path in (ROOT / "dashboards").glob("*.json")}
    for values, label in [((EVERY_STAGE,), "grafana_dashboard"),
                          ((EVERY_STAGE, '{"dashboards": {"label": "my_dashboards"}}'), "my_dashboards")]:
        maps = [m for m in of_kind(rendered(*values), "ConfigMap") if "-dashboard-" in m["metadata"]["name"]]
        assert {key for m in maps for key in m["data"]} == set(dashboards)
        for config_map in maps:
            assert config_map["metadata"]["labels"][label] == "1"
            assert config_map["metadata"]["annotations"] == {"grafana_folder": "cdcwatch"}
            ((name, text),) = config_map["data"].items()
            assert json.loads(text) == dashboards[name]
            assert len(json.dumps(config_map)) < 262144, name  # kubectl apply keeps a copy in an annotation


def relabelled_job(monitor: dict[str, Any], endpoints: str) -> str:
    (endpoint,) = monitor["spec"][endpoints]
    (job,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
    assert job["action"] == "replace" and "sourceLabels" not in job and "regex" not in job
    return str(job["replacement"])


def test_the_monitors_set_the_jobs_the_rules_and_dashboards_select() -> None:
    selectors = MixinConfig().selectors
    objects = rendered(ALL_ON)
    (service_monitor,) = of_kind(objects, "ServiceMonitor")
    (pod_monitor,) = of_kind(objects, "PodMonitor")
    assert f'job="{relabelled_job(service_monitor, "endpoints")}"' == selectors.cdcwatch
    assert f'job="{relabelled_job(pod_monitor, "podMetricsEndpoints")}"' == selectors.spark
    (rule,) = of_kind(objects, "PrometheusRule")
    rules = json.dumps(rule["spec"])
    assert selectors.cdcwatch.replace('"', '\\"') in rules and selectors.spark.replace('"', '\\"') in rules


def test_other_job_names_reach_the_monitors_rules_and_dashboards() -> None:
    default = rendered(ALL_ON)
    objects = rendered(ALL_ON, '{"jobs": {"exporter": "cdc-exporter", "spark": "cdc-spark"}}')
    (service_monitor,) = of_kind(objects, "ServiceMonitor")
    (pod_monitor,) = of_kind(objects, "PodMonitor")
    assert relabelled_job(service_monitor, "endpoints") == "cdc-exporter"
    assert relabelled_job(pod_monitor, "podMetricsEndpoints") == "cdc-spark"
    before, after = selecting_text(default), selecting_text(objects)
    for old, new in (('job=\\"cdcwatch\\"', 'job=\\"cdc-exporter\\"'), ('job=\\"cdcwatch-spark\\"', 'job=\\"cdc-spark\\"')):
        assert old not in after and after.count(new) == before.count(old) > 0, old


def selecting_text(objects: tuple[dict[str, Any], ...]) -> str:
    """The rules and the dashboards as one JSON text, where a selector reads job=\\"..\\"."""
    (rule,) = of_kind(objects, "PrometheusRule")
    dashboards = [json.loads(text) for m in of_kind(objects, "ConfigMap") if "-dashboard-" in m["metadata"]["name"]
                  for text in m["data"].values()]
    return json.dumps([rule["spec"], dashboards])


def test_a_config_change_rolls_the_pod() -> None:
    def checksum(*values: str) -> str:
        (deployment,) = of_kind(rendered(*values), "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum(MINIMAL) == checksum(MINIMAL, '{"config": {"log_level": "info"}}')
    assert checksum(MINIMAL) != checksum(MINIMAL, '{"config": {"log_level": "debug"}}')


PASSWORD = "hunter2-literal"


@pytest.mark.parametrize(("values", "named"), [
    ({"config": {"postgres": [{"name": "db", "password": PASSWORD}]}}, "/config/postgres/0/password"),
    ({"config": {"kafka": [{"name": "k", "bootstrap_servers": "b:9092", "client": {"sasl.password": PASSWORD}}]}},
     "/config/kafka/0/client/sasl.password"),
    ({"config": {"debezium": [{"name": "t", "jmx": {"host": "h", "port": 1, "username": "u", "password": PASSWORD}}]}},
     "/config/debezium/0/jmx/password"),
    ({"config": {"listen": {"port": 9}}}, "'listen' not allowed"),
    ({"secretEnv": {"PG_PASSWORD": {"secretName": "s"}}}, "/secretEnv/PG_PASSWORD"),
    ({"env": {"PG_PASSWORD": PASSWORD}}, "/env"),
    ({"serviceMonitor": {"interval": "30 seconds"}}, "/serviceMonitor/interval"),
    ({"servicemonitor": {"enabled": False}}, "servicemonitor"),
    ({"config": {"postgres": [{"name": "db", "password": "${PG_PASSWORD}"}]}}, "secretEnv.PG_PASSWORD"),
    ({"config": {"postgres": [{"name": "db", "password": "${PG_PASS}"}]}, "env": {"PG_PASS": PASSWORD}},
     "PG_PASS is set in plain text"),
    ({"config": {"kafka": [{"name": "k", "bootstrap_servers": "b:9092", "client": {"sasl.password": "${KP}"}}]},
      "extraEnv": [{"name": "KP", "value": PASSWORD}]}, "KP is set in plain text"),
    ({"prometheusRule": {"disabled": {"CdcNoSuchAlert": True}}}, "'CdcNoSuchAlert' not allowed"),
    ({"prometheusRule": {"customRules": {"CdcKafkaConsumerLagHigh": {"for": "30 minutes"}}}},
     "/prometheusRule/customRules/CdcKafkaConsumerLagHigh/for"),
], ids=["postgres-password", "sasl-password", "jmx-password", "listen", "secret-key", "env-password", "interval",
        "unknown-key", "unset-variable", "secret-from-env", "secret-from-extra-env", "unknown-alert", "alert-for"])
def test_bad_values_fail_naming_the_key(values: dict[str, Any], named: str, tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    for command in (["template", "cdcwatch", "--kube-version", KUBERNETES_VERSIONS[-1]], ["lint"]):
        done = helm(*command, str(CHART), "-f", str(tmp_path / "values.yaml"))
        said = done.stdout + done.stderr
        # helm lint reports a template's `fail` without failing (it lints partial values too); the schema fails it
        assert done.returncode != 0 or (command == ["lint"] and "[INFO] Fail: " in said), (command, said)
        assert named in said, (command, said)
        assert PASSWORD not in said  # an error never echoes the secret it refuses


def test_runbook_and_grafana_addresses_set_once_reach_every_alert() -> None:
    """prometheusRule.runbookBaseUrl and grafanaUrl rewrite every alert's links, and nothing else of the rules."""
    default = rendered(MINIMAL)
    objects = rendered(MINIMAL, '{"prometheusRule": {"runbookBaseUrl": "https://docs.example.com/cdcwatch/runbook/", '
                       '"grafanaUrl": "https://grafana.example.com/"}}')
    ((before,), (after,)) = of_kind(default, "PrometheusRule"), of_kind(objects, "PrometheusRule")
    alerts = [(old, new) for old_group, new_group in zip(before["spec"]["groups"], after["spec"]["groups"], strict=True)
              for old, new in zip(old_group["rules"], new_group["rules"], strict=True) if "alert" in old]
    assert alerts
    for old, new in alerts:
        name = old["alert"]
        assert new["annotations"]["runbook_url"] == f"https://docs.example.com/cdcwatch/runbook/#{name.lower()}"
        assert new["annotations"]["dashboard_url"] == "https://grafana.example.com" + old["annotations"]["dashboard_url"]
        assert {**new, "annotations": {}} == {**old, "annotations": {}}
        others = {k: v for k, v in new["annotations"].items() if k not in ("runbook_url", "dashboard_url")}
        assert others == {k: v for k, v in old["annotations"].items() if k not in ("runbook_url", "dashboard_url")}


def test_a_runbook_address_with_a_fragment_is_refused() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        values = Path(scratch) / "values.json"
        values.write_text('{"prometheusRule": {"runbookBaseUrl": "https://docs.example.com/runbook#top"}}')
        done = helm("template", "x", str(CHART), "--kube-version", KUBERNETES_VERSIONS[-1], "-f", str(values))
    assert done.returncode != 0 and "runbookBaseUrl" in done.stderr


def test_the_chart_packages_and_a_release_of_it_fits_in_its_secret(tmp_path: Path) -> None:
    """`helm package` makes the archive a chart repository serves; Helm keeps each release (the chart's templates and
    files base64 in JSON, gzipped, base64 again) in a Secret, which the API server refuses over 1 MiB."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    done = helm("package", str(CHART), "--destination", str(tmp_path))
    archive = tmp_path / f"cdcwatch-{chart['version']}.tgz"
    assert done.returncode == 0 and archive.is_file(), done.stdout + done.stderr
    with tarfile.open(archive) as tar:
        members = {m.name.removeprefix("cdcwatch/"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    generated = {str(p.relative_to(CHART)) for p in (CHART / "files").rglob("*") if p.is_file()}
    assert generated and generated <= set(members) and {"values.schema.json", "templates/_helpers.tpl"} <= set(members)
    assert yaml.safe_load(members["Chart.yaml"]) == chart
    manifest = helm("template", "cdcwatch", str(archive), "--kube-version", KUBERNETES_VERSIONS[-1], "-f",
                    str(EXAMPLES[0]), "--set", "podMonitor.enabled=true")
    assert manifest.returncode == 0, manifest.stderr
    release = {"chart": {"files": [{"name": n, "data": base64.b64encode(d).decode()} for n, d in members.items()]},
               "manifest": manifest.stdout}
    stored = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    assert len(stored) < 768 * 1024, len(stored)


def test_the_chart_version_has_its_upgrading_notes() -> None:
    """The policy of docs/deploy/kubernetes.md: the chart's own SemVer version, each with a section under Upgrading."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", chart["version"])
    docs = (ROOT / "docs" / "deploy" / "kubernetes.md").read_text()
    upgrading = docs[docs.index("\n## Upgrading\n"):]
    assert f"\n### To {chart['version']}\n" in upgrading


def test_the_community_charts_hooks_reach_the_pod_and_the_monitors() -> None:
    """What EXTRAS sets lands where the community charts put it, after the chart's own (the chart's `job` relabeling
    first, so a user's relabeling can only add to it); a literal secret in extraEnv is refused like one in `env`."""
    objects = rendered(EXTRAS)
    values = json.loads(EXTRAS)
    (deployment,) = of_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    found, *more = pod["containers"]
    assert found["name"] == "cdcwatch" and more == values["extraContainers"]
    assert found["env"][-2:] == values["extraEnv"] and found["envFrom"] == values["envFrom"]
    assert found["volumeMounts"][-1] == values["extraVolumeMounts"][0] and pod["volumes"][-1] == values["extraVolumes"][0]
    for kind, key, labels in (("ServiceMonitor", "endpoints", "targetLabels"),
                              ("PodMonitor", "podMetricsEndpoints", "podTargetLabels")):
        (monitor,) = of_kind(objects, kind)
        (endpoint,) = monitor["spec"][key]
        mine = values["serviceMonitor" if kind == "ServiceMonitor" else "podMonitor"]
        assert endpoint["relabelings"][0]["targetLabel"] == "job" and endpoint["relabelings"][1:] == mine["relabelings"]
        assert endpoint["metricRelabelings"] == mine["metricRelabelings"] and monitor["spec"][labels] == mine[labels]
    literal = json.dumps({"config": {"postgres": [{"name": "db"}]}, "extraEnv": [{"name": "PG_PASSWORD", "value": "x"}]})
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "v.json").write_text(literal)
        done = helm("template", "pipeline", str(CHART), "-f", str(Path(scratch) / "v.json"))
    assert done.returncode != 0 and "no secret in extraEnv" in done.stderr, done.stderr


def test_the_chart_readme_is_what_helm_shows_and_describes_every_value() -> None:
    """`helm show readme` prints the README generated from Chart.yaml and values.yaml's comments: every top-level
    value with what its comment says (none left undescribed) and its default; edited values regenerate it."""
    from cdcwatch.mixin.chart_readme import chart_readme, value_descriptions

    readme = (CHART / "README.md").read_text(encoding="utf-8")
    assert readme == chart_readme(CHART), "charts/cdcwatch/README.md is stale: run `cdcwatch mixin generate`"
    shown = helm("show", "readme", str(CHART))
    assert shown.returncode == 0 and shown.stdout.strip() == readme.strip(), shown.stderr
    values_text = (CHART / "values.yaml").read_text(encoding="utf-8")
    described = value_descriptions(values_text)
    assert list(described) == list(yaml.safe_load(values_text)), "a top-level value the README leaves out"
    assert all(described.values()), [key for key, what in described.items() if not what]
    for key, what in described.items():
        assert f"| `{key}` | {what.replace('|', chr(92) + '|')} |" in readme, key
