#!/usr/bin/env bash
# Builds tests/fuzz/fuzz_tokenizer.cpp with clang's libFuzzer (+ASan/UBSan) and runs it for a bounded time.
# Usage: tests/cli/fuzz_tokenizer.sh [seedling-binary] [data-dir]   (arguments are ignored; ctest passes them)
# FUZZ_SECONDS (default 20) bounds the run. Skips, exiting 0, when clang cannot build a libFuzzer binary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${FUZZ_SECONDS:-20}"
CXX="${FUZZ_CXX:-clang++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "SKIP: $CXX not installed (apt-get install clang)"; exit 0
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$work/probe.cpp"
if ! "$CXX" -fsanitize=fuzzer "$work/probe.cpp" -o "$work/probe" >/dev/null 2>&1; then
  echo "SKIP: $CXX cannot link -fsanitize=fuzzer here"; exit 0
fi

flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$root/src")
deps=$(pkg-config --cflags --libs libpcre2-8 libutf8proc fmt)
echo "fuzz_tokenizer: building"
# shellcheck disable=SC2086
"$CXX" "${flags[@]}" "$root"/src/tokenizer/*.cpp "$root/tests/fuzz/fuzz_tokenizer.cpp" $deps -o "$work/fuzz_tokenizer"

corpus="$work/corpus"
mkdir -p "$corpus"
printf '\x01Hello, world! 日本語 😀\n\tcode()' > "$corpus/text"
printf '\x01<|x|> x<|x|>' > "$corpus/special"
printf '\x00{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}' > "$corpus/json"
printf '\x02\x05\x01\x00\x00\xE5\x00\x00\x00\x85\x00\x00\x00' > "$corpus/ids"
echo "fuzz_tokenizer: running for ${seconds}s"
"$work/fuzz_tokenizer" -artifact_prefix="$work/" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 "$corpus" >"$work/log" 2>&1 || {
  tail -n 40 "$work/log"
  for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
    [ -e "$crash" ] && { echo "input (base64): $(base64 -w0 "$crash")"; cp "$crash" "${TMPDIR:-/tmp}/"; }
  done
  echo "FAIL: fuzz_tokenizer found a failing input (copied to ${TMPDIR:-/tmp})"
  exit 1
}
tail -n 8 "$work/log"
echo "fuzz_tokenizer: no failure in ${seconds}s"
