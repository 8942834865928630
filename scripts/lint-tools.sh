#!/usr/bin/env bash
# Installs the pinned tools the unit tests run into .cdcwatch/go/bin: on the generated mixin, pint (Prometheus
# rules, github.com/cloudflare/pint) and Grafana's dashboard-linter; on the Helm chart (charts/cdcwatch), helm; for the
# release's round trip (scripts/release.sh against a local registry), go-containerregistry's registry and oras.
# Installs only what is missing or pinned differently: a second run downloads nothing.
#
# `go install MODULE@VERSION` comes first. A Go module proxy that serves the pinned versions but not
# their version lists (or a checksum database it cannot reach) makes `go install` fail; then the pinned
# module is downloaded, checked against the hash recorded below, and built from its own go.mod/go.sum.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOBIN="$PWD/.cdcwatch/go/bin" GOPATH="$PWD/.cdcwatch/go/path" GOFLAGS=-modcacherw GOTOOLCHAIN=local
mkdir -p "$GOBIN"

# name  module  version  package (in the module)  go.sum hash of the module
TOOLS=(
  "pint github.com/cloudflare/pint v0.86.0 ./cmd/pint h1:54htp0CAXcS3G56LP03A0D9Kjftj4GnCIl5hF4G2SLs="
  "dashboard-linter github.com/grafana/dashboard-linter v0.0.0-20241224134444-1765d94aec4a . h1:wpyAYX8+Rqu0LIEE7zXBR/qjBH4t0yXvqlRGa1wD5rg="
  "helm helm.sh/helm/v3 v3.22.0 ./cmd/helm h1:n1if5iQgHYsujPAcO5oonH/KiSNUmqmUF0iGVjSF3AU="
  "registry github.com/google/go-containerregistry v0.22.1 ./cmd/registry h1:RZuuSYhTvlDvtsK+NkutoCZ//C0X2ebLK8X8l3ULs84="
  "oras oras.land/oras v1.3.6 ./cmd/oras h1:Lhsfr2tQLjsu/+CJZp6vYatwKT+62fbIUTlp4lUrfOA="
)

install() {
  local name=$1 module=$2 version=$3 package=$4 sum=$5
  local stamp="$GOBIN/$name.version"
  if [ -x "$GOBIN/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$module@$version" ]; then
    return
  fi
  echo "lint-tools: installing $name ($module@$version)"
  local path=$module
  [ "$package" = . ] || path="$module/${package#./}"
  if ! go install "$path@$version" 2>/dev/null; then
    local info dir got
    info=$(GONOSUMDB="$module" go mod download -json "$module@$version")
    dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")
    got=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")
    if [ "$got" != "$sum" ]; then
      echo "lint-tools: $module@$version has hash $got, expected $sum" >&2
      exit 1
    fi
    (cd "$dir" && go build -trimpath -o "$GOBIN/$name" "$package")
  fi
  echo "$module@$version" >"$stamp"
}

for tool in "${TOOLS[@]}"; do
  # shellcheck disable=SC2086
  install $tool
done
echo "lint-tools: ready ($GOBIN)"
