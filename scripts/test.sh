#!/usr/bin/env bash
# The test command: set up everything (scripts/setup.sh), lint and type-check (ruff, mypy), prove the package
# works without its extras, then run the whole suite. Integration tests start their own servers on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/lint.sh
scripts/check-no-extras.sh
exec .venv/bin/python -m pytest "$@"
