#!/usr/bin/env bash
# Every family's tiny checkpoint (olmoe, qwen2_moe, glm4_moe, gpt_oss in bf16 and as released MXFP4) through the
# whole path: `pack` keeps the logits bit for bit; experts streamed from disk into the smallest slot cache (top-k
# slots: every token evicts) give the resident run's logits and greedy ids bit for bit, under LRU and LFU; and
# `seedling serve` answers three completions sent together exactly as it answers each alone (continuous batching
# changes no bit). The tiny checkpoints carry no tokenizer, so each gets a byte-level one of 256 tokens and a
# plain chat template.
source "$(dirname "$0")/lib/common.bash"

# byte_tokenizer DIR: a tokenizer.json whose 256 tokens are the bytes (GPT-2's byte-to-unicode map), no merges.
byte_tokenizer() {
  python3 - "$1/tokenizer.json" <<'EOF'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
           "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                               "use_regex": False},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": []}}, open(sys.argv[1], "w"))
EOF
}

for spec in olmoe_a/hf qwen2_moe_a/hf glm4_moe_a/hf gpt_oss_a/hf gpt_oss_mxfp4/hub; do
  name=${spec%%/*}
  src=$data/models/$spec
  mids=$(python3 -c "import json,sys;print(','.join(map(str,json.load(open(sys.argv[1]))['ids'])))" \
    "$data/models/$name/reference.json")
  k=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['num_experts_per_tok'])" "$src/config.json")
  "$bin" logits -m "$src" --ids "$mids" -o "$tmp/$name.hf.f32" 2>/dev/null
  "$bin" pack -m "$src" -o "$tmp/$name" >/dev/null 2>&1
  "$bin" logits -m "$tmp/$name" --ids "$mids" -o "$tmp/$name.packed.f32" 2>/dev/null
  cmp -s "$tmp/$name.hf.f32" "$tmp/$name.packed.f32" || { echo "$name: packed logits differ from the folder's"; exit 1; }
  want=$("$bin" run -m "$tmp/$name" --ids "$mids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
  for policy in lru lfu; do
    "$bin" logits -m "$tmp/$name" --ids "$mids" -o "$tmp/$name.streamed.f32" --expert-slots "$k" \
      --expert-policy "$policy" 2>"$tmp/err"
    grep -q "misses" "$tmp/err" || { echo "$name: no expert statistics"; cat "$tmp/err"; exit 1; }
    cmp -s "$tmp/$name.packed.f32" "$tmp/$name.streamed.f32" || { echo "$name: streamed logits differ ($policy)"; exit 1; }
    got=$("$bin" run -m "$tmp/$name" --ids "$mids" -n 12 --ignore-eos --print-ids --expert-slots "$k" \
      --expert-policy "$policy" 2>/dev/null | tail -n 1)
    [ "$got" = "$want" ] || { echo "$name: streamed ids differ ($policy): $got vs $want"; exit 1; }
  done
  echo "ok   $name: packed = folder, streamed in $k slots (LRU, LFU) = resident, bit for bit"
done

# Served: three prompts together, then each alone, greedy; the completions must be the same strings.
for name in olmoe_a qwen2_moe_a glm4_moe_a gpt_oss_a gpt_oss_mxfp4; do
  byte_tokenizer "$tmp/$name"
  echo "{% for m in messages %}{{ m['content'] }}{% endfor %}" >"$tmp/$name/chat_template.jinja"
  "$bin" serve -m "$tmp/$name" --port 0 --expert-slots 8 2>"$tmp/serve.err" &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$tmp/serve.err" && break
    sleep 0.05
  done
  url=$(sed -n 's|^seedling serve: listening on \(http://.*\)$|\1|p' "$tmp/serve.err")
  [ -n "$url" ] || { echo "$name: server did not start"; cat "$tmp/serve.err"; exit 1; }
  complete() {  # complete PROMPT_IDS: the greedy completion of 10 tokens
    curl -s "$url/v1/completions" -d "{\"prompt\": [$1], \"max_tokens\": 10, \"temperature\": 0, \"ignore_eos\": true}" |
      python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["choices"][0]["text"]))'
  }
  prompts=("5,17,99,3" "200,31,7,7,64,12" "44")
  for i in 0 1 2; do complete "${prompts[$i]}" >"$tmp/together.$i" & done
  wait $(jobs -p | grep -v "^$pid$")
  for i in 0 1 2; do
    alone=$(complete "${prompts[$i]}")
    [ -s "$tmp/together.$i" ] && [ "$(cat "$tmp/together.$i")" = "$alone" ] ||
      { echo "$name: prompt $i batched $(cat "$tmp/together.$i") vs alone $alone"; kill "$pid"; exit 1; }
  done
  kill -TERM "$pid"
  wait "$pid" || true
  echo "ok   $name: served, three completions together = each alone"
done
