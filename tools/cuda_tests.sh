#!/usr/bin/env bash
# tools/cuda_tests.sh - the CUDA tests, on a machine with a GPU: the kernel and forward tests (cuda_tests), then the
# command line with --device cuda against --device cpu on every tiny checkpoint (same greedy ids, logits within
# 2e-2), with every expert in VRAM and with three tiers (NVMe -> RAM slots -> VRAM slots), and the clear errors;
# then the same CPU/CUDA comparison on each checkpoint packed with seed experts (p4, s3: the seed kernels end to
# end; a search over seeds 1..256 only, since only CPU against CUDA on the same pack is compared) and the same packs
# searched on the GPU (--search-device cuda: the same expert bytes); then the layer-plan families (olmoe, qwen2_moe,
# glm4_moe, gpt_oss with bf16 and with MXFP4 experts, deepseek_v3 with MLA and FP8 weights, the hybrids qwen3_next
# and qwen3_5_moe) against the CPU, the hybrids' prompts fed in pieces against one forward, and packs of MXFP4 and FP8
# experts through VRAM slots and three tiers; then the GGUF files of every quant type against the CPU, and two of them
# packed with a VRAM cache of the minimum size against all in VRAM. On a machine without a GPU the gtests skip and
# this script stops, saying so.
#
# Usage: tools/cuda_tests.sh [BUILD_DIR]     (default: build)
# Builds seedling and cuda_tests in BUILD_DIR first, unless SEEDLING_NO_BUILD=1 (binaries carried to a GPU machine
# that lacks the -dev libraries; then BUILD_DIR holds seedling and tests/cuda_tests). SEEDLING_SKIP_GTESTS=1 leaves
# the gtests out (run on their own first, so that a failing one does not hide the command-line checks).
set -euo pipefail
# CUDA keeps activations in float32: compare it with the CPU's float path, not its default int8 one (ops/matmul.h).
export SEEDLING_CPU_DOT=float
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

# Max |a - b| over two float32 logit files of the same length, printed; fails when above 2e-2.
max_diff_within_2e2() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
n = len(a) // 4
err = max(abs(x - y) for x, y in zip(struct.unpack('<%df' % n, a), struct.unpack('<%df' % n, b)))
print("%.2e" % err)
sys.exit(0 if err <= 2e-2 else 1)
PY
}

# reference_ids NAME: the comma-separated prompt ids of tests/data/models/NAME/reference.json.
reference_ids() {
  python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'])))" \
    "$models/$1/reference.json"
}

# compare_cpu_cuda LABEL RUN_MODEL LOGITS_MODEL IDS: `run` on RUN_MODEL gives the same 12 greedy ids with --device cpu
# and --device cuda, and `logits` on LOGITS_MODEL are within 2e-2 of each other; else prints "FAIL LABEL: ..." and
# exits 1. Leaves the CPU's ids in $cpu_ids, the max |cuda - cpu| in $err, the logits in $tmp/cpu.f32, $tmp/gpu.f32.
compare_cpu_cuda() {
  local label=$1 run_model=$2 logits_model=$3 ids=$4 gpu_ids
  cpu_ids=$("$bin" run -m "$run_model" --ids "$ids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
  gpu_ids=$("$bin" run -m "$run_model" --ids "$ids" -n 12 --ignore-eos --print-ids --device cuda 2>/dev/null |
    tail -n 1)
  [ "$cpu_ids" = "$gpu_ids" ] || { echo "FAIL $label: greedy ids cpu $cpu_ids, cuda $gpu_ids"; exit 1; }
  "$bin" logits -m "$logits_model" --ids "$ids" -o "$tmp/cpu.f32" 2>/dev/null
  "$bin" logits -m "$logits_model" --ids "$ids" -o "$tmp/gpu.f32" --device cuda 2>/dev/null
  err=$(max_diff_within_2e2 "$tmp/cpu.f32" "$tmp/gpu.f32") || { echo "FAIL $label: $err"; exit 1; }
}

if [ -z "${SEEDLING_SKIP_GTESTS:-}" ]; then  # SEEDLING_SKIP_GTESTS=1: the command-line checks only
  status=0
  SEEDLING_BINARY="$bin" "$build/tests/cuda_tests" >"$tmp/gtest" 2>&1 || status=$?
  grep -v '^\[ *\(OK\|RUN\) ' "$tmp/gtest" | grep -v '^$' || true
  [ "$status" = 0 ] || { echo "FAIL cuda_tests"; exit 1; }
  echo "ok   cuda_tests: $(grep -c '^\[ *OK ' "$tmp/gtest" || true) tests passed"
fi

for m in qwen3_moe_a qwen3_moe_b mixtral_a mixtral_b; do
  ids=$(reference_ids "$m")
  # The three-tier checks below compare against this run's $cpu_ids and $tmp/cpu.f32 (the seed packs then reuse both).
  compare_cpu_cuda "$m" "$models/$m/hf" "$models/$m/hub" "$ids"
  "$bin" logits -m "$models/$m/hub" --ids "$ids" -o "$tmp/gpu_min.f32" --device cuda --vram-budget 1 2>"$tmp/err" &&
    { echo "FAIL $m: a 1-byte VRAM budget was accepted"; exit 1; }
  grep -q "vram-budget" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  printf "ok   %-12s cuda greedy ids = cpu; logits max |cuda - cpu| %s; 1-byte --vram-budget refused\n" "$m" "$err"
  # Three tiers: the packed folder's experts read into top-k RAM slots (--expert-slots k) and
  # from there into top-k VRAM slots (the minimum the 1-byte refusal named): the CPU's greedy ids, logits within
  # 2e-2 of the CPU and bit-identical to the all-in-VRAM CUDA run of the same pack; the placement line names the
  # tiers; a RAM budget below top-k is refused.
  "$bin" pack -m "$models/$m/hf" -o "$tmp/p" --force >/dev/null 2>&1
  min=$("$bin" logits -m "$tmp/p" --ids 1 -o "$tmp/x.f32" --device cuda --vram-budget 1 2>&1 |
    grep -o 'at least [0-9]* bytes' | grep -o '[0-9]*' || true)
  [ -n "$min" ] || { echo "FAIL $m: a 1-byte VRAM budget on the pack named no minimum"; exit 1; }
  k=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_experts_per_tok'])" "$models/$m/hf/config.json")
  tiers="--device cuda --expert-slots $k --vram-budget $min"
  # shellcheck disable=SC2086
  gpu3=$("$bin" run -m "$tmp/p" --ids "$ids" -n 12 --ignore-eos --print-ids $tiers 2>"$tmp/err3" | tail -n 1)
  [ "$cpu_ids" = "$gpu3" ] || { echo "FAIL $m: greedy ids cpu $cpu_ids, three tiers $gpu3"; cat "$tmp/err3"; exit 1; }
  if ! grep -q "three tiers" "$tmp/err3" || ! grep -q "experts: streamed provider" "$tmp/err3"; then
    echo "FAIL $m: no three-tier placement line or RAM tier statistics"
    cat "$tmp/err3"
    exit 1
  fi
  "$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu_all.f32" --device cuda 2>/dev/null
  # shellcheck disable=SC2086
  "$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu3.f32" $tiers 2>/dev/null
  cmp -s "$tmp/gpu_all.f32" "$tmp/gpu3.f32" || { echo "FAIL $m: three-tier logits differ from all-in-VRAM"; exit 1; }
  "$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/x.f32" --device cuda --expert-slots $((k - 1)) 2>"$tmp/err" &&
    { echo "FAIL $m: top-k - 1 RAM slots accepted"; exit 1; }
  grep -q "top-k" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  err=$(max_diff_within_2e2 "$tmp/cpu.f32" "$tmp/gpu3.f32") || { echo "FAIL $m three tiers: $err"; exit 1; }
  printf "ok   %-12s three tiers (top-k RAM and VRAM slots): cpu greedy ids; logits max |cuda - cpu| %s, " "$m" "$err"
  echo "= all-in-VRAM bit for bit; top-k - 1 RAM slots refused"
  for tier in p4 s3; do
    "$bin" pack -m "$models/$m/hf" -o "$tmp/s" --experts "$tier" --seed-search-seeds 256 --force >/dev/null 2>&1
    compare_cpu_cuda "$m --experts $tier" "$tmp/s" "$tmp/s" "$ids"
    printf "ok   %-12s --experts %s: cuda greedy ids = cpu; logits max |cuda - cpu| %s\n" "$m" "$tier" "$err"
    "$bin" pack -m "$models/$m/hf" -o "$tmp/sg" --experts "$tier" --seed-search-seeds 256 --search-device cuda \
      --force >/dev/null 2>&1
    for f in "$tmp"/s/experts-*.bin; do
      cmp -s "$f" "$tmp/sg/$(basename "$f")" || { echo "FAIL $m --experts $tier: CUDA search blobs differ"; exit 1; }
    done
    printf "ok   %-12s --experts %s --search-device cuda: the CPU search's expert bytes\n" "$m" "$tier"
  done
done
# The families that run from layer plans (olmoe, qwen2_moe, glm4_moe, gpt_oss, deepseek_v3 with its latent attention,
# the hybrids qwen3_next and qwen3_5_moe), each in the layout it is checked in (gpt_oss_mxfp4/hub: the MXFP4 experts
# as released; deepseek_v3_fp8/hub: FP8 weights as released; qwen3_5_moe_a/hub: the multimodal folder with fused
# experts): cuda greedy ids = cpu, logits within 2e-2.
for d in olmoe_a/hf qwen2_moe_a/hf glm4_moe_a/hf gpt_oss_a/hf gpt_oss_mxfp4/hub deepseek_v3_a/hf deepseek_v3_b/hf \
  deepseek_v3_fp8/hub qwen3_next_a/hf qwen3_5_moe_a/hf qwen3_5_moe_a/hub; do
  ids=$(reference_ids "${d%%/*}")
  compare_cpu_cuda "$d" "$models/$d" "$models/$d" "$ids"
  printf "ok   %-18s cuda greedy ids = cpu; logits max |cuda - cpu| %s\n" "$d" "$err"
done
# The hybrids on CUDA: the prompt (320 and 80 ids) fed in forwards of 65, 64 and 63 rows and token by token
# (logits --rows-per-forward) gives logits within 2e-2 of one forward: the conv windows and delta-rule states carried
# across forwards in VRAM, the chunked form from mid-sequence, the recurrent step.
for d in qwen3_next_a/hf qwen3_5_moe_a/hub; do
  ids=$(reference_ids "${d%%/*}")
  "$bin" logits -m "$models/$d" --ids "$ids" -o "$tmp/whole.f32" --device cuda 2>/dev/null
  errs=""
  for n in 65 64 63 1; do
    "$bin" logits -m "$models/$d" --ids "$ids" -o "$tmp/piece.f32" --device cuda --rows-per-forward "$n" 2>/dev/null
    err=$(max_diff_within_2e2 "$tmp/whole.f32" "$tmp/piece.f32") || { echo "FAIL $d in pieces of $n: $err"; exit 1; }
    errs="$errs $n: $err,"
  done
  printf "ok   %-18s cuda prompt in pieces vs one forward, max |diff| by rows a forward:%s\n" "$d" "${errs%,}"
done
# --route-replay on CUDA: the CPU records qwen3_moe_a's routes, each expert id is then moved to the next one (routes
# the router would not choose), and that trace is replayed on both backends: the replay changes the logits, the CUDA
# logits stay within 2e-2 of the CPU's under the same replayed routes, and a VRAM cache of the minimum size admits
# the replayed experts (bit-identical to all in VRAM).
m=qwen3_moe_a
ids=$(reference_ids "$m")
"$bin" pack -m "$models/$m/hf" -o "$tmp/rp" --force >/dev/null 2>&1
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/own.f32" --route-trace "$tmp/own.csv" 2>/dev/null
python3 - "$tmp/own.csv" "$tmp/moved.csv" "$models/$m/hf/config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[3]))
E = cfg.get("num_experts", cfg.get("num_local_experts"))
lines = open(sys.argv[1]).read().splitlines()
out = [lines[0]]
for line in lines[1:]:
    f = line.split(",")
    f[2] = " ".join(str((int(e) + 1) % E) for e in f[2].split())
    out.append(",".join(f))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/cpu_r.f32" --route-replay "$tmp/moved.csv" 2>/dev/null
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_r.f32" --device cuda --route-replay "$tmp/moved.csv" 2>/dev/null
if max_diff_within_2e2 "$tmp/own.f32" "$tmp/cpu_r.f32" >/dev/null; then
  echo "FAIL route replay: the moved routes left the logits within 2e-2 of the router's own"; exit 1
fi
err=$(max_diff_within_2e2 "$tmp/cpu_r.f32" "$tmp/gpu_r.f32") || { echo "FAIL route replay cuda: $err"; exit 1; }
min=$("$bin" logits -m "$tmp/rp" --ids 1 -o "$tmp/x.f32" --device cuda --vram-budget 1 2>&1 |
  grep -o 'at least [0-9]* bytes' | grep -o '[0-9]*' || true)
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_rc.f32" --device cuda --vram-budget "$min" \
  --route-replay "$tmp/moved.csv" 2>/dev/null
cmp -s "$tmp/gpu_r.f32" "$tmp/gpu_rc.f32" || { echo "FAIL route replay: VRAM-cache logits differ from all in VRAM"; exit 1; }
printf "ok   %-18s --route-replay: cuda within %s of cpu on moved routes; VRAM cache = all in VRAM\n" "$m" "$err"
# --route-trace on CUDA records the routes it ran; replaying that trace on CUDA gives the same logits bytes as the
# router's own routes (the replay is a measuring tool that changes no bit when it replays what the router chose).
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_own.f32" --device cuda 2>/dev/null
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_tr.f32" --device cuda --route-trace "$tmp/gpu_own.csv" 2>/dev/null
cmp -s "$tmp/gpu_own.f32" "$tmp/gpu_tr.f32" || { echo "FAIL route trace cuda: recording changed the logits"; exit 1; }
rows=$(($(wc -l <"$tmp/gpu_own.csv") - 1))
[ "$rows" -eq $(($(wc -l <"$tmp/own.csv") - 1)) ] || { echo "FAIL route trace cuda: $rows rows, cpu's differ"; exit 1; }
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_own_r.f32" --device cuda --route-replay "$tmp/gpu_own.csv" \
  2>/dev/null
cmp -s "$tmp/gpu_own.f32" "$tmp/gpu_own_r.f32" || { echo "FAIL route replay cuda: own trace changed the logits"; exit 1; }
printf "ok   %-18s --route-trace on cuda: %s routes; replaying them gives the same logits bytes\n" "$m" "$rows"
# Next-layer prefetch (--prefetch-width): guesses copied into the VRAM cache ahead of the router change no bit, with
# the model's own router guessing and with replayed guesses (--prefetch-replay: here the moved routes themselves, so
# the guesses of layer 2 are its routes); and the counters say how many guesses were copied and used.
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_c2.f32" --device cuda --vram-budget $((2 * min)) 2>/dev/null
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_pf.f32" --device cuda --vram-budget $((2 * min)) \
  --prefetch-width 2 2>"$tmp/err"
cmp -s "$tmp/gpu_c2.f32" "$tmp/gpu_pf.f32" || { echo "FAIL prefetch: logits differ from the cache without it"; exit 1; }
grep -q "prefetched" "$tmp/err" || { cat "$tmp/err"; echo "FAIL prefetch: no guess copied"; exit 1; }
awk -F, 'NR == 1 { print "token_index,layer,predicted_ids"; next } { print $1 "," $2 "," $3 }' "$tmp/moved.csv" \
  >"$tmp/guess.csv"
# A whole layer's experts fit (min is top-k of them): the prompt's union of guesses does not evict itself.
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/gpu_rpf.f32" --device cuda --vram-budget $((4 * min)) \
  --route-replay "$tmp/moved.csv" --prefetch-width 2 --prefetch-replay "$tmp/guess.csv" 2>"$tmp/err"
cmp -s "$tmp/gpu_r.f32" "$tmp/gpu_rpf.f32" || { echo "FAIL prefetch replay: logits differ from all in VRAM"; exit 1; }
used=$(grep -o 'prefetched ([0-9.]* GB), [0-9]* of them' "$tmp/err" | grep -o '[0-9]* of them' | grep -o '[0-9]*' || true)
[ "${used:-0}" -gt 0 ] || { cat "$tmp/err"; echo "FAIL prefetch replay: no replayed guess was used"; exit 1; }
"$bin" logits -m "$tmp/rp" --ids "$ids" -o "$tmp/x.f32" --device cuda --vram-budget $((2 * min)) \
  --route-replay "$tmp/moved.csv" --prefetch-width 2 2>"$tmp/err" && { echo "FAIL: replay without guesses ran"; exit 1; }
grep -q "needs --prefetch-replay" "$tmp/err" || { cat "$tmp/err"; exit 1; }
printf "ok   %-18s --prefetch-width 2: same bits as the cache without it, own and replayed guesses (%s used)\n" \
  "$m" "$used"
# MXFP4 rows are rearranged wherever they land in VRAM (cuda/mxfp4_layout.h): gpt_oss_mxfp4 packed as stored, its
# experts all in VRAM, in top-k VRAM slots fed from pinned host memory, and through three tiers give the same bits.
ids=$(reference_ids gpt_oss_mxfp4)
"$bin" pack -m "$models/gpt_oss_mxfp4/hub" -o "$tmp/p" --force >/dev/null 2>&1
min=$("$bin" logits -m "$tmp/p" --ids 1 -o "$tmp/x.f32" --device cuda --vram-budget 1 2>&1 |
  grep -o 'at least [0-9]* bytes' | grep -o '[0-9]*' || true)
[ -n "$min" ] || { echo "FAIL gpt_oss_mxfp4: a 1-byte VRAM budget on the pack named no minimum"; exit 1; }
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu_all.f32" --device cuda 2>/dev/null
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu_slots.f32" --device cuda --vram-budget "$min" 2>/dev/null
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu3.f32" --device cuda --expert-slots 4 --vram-budget "$min" 2>/dev/null
cmp -s "$tmp/gpu_all.f32" "$tmp/gpu_slots.f32" || { echo "FAIL gpt_oss_mxfp4: VRAM-slot logits differ"; exit 1; }
cmp -s "$tmp/gpu_all.f32" "$tmp/gpu3.f32" || { echo "FAIL gpt_oss_mxfp4: three-tier logits differ"; exit 1; }
echo "ok   gpt_oss_mxfp4      packed: top-k VRAM slots and three tiers = all in VRAM bit for bit"
# FP8 experts (fp8_g32): deepseek_v3_fp8 packed with its routed experts in fp8_g32 (its dense FP8 weights kept as
# released): the manifest keeps fp8_g32, cuda greedy ids = cpu, logits within 2e-2, and top-k VRAM slots and three
# tiers give the all-in-VRAM logits bit for bit.
ids=$(reference_ids deepseek_v3_fp8)
"$bin" pack -m "$models/deepseek_v3_fp8/hub" -o "$tmp/p" --experts fp8_g32 --force >/dev/null 2>&1
python3 - "$tmp/p/manifest.json" <<'PY' || { echo "FAIL deepseek_v3_fp8: the packed experts are not all fp8_g32"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))
codecs = {l[p]["codec"] for l in m["experts"] for p in ("gate", "up", "down")}
sys.exit(0 if m["experts"] and codecs == {"fp8_g32"} else 1)
PY
compare_cpu_cuda "deepseek_v3_fp8 --experts fp8_g32" "$tmp/p" "$tmp/p" "$ids"
min=$("$bin" logits -m "$tmp/p" --ids 1 -o "$tmp/x.f32" --device cuda --vram-budget 1 2>&1 |
  grep -o 'at least [0-9]* bytes' | grep -o '[0-9]*' || true)
[ -n "$min" ] || { echo "FAIL deepseek_v3_fp8: a 1-byte VRAM budget on the pack named no minimum"; exit 1; }
k=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_experts_per_tok'])" \
  "$models/deepseek_v3_fp8/hub/config.json")
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu_all.f32" --device cuda 2>/dev/null
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu_slots.f32" --device cuda --vram-budget "$min" 2>/dev/null
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/gpu3.f32" --device cuda --expert-slots "$k" --vram-budget "$min" \
  2>/dev/null
cmp -s "$tmp/gpu_all.f32" "$tmp/gpu_slots.f32" || { echo "FAIL deepseek_v3_fp8 fp8_g32: VRAM-slot logits differ"; exit 1; }
cmp -s "$tmp/gpu_all.f32" "$tmp/gpu3.f32" || { echo "FAIL deepseek_v3_fp8 fp8_g32: three-tier logits differ"; exit 1; }
printf "ok   %-18s packed --experts fp8_g32: cuda greedy ids = cpu; logits max |cuda - cpu| %s; " deepseek_v3_fp8 "$err"
echo "top-k VRAM slots and three tiers = all in VRAM bit for bit"
# GGUF files (docs/formats/gguf.md), every ggml type computed on as stored: llama.cpp's own llama-quantize outputs
# (Q4_K_M, Q6_K, IQ4_XS with a Q8_0 attn_v, Q8_0, and a two-layer Q4_K_M whose layers' down projections differ,
# Q4_K and Q6_K: tests/data/gguf/llama_cpp/README.md), Seedling's Q4_1 file, deepseek2 with every matrix Q4_0 (MLA's
# kv_b read as stored: tests/data/gguf/make_files.py) and gpt-oss with MXFP4 experts as ggml stores them
# (mxfp4_ggml): cuda greedy ids = cpu, logits within 2e-2.
g=$root/tests/data/gguf
for f in llama_cpp/kquant_small_q4_k_m llama_cpp/kquant_small_q6_k llama_cpp/kquant_small_iq4_xs \
  llama_cpp/kquant_qwen3moe_q8_0 llama_cpp/kquant_qwen3moe_q4_k_m qwen3moe_q4_1 deepseek2_q4_0 gpt_oss_mxfp4; do
  case $f in
    qwen3moe_q4_1) ids=1,7,33,2,63,0,12,45 ;;
    gpt_oss_mxfp4) ids=1,5,9,2,40 ;;
    *) ids=1,5,77,200,13,42,99,128,255,0,64,31 ;;
  esac
  compare_cpu_cuda "$f.gguf" "$g/$f.gguf" "$g/$f.gguf" "$ids"
  printf "ok   %-34s cuda greedy ids = cpu; logits max |cuda - cpu| %s\n" "$f.gguf" "$err"
done
# A GGUF packed (`pack -m FILE.gguf`: every expert's bytes as stored, K-quants and mxfp4_ggml), its experts all in
# VRAM and in top-k VRAM slots (the minimum the 1-byte refusal names) fed from pinned host memory: the same bits.
for f in llama_cpp/kquant_small_q4_k_m llama_cpp/kquant_qwen3moe_q4_k_m gpt_oss_mxfp4; do
  "$bin" pack -m "$g/$f.gguf" -o "$tmp/gp" --force >/dev/null 2>&1
  min=$("$bin" logits -m "$tmp/gp" --ids 1 -o "$tmp/x.f32" --device cuda --vram-budget 1 2>&1 |
    grep -o 'at least [0-9]* bytes' | grep -o '[0-9]*' || true)
  [ -n "$min" ] || { echo "FAIL $f.gguf packed: a 1-byte VRAM budget named no minimum"; exit 1; }
  "$bin" logits -m "$tmp/gp" --ids 1,5,9,2,40,7,3 -o "$tmp/gpu_all.f32" --device cuda 2>/dev/null
  "$bin" logits -m "$tmp/gp" --ids 1,5,9,2,40,7,3 -o "$tmp/gpu_slots.f32" --device cuda --vram-budget "$min" 2>/dev/null
  cmp -s "$tmp/gpu_all.f32" "$tmp/gpu_slots.f32" || { echo "FAIL $f.gguf packed: VRAM-slot logits differ"; exit 1; }
  printf "ok   %-34s packed: top-k VRAM slots = all in VRAM bit for bit\n" "$f.gguf"
done
echo "ok   all CUDA tests"
