#!/usr/bin/env sh
# The system programs the tests drive for real: Debian's chromium and its driver
# (the citation viewer, through selenium) and tesseract with English data (OCR).
# `make test` (and so CI, which runs exactly `make test`) calls this first.
#
# Installs whatever is missing with apt-get: directly as root, through sudo when it
# is there; otherwise stops with the list of packages to install.
set -eu
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
command -v tesseract >/dev/null 2>&1 || missing="$missing tesseract-ocr tesseract-ocr-eng"
[ -z "$missing" ] && exit 0

need() {
  echo "The tests need these system packages, which are not installed:$missing" >&2
  echo "$1" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 \
  || need "No apt-get here: install chromium, chromedriver and tesseract (with English data) with your package manager."
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  need "Install them as root: apt-get install$missing"
fi
echo "Installing system packages for the tests:$missing" >&2
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # one word per package; env: sudo would drop DEBIAN_FRONTEND
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
