#!/usr/bin/env bash
# bench/cpu_vs_ik.sh - CPU decode and prefill, Seedling against ik_llama.cpp on the same bits, interleaved.
#
# Writes a Qwen3-30B-A3B-shaped model once as a Seedling packed folder (experts and dense q4_g32) and once as a GGUF
# (tools/packed_to_gguf.py: q4_g32 is ggml's Q4_1 byte for byte, so both engines read the same 5.0-bit weights). With
# BITS=4.5 the engines read 4.5 bits a weight in their own formats instead: Seedling q4_g64 (a pack of its own random
# weights) against ik's Q4_0 (that GGUF requantized by ik's llama-quantize; IK_QUANTIZE names it). With
# BITS=q4_k_m both engines read one file, that GGUF requantized to Q4_K_M by llama-quantize (Seedling reads the GGUF
# as stored). Then for each thread count runs the two engines turn about, RUNS times each: `seedling bench` (its
# int8-activation path and its float path; DOTS picks) and ik's `llama-bench -fa 1 -fmoe 1`. Decode is the N tokens
# after a P-token prompt on both sides (ik: `-gp P,N`); prefill is the P-token prompt. Prints each run and, per
# thread count, the medians and ratios.
#
# Usage: bench/cpu_vs_ik.sh IK_SRC WORK [LAYERS] [THREADS] [RUNS]
#   IK_SRC   ik_llama.cpp source (../shared/tools/peer_source.sh exports one from a fetched snapshot); its CPU
#            llama-bench is built in IK_SRC-cpu unless IK_BENCH names a built binary
#   WORK     a folder for the two models (about 0.5 GB a layer; reused when present)
#   LAYERS   default 4 (48 is the full shape); THREADS default "1 2"; RUNS default 3
# Environment: SEEDLING (default build/seedling), SEEDLING_BEFORE (a second binary, run turn about with it; its
#   rows are before-int8 and before-float), P (prompt, default 64), N (decode tokens, default 32),
#   PYTHON (with numpy; default python3), BITS (5.0, the default, 4.5 or q4_k_m), IK_BENCH, IK_QUANTIZE,
#   WARMUP (Seedling's untimed passes before each timed one, `bench --warmup`; default 1, as llama-bench warms up;
#   0 before 2026-12-05),
#   DOTS (Seedling's `--cpu-dot` paths to run, default "int8 float"; "int8" alone halves the time),
#   KEEP_SOURCE (default 1; 0 deletes the q4_g32 pack and Q4_1 GGUF once requantized: 48 layers fit a 64 GB disk),
#   LOG (a file to append each Seedling run's whole output to: its read bandwidth, bytes per token),
#   PROFILE (set: Seedling's runs add `bench --profile`, the decode's time by parallel region, into LOG),
#   PREP_ONLY=1 (make the models for BITS and stop).
# Seedling's rows end with the share of the read bandwidth its decode moved (`bench` measures both in each run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:?usage: bench/cpu_vs_ik.sh IK_SRC WORK [LAYERS] [THREADS] [RUNS]}
work=${2:?usage: bench/cpu_vs_ik.sh IK_SRC WORK [LAYERS] [THREADS] [RUNS]}
layers=${3:-4}
threads=${4:-"1 2"}
runs=${5:-3}
seedling=${SEEDLING:-$root/build/seedling}
P=${P:-64}
N=${N:-32}
python=${PYTHON:-python3}
mkdir -p "$work"

ik=${IK_BENCH:-}
if [ -z "$ik" ]; then
  ik=$src-cpu/bin/llama-bench
  if [ ! -x "$ik" ]; then
    cmake -S "$src" -B "$src-cpu" -G Ninja -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$src-cpu" --target llama-bench
  fi
fi
pack=$work/qwen3-$layers-q4_g32
gguf=$work/qwen3-$layers-q4_1.gguf
# The q4_g32 pack and its Q4_1 GGUF: the 5.0-bit pair, and the source llama-quantize requantizes for the other two.
# Made only when a file that needs them is missing (48 layers: about 19 GB each; KEEP_SOURCE=0 deletes them after).
make_source() {
  [ -f "$pack/manifest.json" ] || [ -f "$gguf" ] ||
    "$seedling" synth --preset qwen3-30b-a3b --layers "$layers" --packed q4_g32 --dense q4_g32 -o "$pack" 2>&1 | tail -n 1
  [ -f "$gguf" ] || "$python" "$root/tools/packed_to_gguf.py" "$pack" "$gguf" --gguf-py "$src/gguf-py"
  [ "${KEEP_SOURCE:-1}" = 1 ] || rm -rf "$pack"
}
drop_source() { [ "${KEEP_SOURCE:-1}" = 1 ] || rm -rf "$pack" "$gguf"; }
what="q4_g32 = Q4_1 everywhere (the same bits)"
case "${BITS:-5.0}" in
5.0) make_source ;;
4.5)
  quantize=${IK_QUANTIZE:-$(dirname "$ik")/llama-quantize}
  [ -x "$quantize" ] || cmake --build "$src-cpu" --target llama-quantize
  q4_0=$work/qwen3-$layers-q4_0.gguf
  # --pure and the head and embedding types: every matrix Q4_0, as the pack is q4_g64 everywhere (by default
  # llama-quantize would keep the head in Q6_K, more bytes than the pack reads)
  if [ ! -f "$q4_0" ]; then
    make_source
    "$quantize" --allow-requantize --pure --output-tensor-type q4_0 --token-embedding-type q4_0 \
      "$gguf" "$q4_0" Q4_0 >/dev/null 2>&1
    drop_source
  fi
  pack=$work/qwen3-$layers-q4_g64
  [ -f "$pack/manifest.json" ] ||
    "$seedling" synth --preset qwen3-30b-a3b --layers "$layers" --packed q4_g64 --dense q4_g64 -o "$pack" 2>&1 | tail -n 1
  gguf=$q4_0
  what="Seedling q4_g64 against ik Q4_0, 4.5 bits a weight each (same shape, not the same weights)"
  ;;
q4_k_m)
  quantize=${IK_QUANTIZE:-$(dirname "$ik")/llama-quantize}
  [ -x "$quantize" ] || cmake --build "$src-cpu" --target llama-quantize
  q4_k_m=$work/qwen3-$layers-q4_k_m.gguf
  if [ ! -f "$q4_k_m" ]; then
    make_source
    "$quantize" --allow-requantize "$gguf" "$q4_k_m" Q4_K_M >/dev/null 2>&1
    drop_source
  fi
  pack=$q4_k_m
  gguf=$q4_k_m
  what="the same Q4_K_M file (llama-quantize's mixture: Q4_K, and Q6_K for some down projections and the head)"
  ;;
*)
  echo "BITS must be 5.0, 4.5 or q4_k_m, got $BITS" >&2
  exit 2
  ;;
esac
if [ "${PREP_ONLY:-}" = 1 ]; then
  echo "models ready: $pack, $gguf"
  exit 0
fi

echo "seedling $(git -C "$root" log -1 --format=%h); ik $(git -C "$src" log -1 --format=%h 2>/dev/null || echo "$src")"
echo "model: $layers layers of Qwen3-30B-A3B's shape, $what; prompt $P, decode $N; $(nproc) cores"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
# SEEDLING_BEFORE: a second binary (the build before a change), run turn about with SEEDLING on both paths.
# Seedling warms up as llama-bench does (one untimed pass; WARMUP=0 for binaries older than `bench --warmup`).
warmup_flag=
[ "${WARMUP:-1}" != 0 ] && warmup_flag="--warmup=${WARMUP:-1}"
arms=
for dot in ${DOTS:-int8 float}; do
  [ -n "${SEEDLING_BEFORE:-}" ] && arms="$arms before-$dot"
  arms="$arms seedling-$dot"
done
[ -n "${SEEDLING_BEFORE:-}" ] && echo "before: $SEEDLING_BEFORE"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for t in $threads; do
  for r in $(seq "$runs"); do
    for arm in $arms; do
      bin=$seedling
      [ "${arm%%-*}" = before ] && bin=$SEEDLING_BEFORE
      out=$(SEEDLING_CPU_DOT=${arm#*-} "$bin" bench -m "$pack" -t "$t" --prompt-tokens "$P" -n "$N" --repeats 1 \
        ${warmup_flag:+"$warmup_flag"} ${PROFILE:+--profile} 2>&1)
      pre=$(echo "$out" | awk '/^prefill:/ {print $2}')
      dec=$(echo "$out" | awk '/^decode:/ {print $2}')
      [ -n "${LOG:-}" ] && echo "$out" >>"$LOG"
      bw=$(echo "$out" | sed -n 's/.*= \([0-9.]*%\) of the measured read bandwidth.*/\1/p')
      echo "t=$t run=$r $arm prefill $pre decode $dec load $(cut -d' ' -f1 /proc/loadavg) bandwidth ${bw:-?}" |
        tee -a "$results"
    done
    out=$("$ik" -m "$gguf" -t "$t" -fa 1 -fmoe 1 -p "$P" -n 0 -gp "$P,$N" -r 1 -o csv 2>/dev/null)
    pre=$(echo "$out" | "$python" "$root/bench/ik_rates.py")
    echo "t=$t run=$r ik prefill ${pre% *} decode ${pre#* } load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$results"
  done
done
"$python" - "$results" <<'PY'
import collections, statistics, sys
data = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    data[(f[0], f[2])].append((float(f[4]), float(f[6])))
print("\n| threads | engine | prefill tok/s (median) | decode tok/s (median) | prefill / ik | decode / ik |")
print("| --- | --- | --- | --- | --- | --- |")
for t in sorted({k[0] for k in data}, key=lambda s: int(s[2:])):
    ik = [statistics.median(v) for v in zip(*data[(t, "ik")])]
    for eng in sorted({k[1] for k in data if k[0] == t}, key=lambda e: (e == "ik", e.split("-")[-1], e)):
        pre, dec = (statistics.median(v) for v in zip(*data[(t, eng)]))
        print("| %s | %s | %.2f | %.2f | %.2f | %.2f |" % (t[2:], eng, pre, dec, pre / ik[0], dec / ik[1]))
PY
