#!/usr/bin/env bash
# Lint and types: ruff (pycodestyle, pyflakes, import order, bugbear, pyupgrade) on the whole tree, and
# mypy, strict on cdcwatch/ (spark_listeners/, devstack/ and bench/ too, untyped functions allowed there).
# Both are configured in pyproject.toml and pinned in the `test` extra (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m ruff check .
"$python" -m mypy
