#!/usr/bin/env bash
# Every family's tiny checkpoint (olmoe, qwen2_moe, glm4_moe, gpt_oss in bf16 and as released MXFP4, the hybrid
# qwen3_next and qwen3_5_moe, deepseek_v3 with and without q_lora_rank and as released in FP8) through the
# whole path: `pack` keeps the logits bit for bit (the logits files compared byte for byte) and its greedy ids are
# transformers' (reference.json); experts streamed from disk into the smallest slot cache (top-k slots: every token
# evicts) give the resident run's logits bytes and greedy ids, under LRU and LFU; and `seedling serve` answers three
# completions sent together with the very ids it gives each alone, which are `seedling run`'s greedy ids (continuous
# batching changes no bit). The tiny checkpoints carry no tokenizer, so each gets one whose text reads back to its ids
# and a plain chat template.
source "$(dirname "$0")/lib/common.bash"

# id_tokenizer DIR: a tokenizer.json whose 256 tokens are "t0" ... "t255", with no merges and no decoder, so a
# completion's text is its tokens joined by spaces and `complete` reads its ids back exactly (a byte-level tokenizer
# would not: invalid UTF-8 decodes to U+FFFD, so different ids could give the same text).
id_tokenizer() {
  python3 - "$1/tokenizer.json" <<'PY'
import json, sys
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None,
           "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": {"t%d" % i: i for i in range(256)}, "merges": []}}, open(sys.argv[1], "w"))
PY
}

# same_logits WHAT A B BYTES: the logits files A and B are BYTES long (so neither is empty or cut short) and equal
# byte for byte.
same_logits() {
  local what=$1 a=$2 b=$3 bytes=$4 f
  for f in "$a" "$b"; do
    [ "$(stat -c %s "$f")" -eq "$bytes" ] || { echo "$what: $f has $(stat -c %s "$f") bytes, not $bytes"; exit 1; }
  done
  cmp -s "$a" "$b" || { echo "$what: logits differ"; exit 1; }
}

# each in the layout it is checked in (qwen3_5_moe_a/hub: the multimodal folder with fused experts;
# deepseek_v3_fp8/hub: FP8 packed as stored)
specs=(olmoe_a/hf qwen2_moe_a/hf glm4_moe_a/hf gpt_oss_a/hf gpt_oss_mxfp4/hub qwen3_next_a/hf qwen3_5_moe_a/hub
  deepseek_v3_a/hf deepseek_v3_b/hf deepseek_v3_fp8/hub)
for spec in "${specs[@]}"; do
  name=${spec%%/*}
  src=$data/models/$spec
  mids=$(reference_ids ids "$data/models/$name")
  greedy=$(reference_ids greedy "$data/models/$name")
  k=$(python3 -c "import json,sys;c=json.load(open(sys.argv[1]));print(c.get('text_config',c)['num_experts_per_tok'])" \
    "$src/config.json")
  # The bytes of a logits file: float32, every prompt position, the whole vocabulary.
  bytes=$(python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(len(r['ids'])*r['vocab_size']*4)" \
    "$data/models/$name/reference.json")
  "$bin" logits -m "$src" --ids "$mids" -o "$tmp/$name.hf.f32" 2>/dev/null
  if [ "$name" = qwen3_next_a ] || [ "$name" = qwen3_5_moe_a ]; then
    # info: the recurrent state one sequence keeps, from config.json's sizes (float32 conv windows and states), and
    # the multimodal folder's vision tower named as skipped.
    state=$(python3 -c "
import json, sys
c = json.load(open(sys.argv[1])); c = c.get('text_config', c)
nk, nv, dk, dv, k = (c['linear_' + x] for x in ('num_key_heads', 'num_value_heads', 'key_head_dim',
                                                 'value_head_dim', 'conv_kernel_dim'))
n = c['layer_types'].count('linear_attention')
print('%.2f kB of recurrent state' % (n * ((k - 1) * (2 * nk * dk + nv * dv) + nv * dk * dv) * 4 / 1e3))" "$src/config.json")
    info=$("$bin" info -m "$src" 2>/dev/null)
    grep -qF "$state" <<<"$info" || { echo "$name: info does not say '$state'"; echo "$info"; exit 1; }
    if grep -q text_config "$src/config.json"; then
      grep -q "vision tower:     model.visual.\* (21 tensors), skipped" <<<"$info" ||
        { echo "$name: info does not name the skipped vision tower"; echo "$info"; exit 1; }
    fi
  fi
  "$bin" pack -m "$src" -o "$tmp/$name" >/dev/null 2>&1
  "$bin" logits -m "$tmp/$name" --ids "$mids" -o "$tmp/$name.packed.f32" 2>/dev/null
  same_logits "$name: packed against the folder" "$tmp/$name.hf.f32" "$tmp/$name.packed.f32" "$bytes"
  want=$("$bin" run -m "$tmp/$name" --ids "$mids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
  [ "$want" = "$greedy" ] || { echo "$name: packed greedy ids $want, transformers' $greedy"; exit 1; }
  for policy in lru lfu; do
    "$bin" logits -m "$tmp/$name" --ids "$mids" -o "$tmp/$name.streamed.f32" --expert-slots "$k" \
      --expert-policy "$policy" 2>"$tmp/err"
    grep -q "misses" "$tmp/err" || { echo "$name: no expert statistics"; cat "$tmp/err"; exit 1; }
    same_logits "$name: streamed ($policy) against resident" "$tmp/$name.packed.f32" "$tmp/$name.streamed.f32" "$bytes"
    got=$("$bin" run -m "$tmp/$name" --ids "$mids" -n 12 --ignore-eos --print-ids --expert-slots "$k" \
      --expert-policy "$policy" 2>/dev/null | tail -n 1)
    [ "$got" = "$want" ] || { echo "$name: streamed ids differ ($policy): $got vs $want"; exit 1; }
  done
  echo "ok   $name: packed = folder, streamed in $k slots (LRU, LFU) = resident, bit for bit; greedy = transformers'"
done

# Served: four prompts together, then each alone, greedy; every answer must be `seedling run`'s greedy ids.
complete() {  # complete PROMPT_IDS: the ids of the greedy completion of 10 tokens
  curl -s "$url/v1/completions" -d "{\"prompt\": [$1], \"max_tokens\": 10, \"temperature\": 0, \"ignore_eos\": true}" |
    python3 -c 'import json,re,sys; print(",".join(re.findall(r"t(\d+)", json.load(sys.stdin)["choices"][0]["text"])))'
}
# The fourth shares the first's prefix: asked after it, the server may reuse that prefix (a recurrent model's
# scheduler recomputes it from position 0 instead), and its answer must still be its own alone.
prompts=("5,17,99,3" "200,31,7,7,64,12" "44" "5,17,99,3,8,1")
for spec in "${specs[@]}"; do
  name=${spec%%/*}  # the folder packed above
  id_tokenizer "$tmp/$name"
  echo "{% for m in messages %}{{ m['content'] }}{% endfor %}" >"$tmp/$name/chat_template.jinja"
  for i in 0 1 2 3; do
    want[i]=$("$bin" run -m "$tmp/$name" --ids "${prompts[$i]}" -n 10 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
  done
  log=$tmp/$name.serve.err  # one per server: a file the last one wrote would already say "listening on"
  "$bin" serve -m "$tmp/$name" --port 0 --expert-slots 8 2>"$log" &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$log" && break
    sleep 0.05
  done
  url=$(sed -n 's|^seedling serve: listening on \(http://.*\)$|\1|p' "$log")
  [ -n "$url" ] || { echo "$name: server did not start"; cat "$log"; kill "$pid"; exit 1; }
  for i in 0 1 2 3; do complete "${prompts[$i]}" >"$tmp/together.$i" & done
  wait $(jobs -p | grep -v "^$pid$")
  for i in 0 1 2 3; do
    alone=$(complete "${prompts[$i]}")
    together=$(cat "$tmp/together.$i")
    if [ "$together" != "${want[i]}" ] || [ "$alone" != "${want[i]}" ]; then
      echo "$name: prompt $i served batched [$together], alone [$alone], seedling run [${want[i]}]"
      kill "$pid"
      exit 1
    fi
  done
  kill -TERM "$pid"
  wait "$pid" || true
  echo "ok   $name: served, four completions together (two sharing a prefix) = each alone = seedling run's greedy ids"
done
