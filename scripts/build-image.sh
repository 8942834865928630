#!/usr/bin/env bash
# Builds the cdcwatch container image from Debian's packages and PyPI only (no container registry):
#  1. a Debian 12 root filesystem made by mmdebstrap (minbase, python3, python3-venv, a headless JRE for the JPype
#     JMX backend), imported as localhost/cdcwatch-base:<suite>-<hash of its packages and options>;
#  2. image/Containerfile on it: the user cdcwatch (10001:10001), a virtualenv in /opt/cdcwatch with the wheel
#     built from this tree and the exporter's extras; pip reaches PyPI through the host's /etc/pip.conf and CA
#     bundle, mounted read-only into the build step only.
# The image is tagged localhost/cdcwatch:<version> and localhost/cdcwatch:<version>-<hash of the build inputs>
# (this script, image/, pyproject.toml, cdcwatch/, spark_listeners/). When the second tag exists nothing is built
# (CDCWATCH_IMAGE_REBUILD=1 builds anyway). The last line printed is the image's name; its size is printed before.
# Flags this host needs to run containers (image/podman-flags.sh; CDCWATCH_PODMAN_FLAGS overrides) are probed,
# never assumed. Needs root (mmdebstrap, podman); scripts/setup.sh installs the tools.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' cdcwatch/__init__.py)
[ -n "$version" ] || { echo "build-image: no __version__ in cdcwatch/__init__.py" >&2; exit 2; }
for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-image: $tool is missing: run scripts/setup.sh" >&2; exit 2; }
done

# one build at a time on this machine (the tests may start one while another is under way): a second caller waits,
# then finds the image of the same inputs built
exec 9>/tmp/cdcwatch-build-image.lock
flock 9

suite=bookworm
packages=ca-certificates,passwd,python3,python3-venv,openjdk-17-jre-headless
mirrors=("deb http://deb.debian.org/debian $suite main" "deb http://deb.debian.org/debian $suite-updates main"
         "deb http://deb.debian.org/debian-security $suite-security main")
base_options=(--variant=minbase --include="$packages" --aptopt='APT::Install-Recommends "false"'
              --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
              --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
              --setup-hook='mkdir -p "$1/usr/share/man/man1"')  # the JRE's postinst links its manual pages there
base_hash=$(printf '%s\n' "$suite" "${base_options[@]}" "${mirrors[@]}" | sha256sum | cut -c1-12)
base=localhost/cdcwatch-base:$suite-$base_hash

inputs_hash=$( (git ls-files -co --exclude-standard -- scripts/build-image.sh image pyproject.toml cdcwatch spark_listeners \
                  | LC_ALL=C sort | while read -r file; do if [ -f "$file" ]; then echo "$file"; cat "$file"; fi; done) \
              | sha256sum | cut -c1-12)
image=localhost/cdcwatch:$version
hashed=$image-$inputs_hash

size() {
  local bytes
  bytes=$(podman image inspect --format '{{.Size}}' "$hashed")
  echo "build-image: $hashed is $((bytes / 1000000)) MB"
}

if [ "${CDCWATCH_IMAGE_REBUILD:-0}" != 1 ] && podman image exists "$hashed"; then
  podman tag "$hashed" "$image"
  echo "build-image: $hashed exists (same inputs): not rebuilt"
  size
  echo "$hashed"
  exit 0
fi

work=$(mktemp -d /tmp/cdcwatch-image-XXXXXX)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

if ! podman image exists "$base"; then
  echo "build-image: $base from Debian $suite with mmdebstrap ($packages)"
  mmdebstrap --quiet "${base_options[@]}" "$suite" "$work/rootfs.tar" "${mirrors[@]}"
  podman import --quiet --message "Debian $suite minbase: $packages" "$work/rootfs.tar" "$base" >/dev/null
  rm -f "$work/rootfs.tar"
fi

echo "build-image: the cdcwatch $version wheel"
mkdir "$work/wheel"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$work/wheel" . >/dev/null

flags_text=$(image/podman-flags.sh "$base")
mapfile -t flags <<<"$flags_text"
[ -n "${flags[*]}" ] || flags=()
mounts=(--volume "$work/wheel:/wheel:ro")
for file in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do  # the host's way to PyPI, where it has one
  if [ -f "$file" ]; then mounts+=(--volume "$file:$file:ro"); fi
done
# org.opencontainers.image.source: CDCWATCH_SOURCE_URL, else the git remote `origin` when it is an http(s) URL
source_url=${CDCWATCH_SOURCE_URL:-$(git remote get-url origin 2>/dev/null || true)}
source_label=()
case "$source_url" in
  http://*|https://*) source_label=(--label "org.opencontainers.image.source=$source_url") ;;
esac
echo "build-image: $hashed${flags[*]:+ (podman flags on this host: ${flags[*]})}"
# --no-cache: the wheel is a mounted volume, which a cached layer would not see change
podman build --quiet --no-cache --network host "${flags[@]}" --file image/Containerfile --build-arg "BASE=$base" \
  "${mounts[@]}" \
  --label "org.opencontainers.image.title=cdcwatch" --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.licenses=Apache-2.0" \
  --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  --label "org.opencontainers.image.description=Prometheus exporter for change-data-capture pipelines" \
  --label "io.cdcwatch.inputs=$inputs_hash" "${source_label[@]+"${source_label[@]}"}" \
  --tag "$hashed" --tag "$image" image >/dev/null
echo "build-image: built in $((SECONDS - started)) s"
size
echo "$hashed"
