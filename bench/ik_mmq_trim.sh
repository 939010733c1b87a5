#!/usr/bin/env bash
# bench/ik_mmq_trim.sh IK_SRC - make ik_llama.cpp's CUDA build fit a short device lease.
#
# ik's CUDA build spends about half its compile time on MMQ (prompt-size matrix product) instances of ik's own quant
# types, which Seedling cannot read and no side-by-side file holds. This replaces each such template-instance file
# (ggml/src/ggml-cuda/template-instances/mmq-instance-*.cu) with a definition that aborts naming the type, so a file
# that did hold one fails loudly instead of running slowly or wrongly. Every type Seedling reads keeps upstream's
# file as written: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl (which also instantiates MXFP4) iq4_xs.
# Run it on an exported tree (../shared/tools/peer_source.sh), never on a checkout you keep; then build as usual,
# for example with -DCMAKE_CUDA_FLAGS=--split-compile=4 to split the longest files' device compilation, and with
# -DLLAMA_BUILD_TESTS=OFF (the exported tree has no tests/, and configuring stops without it).
set -euo pipefail
d="${1:?usage: ik_mmq_trim.sh IK_SRC}/ggml/src/ggml-cuda/template-instances"
[ -d "$d" ] || { echo "ik_mmq_trim.sh: no $d" >&2; exit 1; }
keep=" q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs "
n=0
for f in "$d"/mmq-instance-*.cu; do
  t=$(basename "$f" .cu)
  t=${t#mmq-instance-}
  id=0
  case "$t" in *_id) t=${t%_id} id=1 ;; esac
  [[ "$keep" == *" $t "* ]] && continue
  types=$(grep -o 'DECL_MMQ_CASE(GGML_TYPE_[A-Z0-9_]*)' "$f" | sed 's/DECL_MMQ_CASE(//; s/)//' || true)
  if [ -z "$types" ]; then
    grep -q 'Seedling.s benchmark build' "$f" && continue  # trimmed before
    echo "ik_mmq_trim.sh: no DECL_MMQ_CASE in $f" >&2
    exit 1
  fi
  if [ $id = 1 ]; then fn=mul_mat_q_case_id at=mmq_args_id; else fn=mul_mat_q_case at=mmq_args; fi
  {
    echo "// Seedling's benchmark build of ik_llama.cpp (bench/ik_mmq_trim.sh): these types' MMQ kernels are not compiled."
    echo '#include "../common.cuh"'
    echo "struct $at;"
    echo "template <ggml_type type> void $fn(ggml_backend_cuda_context &, const $at &, cudaStream_t) {"
    echo "    GGML_ABORT(\"$fn: type %d not compiled in this build (bench/ik_mmq_trim.sh)\", (int) type);"
    echo "}"
    for T in $types; do echo "template void $fn<$T>(ggml_backend_cuda_context &, const $at &, cudaStream_t);"; done
  } > "$f.new"
  mv "$f.new" "$f"
  n=$((n + 1))
done
echo "ik_mmq_trim.sh: $n MMQ instance files trimmed in $d"
