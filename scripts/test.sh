#!/usr/bin/env bash
# The test command: set up everything (scripts/setup.sh), lint and type-check (ruff, mypy), prove the package
# works without its extras (which runs the unit tests that need no extra), then the rest of the suite: every
# test runs once. Integration tests start their own servers on 127.0.0.1. With arguments, pytest runs exactly
# what they select.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -eq 0 ]; then
  # the container image is built meanwhile (the image test waits for it: one build at a time), so its download and
  # unpacking overlap the checks below
  mkdir -p .cdcwatch
  (scripts/build-image.sh >.cdcwatch/build-image.log 2>&1 || true) &
fi
scripts/lint.sh
scripts/check-no-extras.sh
if [ $# -eq 0 ]; then
  # two workers, each test module on one of them (its servers started once), the longest modules handed out first
  # (tests/integration/conftest.py): most of the suite waits on servers and alerts, not on the CPU
  exec .venv/bin/python -m pytest -m "integration or spark or preview or chart" -n 2 --dist loadfile
fi
exec .venv/bin/python -m pytest "$@"
