#!/usr/bin/env sh
# A Debian 12 (bookworm) base image built from Debian's own packages, for building Footnote's
# image where no container registry is reachable (an air-gapped or registry-less network):
#
#   scripts/debian-base.sh [IMAGE] [MIRROR]
#   docker build --build-arg BASE=localhost/debian:bookworm -t footnote .
#
# IMAGE   the tag to import it as (default localhost/debian:bookworm)
# MIRROR  a Debian mirror (default http://deb.debian.org/debian; any apt mirror of the network)
# ENGINE  podman or docker (default: whichever is installed, podman first)
# Needs root (debootstrap) and about 2 minutes. Python 3.11 is bookworm's python3.
set -eu
IMAGE=${1:-localhost/debian:bookworm}
MIRROR=${2:-http://deb.debian.org/debian}
ENGINE=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$ENGINE" ] || { echo "debian-base: need podman or docker" >&2; exit 1; }
command -v debootstrap >/dev/null 2>&1 || { echo "debian-base: need debootstrap (apt-get install debootstrap)" >&2; exit 1; }
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
echo "debian-base: debootstrap bookworm from $MIRROR" >&2
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >/dev/null
# apt in the image reads the same mirror.
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$MIRROR" "$MIRROR" >"$ROOT/etc/apt/sources.list"
rm -rf "$ROOT/var/cache/apt/archives/"*.deb "$ROOT/var/lib/apt/lists/"*
tar -C "$ROOT" -c . | "$ENGINE" import --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "debian-base: $IMAGE ($("$ENGINE" image inspect --format '{{.Size}}' "$IMAGE") bytes)" >&2
