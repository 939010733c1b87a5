#!/usr/bin/env bash
# tools/cuda_tests.sh - the CUDA tests, on a machine with a GPU: the kernel and forward tests (cuda_tests), then the
# command line with --device cuda against --device cpu on every tiny checkpoint (same greedy ids, logits within
# 2e-2) and the clear errors. On a machine without a GPU the gtests skip and this script stops, saying so.
#
# Usage: tools/cuda_tests.sh [BUILD_DIR]     (default: build)
# Builds seedling and cuda_tests in BUILD_DIR first, unless SEEDLING_NO_BUILD=1 (binaries carried to a GPU machine
# that lacks the -dev libraries; then BUILD_DIR holds seedling and tests/cuda_tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ -z "${SEEDLING_NO_BUILD:-}" ]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
  ninja -C "$build" seedling cuda_tests
fi
bin=$build/seedling
models=$root/tests/data/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
"$bin" info -m "$models/qwen3_moe_a/hf" | sed -n '/^devices/,$p'
if ! "$bin" info -m "$models/qwen3_moe_a/hf" | grep -q "cuda:0"; then
  echo "no CUDA device here: nothing to run"
  exit 1
fi

status=0
"$build/tests/cuda_tests" >"$tmp/gtest" 2>&1 || status=$?
grep -v '^\[ *\(OK\|RUN\) ' "$tmp/gtest" | grep -v '^$' || true
[ "$status" = 0 ] || { echo "FAIL cuda_tests"; exit 1; }
echo "ok   cuda_tests: $(grep -c '^\[ *OK ' "$tmp/gtest" || true) tests passed"

for m in qwen3_moe_a qwen3_moe_b mixtral_a mixtral_b; do
  ids=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'])))" \
    "$models/$m/reference.json")
  cpu=$("$bin" run -m "$models/$m/hf" --ids "$ids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
  gpu=$("$bin" run -m "$models/$m/hf" --ids "$ids" -n 12 --ignore-eos --print-ids --device cuda 2>/dev/null | tail -n 1)
  [ "$cpu" = "$gpu" ] || { echo "FAIL $m: greedy ids cpu $cpu, cuda $gpu"; exit 1; }
  "$bin" logits -m "$models/$m/hub" --ids "$ids" -o "$tmp/cpu.f32" 2>/dev/null
  "$bin" logits -m "$models/$m/hub" --ids "$ids" -o "$tmp/gpu.f32" --device cuda 2>/dev/null
  "$bin" logits -m "$models/$m/hub" --ids "$ids" -o "$tmp/gpu_min.f32" --device cuda --vram-budget 1 2>"$tmp/err" &&
    { echo "FAIL $m: a 1-byte VRAM budget was accepted"; exit 1; }
  grep -q "vram-budget" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  python3 - "$tmp/cpu.f32" "$tmp/gpu.f32" "$m" <<'PY'
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
n = len(a) // 4
err = max(abs(x - y) for x, y in zip(struct.unpack('<%df' % n, a), struct.unpack('<%df' % n, b)))
assert err <= 2e-2, err
print("ok   %-12s cuda greedy ids = cpu; logits max |cuda - cpu| %.2e; 1-byte --vram-budget refused" % (sys.argv[3], err))
PY
done
echo "ok   all CUDA tests"
