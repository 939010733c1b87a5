#!/usr/bin/env bash
# GGUF files (tests/data/gguf/): `info` prints what one holds (version, architecture, hyperparameters, tokenizer,
# tensors by ggml type); a truncated or lying one is one error line naming the file; every other command refuses a
# GGUF file with one error line saying only `info` reads them so far, and a plain file given as -m is "not a model
# folder".
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
  "runs:             not yet"
info_has "$g/gpt_oss_mxfp4.gguf" "architecture:     gpt-oss" '  rope.scaling.type                      "yarn"' \
  "  attention.sliding_window               6" "  MXFP4         6 tensors         156672 bytes" \
  "  BF16         12 tensors         116736 bytes"
info_has "$g/every_type.gguf" 'name:             "every type"' 'tokenizer:        "gpt2", 5 tokens, 1 merges' \
  "  Q4_K          1 tensor             144 bytes   36.1%  codec q4_k" "  I32           1 tensor              20 bytes" \
  "  5.0%  not decoded" "  MXFP4         1 tensor              51 bytes   12.8%  codec mxfp4_ggml"
info_has "$g/qwen3moe_q4_1.gguf" "  Q4_1         16 tensors          51200 bytes   94.8%  codec q4_g32"
# The GGUF codecs are read as stored: pack and synth name them as ones they cannot write.
expect_error "pack --experts q4_k is refused by name" \
  "error: --experts 'q4_k': a ggml type, read as a GGUF file stores it; pack cannot encode it (known: stored, f32, .*, fp8_g32)$" \
  "$bin" pack -m "$m/hf" -o "$tmp/p" --experts q4_k
expect_error "synth --packed iq4_xs is refused" "synth: --packed 'iq4_xs' is unknown (known: f32, .*, fp8_g32)$" \
  "$bin" synth --packed iq4_xs -o "$tmp/s"

# A GGUF file given to any other command: one error saying so, whatever the command.
for cmd in "run --ids 1,2" "logits --ids 1 -o $tmp/l.f32" "bench" "chat" "perplexity -f $data/demo/heldout.txt" \
  "imatrix -f $data/demo/heldout.txt -o $tmp/im.safetensors" "serve --port 0" "pack -o $tmp/packed" "quant-report" \
  "tokenize" "detokenize --ids 1"; do
  # shellcheck disable=SC2086 # the command's words
  expect_error "${cmd%% *} refuses a GGUF file" \
    "$g/qwen3moe_q4_1.gguf: a GGUF file: Seedling reads GGUF files with \`seedling info\` only so far" \
    "$bin" $cmd -m "$g/qwen3moe_q4_1.gguf" </dev/null
done
expect_error "quant-report --against refuses a GGUF file" "gpt_oss_mxfp4.gguf: a GGUF file" \
  "$bin" quant-report -m "$m/hf" --against "$g/gpt_oss_mxfp4.gguf" -f "$data/demo/heldout.txt"
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
