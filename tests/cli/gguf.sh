#!/usr/bin/env bash
# GGUF files (tests/data/gguf/): `info` prints what one holds (version, architecture, hyperparameters, tokenizer,
# tensors by ggml type) and what it runs as; qwen3moe_q4_1.gguf, the bytes of the packed folder beside it, gives its
# logits and greedy ids bit for bit, and packed from the GGUF (`pack -m FILE.gguf`, every expert's bytes as stored)
# it streams under budgets that evict on every token bit for bit too; the demo's vocabulary as llama.cpp's converter
# wrote it tokenizes as the demo folder; gpt-oss's MXFP4 GGUF runs as its folder; every refusal (no tokenizer for
# -p, an unmapped architecture, a tensor left unread, a missing key) and every bad file is one error line naming the
# file.
source "$(dirname "$0")/lib/common.bash"
g=$data/gguf

# info_has FILE LINE...: `info -m FILE` prints every LINE (a fixed string) among its lines.
info_has() {
  local file=$1 want
  shift
  "$bin" info -m "$file" >"$tmp/info"
  for want in "$@"; do
    grep -qF -- "$want" "$tmp/info" || { echo "info $file lacks '$want':"; cat "$tmp/info"; exit 1; }
  done
  echo "ok   info on $(basename "$file")"
}

info_has "$g/qwen3moe_q4_1.gguf" "gguf:             $g/qwen3moe_q4_1.gguf (version 3, 56.48 kB, data aligned to 32)" \
  "architecture:     qwen3moe" "hyperparameters:  (qwen3moe.*)" "  block_count                            2" \
  "  expert_count                           4" "  attention.layer_norm_rms_epsilon       1e-06" \
  'tokenizer:        "none"' "tensors:          27, 54.02 kB of data (from byte 2464)" \
  "  Q4_1         16 tensors          51200 bytes   94.8%" "  F32           9 tensors           1792 bytes    3.3%" \
  "maps onto:        qwen3_moe" 'text:             no: ' "runs:             yes" \
  "layers 0-1:       attention (q/k norm per head) + experts (top-2 of 4, width 32, softmax, top-k, renormalised)"
info_has "$g/gpt_oss_mxfp4.gguf" "architecture:     gpt-oss" '  rope.scaling.type                      "yarn"' \
  "  attention.sliding_window               6" "  MXFP4         6 tensors         156672 bytes" \
  "  BF16         12 tensors         116736 bytes" "maps onto:        gpt_oss"
info_has "$g/every_type.gguf" 'name:             "every type"' 'tokenizer:        "gpt2", 5 tokens, 1 merges' \
  "  Q4_K          1 tensor             144 bytes   36.1%  codec q4_k" "  I32           1 tensor              20 bytes" \
  "  5.0%  not decoded" "  MXFP4         1 tensor              51 bytes   12.8%  codec mxfp4_ggml" \
  "maps onto:        nothing: " "runs:             no"
info_has "$g/qwen3moe_q4_1.gguf" "  Q4_1         16 tensors          51200 bytes   94.8%  codec q4_g32"
# The GGUF codecs are read as stored: pack and synth name them as ones they cannot write.
expect_error "pack --experts q4_k is refused by name" \
  "error: --experts 'q4_k': a ggml type, read as a GGUF file stores it; pack cannot encode it (known: stored, f32, .*, fp8_g32)$" \
  "$bin" pack -m "$m/hf" -o "$tmp/p" --experts q4_k
expect_error "synth --packed iq4_xs is refused" "synth: --packed 'iq4_xs' is unknown (known: f32, .*, fp8_g32)$" \
  "$bin" synth --packed iq4_xs -o "$tmp/s"
info_has "$g/llama_cpp/demo_vocab.gguf" 'tokenizer:        "gpt2", 4096 tokens, 3837 merges' \
  "text:             yes (tokenizer.ggml.* read as a tokenizer, tokenizer.chat_template as the chat template)" \
  "runs:             no: $g/llama_cpp/demo_vocab.gguf: missing tensor 'token_embd.weight'"

# Oracle 1: the GGUF holds the packed folder's bytes (Q4_1 = q4_g32; norms f32, exactly the bf16 widened).
q=$g/qwen3moe_q4_1.gguf
"$bin" logits -m "$q" --ids 1,7,33,2,63,0,12,45 -o "$tmp/gguf.f32" 2>/dev/null
"$bin" logits -m "$g/qwen3moe_q4_1" --ids 1,7,33,2,63,0,12,45 -o "$tmp/packed.f32" 2>/dev/null
cmp "$tmp/gguf.f32" "$tmp/packed.f32" || { echo "logits of the GGUF differ from the packed folder's"; exit 1; }
echo "ok   logits of the GGUF = the packed folder's, byte for byte"
greedy() { "$bin" run -m "$1" --ids 5,40,22 -n 12 --ignore-eos --print-ids "${@:2}" 2>/dev/null | tail -1; }
[ "$(greedy "$q")" = "$(greedy "$g/qwen3moe_q4_1")" ] || { echo "greedy ids of the GGUF differ"; exit 1; }
echo "ok   greedy ids of the GGUF = the packed folder's ($(greedy "$q"))"

# Streamed: packed from the GGUF, every expert's bytes as stored (the same experts files as the folder it came
# from), then run with experts streamed from disk under budgets that evict on every token.
"$bin" pack -m "$q" -o "$tmp/from_gguf" >/dev/null 2>&1
for f in experts-000.bin experts-001.bin; do
  cmp "$tmp/from_gguf/$f" "$g/qwen3moe_q4_1/$f" || { echo "pack -m GGUF: $f differs from the folder's"; exit 1; }
done
echo "ok   pack -m GGUF keeps every expert's bytes (= the packed folder's experts files)"
for budget in "--expert-slots 2" "--ram-budget 16K"; do
  # shellcheck disable=SC2086 # the flag and its value
  "$bin" logits -m "$tmp/from_gguf" --ids 1,7,33,2,63,0,12,45 -o "$tmp/streamed.f32" $budget 2>"$tmp/err"
  grep -q "experts: streamed provider" "$tmp/err" || { echo "$budget did not stream:"; cat "$tmp/err"; exit 1; }
  cmp "$tmp/streamed.f32" "$tmp/gguf.f32" || { echo "streamed ($budget) logits differ from the GGUF's"; exit 1; }
  # shellcheck disable=SC2086
  [ "$(greedy "$tmp/from_gguf" $budget)" = "$(greedy "$q")" ] || { echo "streamed ($budget) greedy ids differ"; exit 1; }
  echo "ok   streamed from the pack of the GGUF ($budget) = the GGUF resident, logits and greedy ids"
done
expect_error "--ram-budget on a GGUF says to pack it" "need a packed folder: run \`seedling pack -m $q -o DIR\` first" \
  "$bin" run -m "$q" --ids 1 -n 1 --ram-budget 16K

# qwen35moe (Qwen3.5 MoE in llama.cpp's layout: norms stored as 1 + w, ssm_a = -exp(A_log)): its pack keeps the
# norms as stored and says so in its config, so the pack gives the file's logits bit for bit, streamed too.
q35=$g/qwen35moe_q4_1.gguf
"$bin" logits -m "$q35" --ids 1,5,9,200,33,7,100,64,12,250,3,17 -o "$tmp/q35.f32" 2>/dev/null
"$bin" pack -m "$q35" -o "$tmp/q35_pack" >/dev/null 2>&1
"$bin" logits -m "$tmp/q35_pack" --ids 1,5,9,200,33,7,100,64,12,250,3,17 -o "$tmp/q35_pack.f32" 2>/dev/null
cmp "$tmp/q35.f32" "$tmp/q35_pack.f32" || { echo "qwen35moe: the pack of the GGUF differs from the GGUF"; exit 1; }
"$bin" logits -m "$tmp/q35_pack" --ids 1,5,9,200,33,7,100,64,12,250,3,17 -o "$tmp/q35_stream.f32" --expert-slots 2 \
  2>/dev/null
cmp "$tmp/q35.f32" "$tmp/q35_stream.f32" || { echo "qwen35moe: streamed from its pack differs from the GGUF"; exit 1; }
echo "ok   qwen35moe GGUF = its pack = its pack streamed (2 expert slots), logits bit for bit"

# The demo's vocabulary as llama.cpp's converter wrote it: the folder's tokens, text back, chat template.
demo=$data/../../models/seedling-demo-moe
text=$'def fibonacci(n):\n    """Return the n-th number."""  # 日本語 😀\r\n\tx  = 33333'
a=$(printf '%s' "$text" | "$bin" tokenize -m "$g/llama_cpp/demo_vocab.gguf")
b=$(printf '%s' "$text" | "$bin" tokenize -m "$demo")
[ "$a" = "$b" ] || { echo "tokenize: the GGUF gives $a, the folder $b"; exit 1; }
[ "$("$bin" detokenize -m "$g/llama_cpp/demo_vocab.gguf" --ids "$a")" = "$text" ] || { echo "detokenize differs"; exit 1; }
echo "ok   tokenize/detokenize with the GGUF's tokenizer = the demo folder's"

# Refusals, each one line naming the file and why.
expect_error "run -p without a tokenizer" \
  "qwen3moe_q4_1.gguf: key 'tokenizer.ggml.model' is \"none\": no tokenizer; so -p cannot be used: give --ids" \
  "$bin" run -m "$q" -p "hello"
expect_error "tokenize without a tokenizer" "qwen3moe_q4_1.gguf: key 'tokenizer.ggml.model' is \"none\"" \
  "$bin" tokenize -m "$q" </dev/null
expect_error "chat without a tokenizer" "qwen3moe_q4_1.gguf: key 'tokenizer.ggml.model' is \"none\"" \
  "$bin" chat -m "$q" </dev/null
# gpt-oss's MXFP4 experts as ggml stores them (codec mxfp4_ggml) against the released folder (Seedling's mxfp4): the
# same values, multiplied in another order on the float path (--cpu-dot float: by default the ggml codecs take int8
# activations, Seedling's mxfp4 does not), so within float32 rounding.
"$bin" logits -m "$g/gpt_oss_mxfp4.gguf" --cpu-dot float --ids 1,5,9,2,40 -o "$tmp/mx_gguf.f32" 2>/dev/null
"$bin" logits -m "$data/models/gpt_oss_mxfp4/hub" --ids 1,5,9,2,40 -o "$tmp/mx_hub.f32" 2>/dev/null
python3 - "$tmp/mx_gguf.f32" "$tmp/mx_hub.f32" <<'PY' || exit 1
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
n = len(a) // 4
assert n > 0 and len(a) == len(b), (len(a), len(b))
err = max(abs(x - y) for x, y in zip(struct.unpack("<%df" % n, a), struct.unpack("<%df" % n, b)))
print("ok   gpt_oss_mxfp4.gguf (mxfp4_ggml) = the released folder (mxfp4) within %.2e" % err)
sys.exit(0 if err <= 1e-4 else 1)
PY
expect_error "an unmapped architecture" \
  "every_type.gguf: key 'general.architecture': 'testarch' is not mapped onto a Seedling family (mapped: qwen3moe," \
  "$bin" logits -m "$g/every_type.gguf" --ids 1 -o "$tmp/l.f32"
expect_error "quant-report -m refuses a GGUF file" "qwen3moe_q4_1.gguf is a GGUF file; -m takes a Hugging Face folder" \
  "$bin" quant-report -m "$q"
# Same-length renames of a key and a tensor in the file's bytes.
rename() { python3 -c "import sys;d=open(sys.argv[1],'rb').read();open(sys.argv[2],'wb').write(d.replace(sys.argv[3].encode(),sys.argv[4].encode(),1))" "$@"; }
rename "$q" "$tmp/key.gguf" qwen3moe.expert_used_count qwen3moe.expert_used_cnxnt
expect_error "a missing key" "key.gguf: missing key 'qwen3moe.expert_used_count' (expected an integer)" \
  "$bin" run -m "$tmp/key.gguf" --ids 1
rename "$q" "$tmp/tensor.gguf" blk.1.attn_q_norm.weight blk.1.attn_x_norm.weight
expect_error "a missing tensor" \
  "tensor.gguf: missing tensor 'blk.1.attn_q_norm.weight' (the qwen3moe mapping reads role q_norm of layer 1 from it)" \
  "$bin" run -m "$tmp/tensor.gguf" --ids 1
echo "not a model" >"$tmp/notes.txt"
expect_error "run refuses a plain file as -m" "$tmp/notes.txt: a file, not a model folder" \
  "$bin" run -m "$tmp/notes.txt" --ids 1

# Bad GGUF files: one error line naming the file.
head -c 3000 "$g/qwen3moe_q4_1.gguf" >"$tmp/cut.gguf"
expect_error "info on a truncated GGUF" \
  "$tmp/cut.gguf: tensor 'token_embd.weight': Q4_1 \[64, 64\] needs 2560 bytes at offset 0 of the data section" \
  "$bin" info -m "$tmp/cut.gguf"
printf 'GGUX\003\000\000\000' >"$tmp/magic.gguf"
expect_error "info on a bad magic" "$tmp/magic.gguf: not a GGUF file: starts with \"GGUX\"" "$bin" info -m "$tmp/magic.gguf"
cp "$g/every_type.gguf" "$tmp/v9.gguf"
printf '\011' | dd of="$tmp/v9.gguf" bs=1 seek=4 conv=notrunc status=none
expect_error "info on an unknown version" "v9.gguf: GGUF version 9 is not read" "$bin" info -m "$tmp/v9.gguf"
