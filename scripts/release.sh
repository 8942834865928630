#!/usr/bin/env bash
# Publishes a release of this commit the way users pull it: the image and the Helm chart as OCI artifacts, with their
# provenance (version, revision, licence, and the image's SBOM attached to it).
#
#   scripts/release.sh REGISTRY          e.g. ghcr.io/cdcwatch
#
#   REGISTRY/cdcwatch:<version>          the image (scripts/build-image.sh), labelled with its version, the commit
#                                        and the licence (org.opencontainers.image.*)
#   REGISTRY/cdcwatch@<digest> referrer  its SPDX SBOM (scripts/sbom.py), application/spdx+json, attached with oras
#   oci://REGISTRY/charts/cdcwatch       the chart (<chart version>), its manifest annotated with the commit
#
# Log in first (`podman login`, `helm registry login`; oras reads podman's and Docker's credentials). A release comes
# from a commit: a work tree with changes is refused. CDCWATCH_RELEASE_PLAIN_HTTP=1 talks HTTP to the registry (a
# local one, as tests/integration/test_release.py runs it). Prints the image's digest reference last.
# Needs root (the image build and the SBOM read the image's files), scripts/setup.sh's tools and the helm and oras
# of scripts/lint-tools.sh (.cdcwatch/go/bin, or CDCWATCH_GO_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 1 ] || { echo "usage: scripts/release.sh REGISTRY (e.g. ghcr.io/cdcwatch)" >&2; exit 2; }
registry=${1%/}
bin=${CDCWATCH_GO_BIN:-$PWD/.cdcwatch/go/bin}
for tool in "$bin/helm" "$bin/oras"; do
  [ -x "$tool" ] || { echo "release: $tool is missing: run scripts/lint-tools.sh" >&2; exit 2; }
done
if [ -n "$(git status --porcelain)" ]; then
  echo "release: the work tree has changes: commit them, a release is a commit's" >&2
  git status --short >&2
  exit 2
fi
revision=$(git rev-parse HEAD)
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' cdcwatch/__init__.py)
chart_version=$(sed -n 's/^version: *//p' charts/cdcwatch/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\(.*\)"$/\1/p' charts/cdcwatch/Chart.yaml)
[ "$app_version" = "$version" ] || { echo "release: the chart's appVersion $app_version is not cdcwatch's $version" >&2; exit 2; }

plain=() tls=()
if [ "${CDCWATCH_RELEASE_PLAIN_HTTP:-0}" = 1 ]; then plain=(--plain-http); tls=(--tls-verify=false); fi
work=$(mktemp -d /tmp/cdcwatch-release-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "release: cdcwatch $version (chart $chart_version) at $revision to $registry"
image=$(scripts/build-image.sh | tail -n 1)
# an image of the same inputs built at another commit is reused by build-image.sh: the release's says its own
built_at=$(podman image inspect --format '{{index .Labels "org.opencontainers.image.revision"}}' "$image")
if [ "$built_at" != "$revision" ]; then
  echo "release: $image was built at $built_at: building it at $revision"
  image=$(CDCWATCH_IMAGE_REBUILD=1 scripts/build-image.sh | tail -n 1)
fi
podman push --quiet "${tls[@]}" --digestfile "$work/digest" "$image" "$registry/cdcwatch:$version"
digest=$(cat "$work/digest")
echo "release: pushed $registry/cdcwatch:$version ($digest)"

scripts/sbom.py "$image" >"$work/sbom.spdx.json"
(cd "$work" && "$bin/oras" attach "${plain[@]}" --artifact-type application/spdx+json \
  --annotation "org.opencontainers.image.revision=$revision" \
  "$registry/cdcwatch@$digest" sbom.spdx.json:application/spdx+json >/dev/null)
echo "release: attached its SBOM (application/spdx+json)"

# the chart's manifest carries Chart.yaml's annotations: the commit and the licence, added to a copy
cp -r charts/cdcwatch "$work/cdcwatch"
cat >>"$work/cdcwatch/Chart.yaml" <<ANNOTATIONS
annotations:
  org.opencontainers.image.revision: "$revision"
  org.opencontainers.image.licenses: Apache-2.0
ANNOTATIONS
"$bin/helm" package "$work/cdcwatch" --destination "$work" >/dev/null
"$bin/helm" push "$work/cdcwatch-$chart_version.tgz" "oci://$registry/charts" "${plain[@]}" 2>&1 | sed 's/^/release: helm: /'
echo "release: pushed oci://$registry/charts/cdcwatch:$chart_version"
echo "$registry/cdcwatch@$digest"
