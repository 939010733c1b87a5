# Sourced by the tests/cli/fuzz_*.sh runners: builds one libFuzzer target of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined) from only the sources it needs, and runs it for a bounded time over its seed
# corpus, tests/fuzz/corpus/NAME/ (copied: what the run adds is thrown away). Skips, exiting 0, when clang cannot
# build a libFuzzer binary. Environment: FUZZ_SECONDS (default 15) bounds the run; FUZZ_CXX picks the compiler;
# FUZZ_KEEP=DIR keeps the built binary in DIR (for a long run by hand, docs/results/2026-12-01-fuzzing.md);
# FUZZ_ARTIFACTS (default $TMPDIR or /tmp) receives a failing input.
set -euo pipefail
fuzz_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
fuzz_cxx="${FUZZ_CXX:-clang++}"
fuzz_work="$(mktemp -d)"
trap 'rm -rf "$fuzz_work"' EXIT
corpus="$fuzz_work/corpus"
mkdir -p "$corpus"

if ! command -v "$fuzz_cxx" >/dev/null 2>&1; then
  echo "SKIP: $fuzz_cxx not installed (apt-get install clang)"; exit 0
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$fuzz_work/probe.cpp"
if ! "$fuzz_cxx" -fsanitize=fuzzer "$fuzz_work/probe.cpp" -o "$fuzz_work/probe" >/dev/null 2>&1; then
  echo "SKIP: $fuzz_cxx cannot link -fsanitize=fuzzer here"; exit 0
fi

# What read_model_config needs (model/model_config.cpp and every family's config reader, io/gguf.cpp to refuse a
# GGUF file; with core/mapped_file.cpp, which targets name themselves), for targets that read config.json.
# shellcheck disable=SC2034
families=(src/model/model_config.cpp src/model/config.cpp src/model/family.cpp src/model/glm4_moe.cpp
  src/model/gpt_oss.cpp src/model/mixtral.cpp src/model/olmoe.cpp src/model/qwen2_moe.cpp src/model/qwen3_moe.cpp
  src/model/qwen3_next.cpp src/model/qwen3_5_moe.cpp src/model/deepseek_v3.cpp
  src/io/gguf.cpp)

# fuzz_build NAME ARGS...: compiles tests/fuzz/NAME.cpp with ARGS (sources under src/, given relative to the
# repository root, and libraries) into $fuzz_work/NAME.
fuzz_build() {
  local name=$1 arg
  shift
  local args=()
  for arg in "$@"; do
    case $arg in
      src/*) args+=("$fuzz_root/$arg") ;;
      *) args+=("$arg") ;;
    esac
  done
  echo "$name: building"
  "$fuzz_cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$fuzz_root/src" -I"$fuzz_root/tests/fuzz" "$fuzz_root/tests/fuzz/$name.cpp" "${args[@]}" \
    -o "$fuzz_work/$name"
  if [ -n "${FUZZ_KEEP:-}" ]; then mkdir -p "$FUZZ_KEEP" && cp "$fuzz_work/$name" "$FUZZ_KEEP/"; fi
}

# fuzz_run NAME MAX_LEN: runs $fuzz_work/NAME for FUZZ_SECONDS over tests/fuzz/corpus/NAME plus what the runner put
# in $corpus, with tests/fuzz/NAME.dict and tests/fuzz/numbers.dict; on a crash, leak, timeout or sanitizer report prints the log's tail and the input, and fails.
fuzz_run() {
  local name=$1 max_len=$2 seconds="${FUZZ_SECONDS:-15}" artifacts="${FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}}"
  cp "$fuzz_root/tests/fuzz/corpus/$name"/* "$corpus/" 2>/dev/null || true
  # libFuzzer takes one dictionary: the target's own words, then the numbers every parser converts.
  cat "$fuzz_root/tests/fuzz/$name.dict" "$fuzz_root/tests/fuzz/numbers.dict" >"$fuzz_work/dict" 2>/dev/null || true
  echo "$name: running for ${seconds}s"
  "$fuzz_work/$name" -artifact_prefix="$fuzz_work/" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
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
