#!/usr/bin/env bash
# Lint and types: ruff (pycodestyle, pyflakes, import order, bugbear, pyupgrade) on the whole tree, and
# mypy, strict on cdcwatch/ (spark_listeners/, devstack/ and bench/ too, untyped functions allowed there).
# Both are configured in pyproject.toml and pinned in the `test` extra (scripts/setup.sh installs them).
# Then the documentation site: `mkdocs build --strict` (mkdocs.yml) fails on a broken link or anchor and on a
# page the navigation leaves out; the site goes to site/ (ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m ruff check .
"$python" -m mypy
# (not --quiet: it hides the warnings that --strict turns into a failure)
NO_MKDOCS_2_WARNING=1 "$python" -m mkdocs build --strict
