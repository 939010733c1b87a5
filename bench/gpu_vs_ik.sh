#!/usr/bin/env bash
# bench/gpu_vs_ik.sh - GPU decode and prefill, Seedling against ik_llama.cpp on the same model, interleaved.
#
# For each of RUNS rounds runs, turn about: `seedling bench --device cuda` with every expert in VRAM and ik's
# `llama-bench -ngl 99 -fa 1 -fmoe 1`; with CACHE set, also Seedling with `--vram-budget CACHE` (a VRAM expert cache
# over pinned host memory) and ik with `-ot OT` (default `exps=CPU`: the experts computed on the CPU). Decode is the
# N tokens after a P-token prompt on both sides (ik: `-gp P,N`); prefill is the P-token prompt. Prints each run and
# the medians, with Seedling's ratio to ik (resident to resident, cache to `-ot`).
#
# Usage: bench/gpu_vs_ik.sh IK_BENCH SEEDLING_MODEL IK_GGUF [RUNS]
#   IK_BENCH        ik's llama-bench built with -DGGML_CUDA=ON (bench/ik_mmq_trim.sh shortens that build)
#   SEEDLING_MODEL  what Seedling reads: the same GGUF, or a packed folder of the same shape and bits
#   IK_GGUF         what ik reads
#   RUNS            rounds, default 2
# Environment: SEEDLING (default build/seedling), SEEDLING_BEFORE (a second binary, run turn about with SEEDLING),
#   CACHE (e.g. 8G; unset: resident rows only), CACHE_FLAGS (more flags of Seedling's cache arm, e.g.
#   "--cpu-misses 0.9 --vram-admit 0"), OT (default exps=CPU), P (default 512), N (default 64),
#   CTX (Seedling's --ctx, default 1024), REPEATS (repeats within one run, both engines; default 3),
#   THREADS (ik's -t, default the machine's cores), DEVICE (Seedling's --device, default cuda), NGL (ik's -ngl,
#   default 99), PYTHON (default python3), LOG (a file to append each run's whole output to).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: bench/gpu_vs_ik.sh IK_BENCH SEEDLING_MODEL IK_GGUF [RUNS]"
ik=${1:?$usage}
model=${2:?$usage}
gguf=${3:?$usage}
runs=${4:-2}
seedling=${SEEDLING:-$root/build/seedling}
P=${P:-512}
N=${N:-64}
repeats=${REPEATS:-3}
threads=${THREADS:-$(nproc)}
python=${PYTHON:-python3}
for f in "$seedling" "$ik"; do
  [ -x "$f" ] || { echo "gpu_vs_ik.sh: $f is not an executable" >&2; exit 2; }
done

# The tree's commit names the source only when the binary was built from it (a carried build may carry changes):
# the binary's path and the start of its sha256 say which one ran.
echo "seedling $(git -C "$root" log -1 --format=%h) tree, binary $seedling (sha256 $(sha256sum "$seedling" | cut -c1-12)); ik: $ik"
echo "models: seedling $model; ik $gguf; prompt $P, decode $N, $repeats repeats a run; ik threads $threads"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
arms="seedling ik"
[ -n "${SEEDLING_BEFORE:-}" ] && arms="before seedling ik"
if [ -n "${CACHE:-}" ]; then
  arms="$arms seedling-cache ik-ot"
  [ -n "${SEEDLING_BEFORE:-}" ] && arms="$arms before-cache"
fi
results=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$results" "$errors"' EXIT
log() { [ -z "${LOG:-}" ] || { echo "== $1"; echo "$2"; } >>"$LOG"; }
for r in $(seq "$runs"); do
  for arm in $arms; do
    case $arm in
    ik | ik-ot)
      flags=()
      [ "$arm" = ik-ot ] && flags=(-ot "${OT:-exps=CPU}")
      out=$("$ik" -m "$gguf" -ngl "${NGL:-99}" -fa 1 -fmoe 1 -t "$threads" "${flags[@]}" -p "$P" -n 0 -gp "$P,$N" \
        -r "$repeats" -o csv 2>"$errors") || { cat "$errors" >&2; exit 1; }
      log "run $r $arm" "$out"
      ts=$(echo "$out" | "$python" "$root/bench/ik_rates.py")
      echo "run=$r $arm prefill ${ts% *} decode ${ts#* }"
      echo "$arm ${ts% *} ${ts#* }" >>"$results"
      ;;
    *)
      bin=$seedling
      [ "${arm%%-*}" = before ] && bin=$SEEDLING_BEFORE
      flags=()
      # shellcheck disable=SC2206 # CACHE_FLAGS is a list of flags, split on spaces
      [ "${arm#*-}" = cache ] && flags=(--vram-budget "$CACHE" ${CACHE_FLAGS:-})
      out=$("$bin" bench -m "$model" --device "${DEVICE:-cuda}" "${flags[@]}" --ctx "${CTX:-1024}" --prompt-tokens "$P" \
        -n "$N" --repeats "$repeats" --warmup 1 2>&1) || { echo "gpu_vs_ik.sh: $arm failed:" >&2; echo "$out" >&2; exit 1; }
      log "run $r $arm" "$out"
      pre=$(echo "$out" | awk '/^prefill:/ {print $2}')
      dec=$(echo "$out" | awk '/^decode:/ {print $2}')
      if [ -z "$pre" ] || [ -z "$dec" ]; then
        echo "gpu_vs_ik.sh: $arm printed no figures:" >&2
        echo "$out" >&2
        exit 1
      fi
      echo "run=$r $arm prefill $pre decode $dec"
      echo "$arm $pre $dec" >>"$results"
      ;;
    esac
  done
done
"$python" - "$results" <<'PY'
import statistics, sys
runs = {}
for arm, pre, dec in (line.split() for line in open(sys.argv[1])):
    runs.setdefault(arm, []).append((float(pre), float(dec)))
med = {arm: [statistics.median(v) for v in zip(*r)] for arm, r in runs.items()}
peer = {"seedling": "ik", "before": "ik", "seedling-cache": "ik-ot", "before-cache": "ik-ot"}
print("\n| engine | prefill tok/s (median) | decode tok/s (median) | prefill / peer | decode / peer | peer |")
print("| --- | --- | --- | --- | --- | --- |")
for arm, (pre, dec) in med.items():
    p = peer.get(arm)
    ratio = ("%.2f | %.2f | %s" % (pre / med[p][0], dec / med[p][1], p)) if p in med else "| | "
    print("| %s | %.2f | %.2f | %s |" % (arm, pre, dec, ratio))
PY
