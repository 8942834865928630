#!/usr/bin/env bash
# The test command: set up everything (scripts/setup.sh), then run the whole suite.
# Integration tests start their own PostgreSQL, MariaDB and Debezium processes on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
