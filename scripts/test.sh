#!/usr/bin/env bash
# The test command: set up everything (scripts/setup.sh), lint and type-check (ruff, mypy), prove the package
# works without its extras (which runs the unit tests that need no extra), then the rest of the suite: every
# test runs once. Integration tests start their own servers on 127.0.0.1. With arguments, pytest runs exactly
# what they select.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/lint.sh
scripts/check-no-extras.sh
if [ $# -eq 0 ]; then
  exec .venv/bin/python -m pytest -m "integration or spark or preview or chart"
fi
exec .venv/bin/python -m pytest "$@"
