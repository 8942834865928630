#!/usr/bin/env bash
# Prints the flags `podman run` and `podman build` need on this host to run IMAGE (the first argument), one
# word a line: none where a plain run works. Where it fails (crun on a host with cgroups in hybrid mode, or a
# refused setrlimit), runc with the cgroupfs manager and low explicit ulimits are tried. CDCWATCH_PODMAN_FLAGS,
# when set (even empty), is used as is without probing.
set -euo pipefail
image=${1:?usage: image/podman-flags.sh IMAGE}
if [ -n "${CDCWATCH_PODMAN_FLAGS+set}" ]; then
  printf '%s\n' ${CDCWATCH_PODMAN_FLAGS}
  exit 0
fi
fallback=(--runtime runc --cgroup-manager=cgroupfs --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
if plain=$(podman run --rm --network host --entrypoint true "$image" 2>&1); then
  exit 0
fi
if podman run --rm --network host "${fallback[@]}" --entrypoint true "$image" >/dev/null 2>&1; then
  printf '%s\n' "${fallback[@]}"
  exit 0
fi
echo "podman cannot run $image, neither plainly nor with ${fallback[*]}:" >&2
echo "$plain" >&2
echo "set CDCWATCH_PODMAN_FLAGS to the flags this host needs" >&2
exit 1
