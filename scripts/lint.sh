#!/usr/bin/env bash
# Lint and types: ruff (pycodestyle, pyflakes, import order, bugbear, pyupgrade) on the whole tree,
# mypy, strict on cdcwatch/ (spark_listeners/, devstack/ and bench/ too, untyped functions allowed there), and
# import-linter's contracts on the imports of cdcwatch/ and spark_listeners/ (no cycle, the layers of
# docs/development.md "Layers"; every import counted, those inside functions too).
# All three are configured in pyproject.toml and pinned in the `test` extra (scripts/setup.sh installs them).
# Then the documentation site: `mkdocs build --strict` (mkdocs.yml) fails on a broken link or anchor and on a
# page the navigation leaves out; the site goes to site/ (ignored). Last, every commit subject since the rule
# is at most 72 characters (scripts/check-commit-subjects.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m ruff check .
"$python" -m mypy
"$(dirname "$python")/lint-imports" --no-cache
# (not --quiet: it hides the warnings that --strict turns into a failure)
NO_MKDOCS_2_WARNING=1 "$python" -m mkdocs build --strict
scripts/check-commit-subjects.sh
