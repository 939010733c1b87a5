#!/usr/bin/env bash
# Installs the Debian packages Seedling builds and tests with. Safe to run again: it installs only what is missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang clang-format clang-tidy xz-utils
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libpcre2-dev libutf8proc-dev libhwy-dev liburing-dev libxxhash-dev ccache
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
