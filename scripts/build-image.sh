#!/usr/bin/env sh
# Build Footnote's image with podman or docker, from a base of our choosing:
#
#   scripts/build-image.sh [IMAGE] [BASE]
#
# IMAGE  the tag (default localhost/footnote:latest)
# BASE   python:3.11-slim (needs a container registry), or localhost/debian:bookworm (the
#        default: built first by scripts/debian-base.sh from Debian's packages when missing)
# WHEELS a folder holding the CPU-only torch wheel (torch-2.13.0+cpu…whl), mounted for the
#        build only, for a network that cannot reach download.pytorch.org (default: /opt/wheels
#        when it holds one)
# CERT   a CA bundle the network's TLS needs, mounted for the build only and never copied
#        into the image (default: PIP_CERT, else pip's configured `global.cert`, if any)
# The build reaches Debian's and PyPI's registries (--network=host); the image it makes
# fetches nothing when it runs.
set -eu
cd "$(dirname "$0")/.."
IMAGE=${1:-localhost/footnote:latest}
BASE=${2:-localhost/debian:bookworm}
ENGINE=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$ENGINE" ] || { echo "build-image: need podman or docker" >&2; exit 1; }
if [ "$BASE" = "localhost/debian:bookworm" ] && ! "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then
  scripts/debian-base.sh "$BASE"
fi
set -- --network=host --build-arg "BASE=$BASE"
[ "$(basename "$ENGINE")" = podman ] && set -- "$@" --format docker  # HEALTHCHECK is a docker-format field
WHEELS=${WHEELS:-/opt/wheels}
if ls "$WHEELS"/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then
  set -- "$@" --volume "$WHEELS:/run/wheels:ro" --build-arg PIP_FIND_LINKS=/run/wheels --build-arg TORCH_INDEX=
fi
CERT=${CERT:-${PIP_CERT:-$(python3 -m pip config list 2>/dev/null | sed -n "s/^global\.cert='\(.*\)'\$/\1/p" | head -n 1)}}
if [ -n "$CERT" ] && [ -f "$CERT" ]; then
  set -- "$@" --volume "$CERT:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt
fi
start=$(date +%s)
"$ENGINE" build "$@" -t "$IMAGE" .
echo "build-image: $IMAGE from $BASE in $(( $(date +%s) - start )) s, $("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE") bytes" >&2
