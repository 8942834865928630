#!/usr/bin/env bash
# Commit subjects are at most 72 characters (what `git log --oneline`, shortlogs and review tools show whole), for
# every commit after SINCE, the last commit made before the rule. Run by scripts/lint.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SINCE=cad9519
limit=72
if ! git rev-parse --quiet --verify "$SINCE^{commit}" >/dev/null; then
  echo "check-commit-subjects: $SINCE is not in this clone's history (a shallow clone?): fetch the history" >&2
  exit 1
fi
long=$(git log --format='%h %s' "$SINCE..HEAD" | awk -v limit="$limit" 'length($0) - index($0, " ") > limit')
if [ -n "$long" ]; then
  echo "check-commit-subjects: subjects longer than $limit characters (put the detail in the body):" >&2
  echo "$long" >&2
  exit 1
fi
echo "check-commit-subjects: every subject since $SINCE is at most $limit characters"
