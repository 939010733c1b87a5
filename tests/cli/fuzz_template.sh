#!/usr/bin/env bash
# Builds tests/fuzz/fuzz_template.cpp with libFuzzer + AddressSanitizer and runs it for a bounded time, seeded with
# the real chat templates. Skips (exit 0) when clang is absent. Usage: fuzz_template.sh [seedling-binary] [data-dir]
# (the arguments ctest passes; only the data dir is used). FUZZ_SECONDS overrides the 20 s budget.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
data="${2:-$repo/tests/data}"
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz_template: clang++ not found, skipping"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$repo/src" "$repo/tests/fuzz/fuzz_template.cpp" "$repo"/src/template/*.cpp \
  $(pkg-config --cflags --libs libutf8proc) -lfmt -o "$work/fuzz_template"
mkdir -p "$work/corpus"
cp "$data"/templates/*.jinja "$work/corpus/" 2>/dev/null || true
artifacts="${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}}"
"$work/fuzz_template" -artifact_prefix="$artifacts/fuzz_template-" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  "$work/corpus" > "$work/log" 2>&1 || { tail -n 40 "$work/log"; echo "fuzz_template: FAILED (input saved under $artifacts)"; exit 1; }
tail -n 3 "$work/log"
echo "fuzz_template: no crash in ${FUZZ_SECONDS:-20} s"
