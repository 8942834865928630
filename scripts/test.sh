#!/usr/bin/env bash
# The test command: set up everything (scripts/setup.sh), lint and type-check (scripts/lint.sh), prove the package
# works without its extras (scripts/check-no-extras.sh, which runs the unit tests that need no extra), and run the
# rest of the suite: every test runs once. Integration tests start their own servers on 127.0.0.1. With arguments,
# the checks run first, then pytest runs exactly what the arguments select.
#
# Without arguments the slow parts overlap: the container image is built in the background from the start (the
# image test waits for that build: one build at a time), the no-extras check runs beside the integration suite
# (niced: the servers come first), and the integration suite runs on two workers (most of it waits on servers and
# alerts, not on the CPU). The no-extras check's output follows the suite's, and either failing fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -gt 0 ]; then
  scripts/lint.sh
  scripts/check-no-extras.sh
  exec .venv/bin/python -m pytest "$@"
fi

mkdir -p .cdcwatch
(nice -n 10 scripts/build-image.sh >.cdcwatch/build-image.log 2>&1 || true) &
scripts/lint.sh
nice -n 10 scripts/check-no-extras.sh >.cdcwatch/check-no-extras.log 2>&1 &
no_extras=$!
status=0
# each module whole on one worker (its servers started once), in the order tests/conftest.py gives them
.venv/bin/python -m pytest -m "integration or spark or preview or chart or dashboards or delta" -n 2 --dist loadfile --no-loadscope-reorder \
  || status=$?
no_extras_status=0
wait "$no_extras" || no_extras_status=$?
echo "----- scripts/check-no-extras.sh (ran beside the suite) -----"
cat .cdcwatch/check-no-extras.log
if [ "$no_extras_status" -ne 0 ]; then
  echo "scripts/check-no-extras.sh failed (exit $no_extras_status)" >&2
  status=1
fi
exit "$status"
