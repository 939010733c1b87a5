# Sourced by the tests/cli/fuzz_*.sh runners: builds one libFuzzer target of tests/fuzz/ through the CMake option
# SEEDLING_FUZZ (tests/fuzz/CMakeLists.txt: clang, -fsanitize=fuzzer,address,undefined, only the sources its parser
# needs) and runs it for a bounded time over its seed corpus, tests/fuzz/corpus/NAME/ (copied: what the run adds is
# thrown away). Skips, exiting 0, when clang cannot link a libFuzzer binary.
# The fuzz build folder is FUZZ_BUILD, else fuzz-build/ beside the seedling binary ctest passes as $1, else
# build-fuzz/ in the repository; it is configured once and shared by the runners (under a lock).
# Environment: FUZZ_SECONDS (default 15) bounds the run; FUZZ_CXX picks the compiler (default clang++);
# FUZZ_ARTIFACTS (default $TMPDIR or /tmp) receives a failing input.
set -euo pipefail
fuzz_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
fuzz_cxx="${FUZZ_CXX:-clang++}"
fuzz_work="$(mktemp -d)"
trap 'rm -rf "$fuzz_work"' EXIT
corpus="$fuzz_work/corpus"
mkdir -p "$corpus"
if [ -n "${FUZZ_BUILD:-}" ]; then
  fuzz_dir="$FUZZ_BUILD"
elif [ -n "${1:-}" ] && [ -d "$(dirname "$1")" ]; then
  fuzz_dir="$(cd "$(dirname "$1")" && pwd)/fuzz-build"
else
  fuzz_dir="$fuzz_root/build-fuzz"
fi

if ! command -v "$fuzz_cxx" >/dev/null 2>&1; then
  echo "SKIP: $fuzz_cxx not installed (apt-get install clang)"; exit 0
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$fuzz_work/probe.cpp"
if ! "$fuzz_cxx" -fsanitize=fuzzer "$fuzz_work/probe.cpp" -o "$fuzz_work/probe" >/dev/null 2>&1; then
  echo "SKIP: $fuzz_cxx cannot link -fsanitize=fuzzer here"; exit 0
fi

# fuzz_build NAME: configures the fuzz build folder when it is not (with the C compiler beside FUZZ_CXX) and builds
# target NAME into $fuzz_dir/fuzz/NAME.
fuzz_build() {
  local name=$1 cc
  cc="$(dirname "$(command -v "$fuzz_cxx")")/$(basename "$fuzz_cxx" | sed 's/clang++/clang/')"
  mkdir -p "$(dirname "$fuzz_dir")"
  echo "$name: building in $fuzz_dir"
  (
    flock 9
    if [ ! -f "$fuzz_dir/build.ninja" ]; then
      cmake -S "$fuzz_root" -B "$fuzz_dir" -G Ninja -DSEEDLING_FUZZ=ON -DSEEDLING_CUDA=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$fuzz_cxx" -DCMAKE_C_COMPILER="$cc" >/dev/null
    fi
    cmake --build "$fuzz_dir" --target "$name" >"$fuzz_work/build.log" 2>&1 || { cat "$fuzz_work/build.log"; exit 1; }
  ) 9>"$fuzz_dir.lock"
}

# fuzz_run NAME: runs $fuzz_dir/fuzz/NAME for FUZZ_SECONDS over tests/fuzz/corpus/NAME plus what the runner put in
# $corpus and the seeds and input length tests/fuzz/targets.txt gives it, with tests/fuzz/NAME.dict and
# tests/fuzz/numbers.dict; on a crash, leak, timeout or sanitizer report prints the log's tail and the input, and fails.
fuzz_run() {
  local name=$1 seconds="${FUZZ_SECONDS:-15}" artifacts="${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}}"
  local max_len seeds
  read -r max_len seeds < <(awk -v n="$name" '$1 == n { print $2, $3 }' "$fuzz_root/tests/fuzz/targets.txt")
  [ -n "$max_len" ] || { echo "FAIL: $name is not listed in tests/fuzz/targets.txt"; exit 1; }
  cp "$fuzz_root/tests/fuzz/corpus/$name"/* "$corpus/" 2>/dev/null || true
  if [ -n "$seeds" ]; then cp "$fuzz_root/$seeds"/* "$corpus/" 2>/dev/null || true; fi
  # libFuzzer takes one dictionary: the target's own words, then the numbers every parser converts.
  cat "$fuzz_root/tests/fuzz/$name.dict" "$fuzz_root/tests/fuzz/numbers.dict" >"$fuzz_work/dict" 2>/dev/null || true
  echo "$name: running for ${seconds}s"
  "$fuzz_dir/fuzz/$name" -artifact_prefix="$fuzz_work/" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -dict="$fuzz_work/dict" -print_final_stats=1 "$corpus" >"$fuzz_work/log" 2>&1 || {
    tail -n 40 "$fuzz_work/log"
    local found
    for found in "$fuzz_work"/crash-* "$fuzz_work"/leak-* "$fuzz_work"/timeout-* "$fuzz_work"/oom-*; do
      [ -e "$found" ] && { echo "input (base64): $(base64 -w0 "$found")"; cp "$found" "$artifacts/$name-${found##*/}"; }
    done
    echo "FAIL: $name found a failing input (copied to $artifacts)"
    exit 1
  }
  grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' "$fuzz_work/log" || true
  echo "$name: no failure in ${seconds}s"
}
