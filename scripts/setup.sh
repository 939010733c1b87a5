#!/usr/bin/env bash
# Installs the Debian packages Seedling builds and tests with, and the npm packages of the server tests
# (tests/server, from its package-lock.json). Safe to run again: it installs only what is missing or changed.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config clang clang-format clang-tidy xz-utils
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libpcre2-dev libutf8proc-dev libhwy-dev liburing-dev libxxhash-dev ccache
  nodejs chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The server tests' npm packages: `npm ci` again only when package-lock.json changed since the last install.
server_tests="$(dirname "$0")/../tests/server"
if ! cmp -s "$server_tests/package-lock.json" "$server_tests/node_modules/.seedling-installed-lock"; then
  echo "setup: npm ci in tests/server"
  (cd "$server_tests" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$server_tests/package-lock.json" "$server_tests/node_modules/.seedling-installed-lock"
fi
