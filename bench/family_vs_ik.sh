#!/usr/bin/env bash
# bench/family_vs_ik.sh - the GPU side-by-sides of issues 21, 23 and 24 in one command: writes one family's benchmark
# shape for each engine (random weights, the same shape and bits a weight) and runs bench/gpu_vs_ik.sh on the pair,
# all in VRAM and with a VRAM cache against ik's `-ot exps=CPU`.
#
# Usage: bench/family_vs_ik.sh FAMILY IK_BENCH IK_SRC WORK [RUNS]
#   FAMILY    gpt-oss-20b      24 layers, hidden 2880, 32 experts top-4, MXFP4 experts as released, dense bf16: one
#                              Hugging Face folder (Seedling) and its GGUF (ik), the same bits
#                              (tools/gpt_oss_bench_model.py, which needs torch: the GPU machine); cache 4G (issue 21)
#             qwen3.5-35b-a3b  40 layers (3 of 4 Gated DeltaNet), 256 experts top-8 of width 512 and a shared
#                              expert at 4.5 bits a weight: ik's Q4_0 everywhere (llama-quantize --pure from the
#                              q4_g32 pack's Q4_1 GGUF), which both engines read (SEEDLING_READS=q4_g64: Seedling
#                              reads its own q4_g64 pack instead, the same shape and bits but not the same weights);
#                              cache 8G (issue 23)
#             deepseek-v3      LAYERS (default 6: the preset's 3 dense lead layers, then 3 MoE) of DeepSeek-V3's
#                              shape (hidden 7168, MLA 1536/512/64, 256 experts top-8 of 2048, a shared expert), 4.5
#                              bits as above; cache a third of the experts' bytes (issue 24)
#   IK_BENCH  ik_llama.cpp's llama-bench built with -DGGML_CUDA=ON (bench/ik_mmq_trim.sh shortens that build); its
#             llama-quantize is looked for beside it, else IK_QUANTIZE
#   IK_SRC    its source tree (gguf-py for the converters)
#   WORK      a folder for the models (made once, reused; KEEP_SOURCE=0 deletes what only served to make them: the
#             q4_g32 pack and Q4_1 GGUF once requantized, gpt-oss's Hugging Face folder once packed and converted;
#             DeepSeek's 6 layers are about 21-24 GB a file)
#   RUNS      rounds of bench/gpu_vs_ik.sh (default 2)
# Environment: LAYERS, EXPERTS, VOCAB (smaller shapes: checks of this script), CACHE (instead of the family's; none:
#   no cache rows), SEEDLING_READS (qwen3.5 and deepseek: gguf, the default, or q4_g64), PREP_ONLY=1 (make the
#   models and stop: IK_BENCH need not exist yet), and
#   bench/gpu_vs_ik.sh's (P, N, CTX, REPEATS, THREADS, DEVICE, NGL, SEEDLING, OT, CACHE_FLAGS, LOG).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: bench/family_vs_ik.sh gpt-oss-20b|qwen3.5-35b-a3b|deepseek-v3 IK_BENCH IK_SRC WORK [RUNS]"
family=${1:?$usage}
ik=${2:?$usage}
src=${3:?$usage}
work=${4:?$usage}
runs=${5:-2}
seedling=${SEEDLING:-$root/build/seedling}
python=${PYTHON:-python3}
quantize=${IK_QUANTIZE:-$(dirname "$ik")/llama-quantize}
mkdir -p "$work"

# synth's shape options beyond the preset (LAYERS, EXPERTS, VOCAB), as one argument list.
shape=()
[ -n "${LAYERS:-}" ] && shape+=(--layers "$LAYERS")
[ -n "${EXPERTS:-}" ] && shape+=(--experts "$EXPERTS")
[ -n "${VOCAB:-}" ] && shape+=(--vocab "$VOCAB")
tag=$family${LAYERS:+-l$LAYERS}${EXPERTS:+-e$EXPERTS}${VOCAB:+-v$VOCAB}

# The 4.5-bit models of a synth preset: ik's Q4_0 GGUF requantized (--pure, head and embedding too) from the Q4_1
# GGUF of a q4_g32 pack (tools/packed_to_gguf.py: q4_g32 is Q4_1 byte for byte), and what Seedling reads (seed_model):
# that same GGUF, or with SEEDLING_READS=q4_g64 its own q4_g64 pack.
synth_pair() {
  local preset=$1
  ik_gguf=$work/$tag-q4_0.gguf
  case ${SEEDLING_READS:-gguf} in
  gguf) seed_model=$ik_gguf reads="both engines read ik's Q4_0 GGUF (the same weights)" ;;
  q4_g64)
    seed_model=$work/$tag-q4_g64
    reads="Seedling q4_g64 against ik Q4_0 (the same shape and bits, not the same weights)"
    [ -f "$seed_model/manifest.json" ] ||
      "$seedling" synth --preset "$preset" "${shape[@]}" --packed q4_g64 --dense q4_g64 -o "$seed_model" --force 2>&1 |
      tail -n 1
    ;;
  *) echo "family_vs_ik.sh: SEEDLING_READS is gguf or q4_g64, not '$SEEDLING_READS'" >&2; exit 2 ;;
  esac
  if [ ! -f "$ik_gguf" ]; then
    [ -x "$quantize" ] || { echo "family_vs_ik.sh: no llama-quantize at $quantize (set IK_QUANTIZE)" >&2; exit 2; }
    local pack=$work/$tag-q4_g32 q4_1=$work/$tag-q4_1.gguf
    [ -f "$q4_1" ] || {
      [ -f "$pack/manifest.json" ] ||
        "$seedling" synth --preset "$preset" "${shape[@]}" --packed q4_g32 --dense q4_g32 -o "$pack" --force 2>&1 |
        tail -n 1
      "$python" "$root/tools/packed_to_gguf.py" "$pack" "$q4_1" --gguf-py "$src/gguf-py"
      [ "${KEEP_SOURCE:-1}" = 1 ] || rm -rf "$pack"
    }
    "$quantize" --allow-requantize --pure --output-tensor-type q4_0 --token-embedding-type q4_0 "$q4_1" "$ik_gguf" \
      Q4_0 >"$work/$tag-quantize.log" 2>&1 || { tail -n 20 "$work/$tag-quantize.log" >&2; exit 1; }
    [ "${KEEP_SOURCE:-1}" = 1 ] || rm -f "$q4_1"
  fi
}

# A third of the routed experts' bytes of what Seedling reads: a pack's experts-*.bin files, or a GGUF's *_exps tensors.
third_of_experts() {
  local bytes
  if [ -d "$1" ]; then
    bytes=$(cat "$1"/experts-*.bin | wc -c)
  else
    bytes=$("$python" - "$1" "$src/gguf-py" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import gguf
print(sum(int(t.n_bytes) for t in gguf.GGUFReader(sys.argv[1]).tensors if "_exps." in t.name))
PY
    )
  fi
  echo "$((bytes / 3 / 1048576))M"
}

case "$family" in
gpt-oss-20b)
  hf=$work/$tag-hf
  ik_gguf=$work/$tag.gguf
  args=()
  [ -n "${LAYERS:-}" ] && args+=(--layers "$LAYERS")
  [ -n "${EXPERTS:-}" ] && args+=(--experts "$EXPERTS")
  [ -n "${VOCAB:-}" ] && args+=(--vocab "$VOCAB")
  [ -f "$hf/config.json" ] || "$python" "$root/tools/gpt_oss_bench_model.py" make "$hf" "${args[@]}"
  [ -f "$ik_gguf" ] || "$python" "$root/tools/gpt_oss_bench_model.py" gguf "$hf" "$ik_gguf" --gguf-py "$src/gguf-py"
  seed_model=$work/$tag-pack  # experts kept as released (mxfp4), dense as stored: as 2026-12-01's run
  [ -f "$seed_model/manifest.json" ] || "$seedling" pack -m "$hf" -o "$seed_model" --experts mxfp4 2>&1 | tail -n 1
  [ "${KEEP_SOURCE:-1}" = 1 ] || rm -rf "$hf"
  cache=${CACHE:-4G}
  what="MXFP4 experts as released and bf16 dense in both (the same bits)"
  ;;
qwen3.5-35b-a3b)
  synth_pair qwen3.5-35b-a3b
  cache=${CACHE:-8G}
  what="4.5 bits a weight: $reads"
  ;;
deepseek-v3)
  [ -n "${LAYERS:-}" ] || { LAYERS=6; shape+=(--layers 6); tag=$tag-l6; }
  synth_pair deepseek-v3
  cache=${CACHE:-$(third_of_experts "$seed_model")}
  what="4.5 bits a weight: $reads; $LAYERS layers"
  ;;
*)
  echo "$usage" >&2
  exit 2
  ;;
esac

if [ "${PREP_ONLY:-0}" = 1 ]; then
  echo "family $family: models ready ($seed_model, $ik_gguf)"
  exit 0
fi
[ "$cache" = none ] && cache=  # resident rows only (a check on the CPU: DEVICE=cpu NGL=0)
echo "family $family: $what; VRAM cache ${cache:-none}"
CACHE=$cache SEEDLING=$seedling "$root/bench/gpu_vs_ik.sh" "$ik" "$seed_model" "$ik_gguf" "$runs"
