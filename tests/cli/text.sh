#!/usr/bin/env bash
# The text path end to end on the shipped demo model, against figures transformers recorded when it was trained:
# tokenize = HF tokenizers' ids; run -p greedy = transformers' greedy ids; perplexity within 0.5%; detokenize, stop
# strings, --chat and the interactive chat.
set -euo pipefail
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ref=$data/demo

python3 -c "import json;print(','.join(map(str,json.load(open('$ref/ppl_reference.json'))['token_ids'])))" >"$tmp/want_ids"
"$bin" tokenize --no-special <"$ref/heldout.txt" | tail -n 1 >"$tmp/got_ids"
cmp -s "$tmp/want_ids" "$tmp/got_ids" || { echo "tokenize differs from HF tokenizers"; exit 1; }
echo "ok   tokenize of the held-out file equals HF tokenizers ($(tr ',' '\n' <"$tmp/got_ids" | wc -l) ids)"

"$bin" perplexity -f "$ref/heldout.txt" --ctx 256 2>/dev/null >"$tmp/ppl"
python3 - "$tmp/ppl" "$ref/ppl_reference.json" <<'PY'
import json, re, sys
got = float(re.search(r"perplexity: ([0-9.]+)", open(sys.argv[1]).read()).group(1))
want = json.load(open(sys.argv[2]))["ppl"]
rel = abs(got - want) / want
assert rel <= 0.005, (got, want)
print("ok   perplexity %.4f vs transformers %.4f (%.4f%%)" % (got, want, 100 * rel))
PY

python3 - "$ref/greedy_reference.json" >"$tmp/cases" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["prompts"]:
    print(json.dumps(p["prompt"]) + "\t" + ",".join(map(str, p["output_ids"])) + "\t" + json.dumps(p["completion_text"]))
PY
while IFS=$'\t' read -r prompt want text; do
  p=$(python3 -c "import json,sys;print(json.loads(sys.argv[1]),end='x')" "$prompt")
  p=${p%x}  # the x keeps command substitution from eating the prompt's trailing newlines
  got=$("$bin" run -p "$p" -n 32 --print-ids 2>/dev/null | tail -n 1)
  [ "$got" = "$want" ] || { echo "run -p $prompt: got $got, want $want"; exit 1; }
  "$bin" detokenize --ids "$want" >"$tmp/text"
  python3 -c "import json,sys;assert open(sys.argv[1]).read()==json.loads(sys.argv[2])" "$tmp/text" "$text" ||
    { echo "detokenize differs for $prompt"; exit 1; }
done <"$tmp/cases"
echo "ok   run -p: greedy ids of three prompts equal transformers'; detokenize equals its text"

# A stop string ends generation and is not printed.
"$bin" run -p $'def fibonacci(n):\n' -n 32 --stop Parameters >"$tmp/stop" 2>/dev/null
grep -q 'fibonacci function' "$tmp/stop" && ! grep -q Parameters "$tmp/stop" || { echo "stop string"; cat "$tmp/stop"; exit 1; }
echo "ok   --stop cuts the output before the stop string"

"$bin" run --chat -p "Write a function" -n 16 >"$tmp/chat1" 2>"$tmp/chat1.err"
grep -q "decode:" "$tmp/chat1.err" || { echo "run --chat"; cat "$tmp/chat1.err"; exit 1; }
echo "ok   run --chat"

printf 'hello\nwrite a loop\n/system You write Python.\nagain\n/reset\nhi\n/exit\n' | "$bin" chat -n 8 --seed 1 >"$tmp/chat2" 2>"$tmp/chat2.err"
[ "$(grep -c '^\[prompt' "$tmp/chat2.err")" -eq 4 ] || { echo "chat turns"; cat "$tmp/chat2.err"; exit 1; }
grep -q "conversation cleared" "$tmp/chat2" && grep -q "system message set" "$tmp/chat2" || { echo "chat commands"; exit 1; }
# The second turn reuses the cached prefix: fewer new prompt tokens than its whole prompt.
grep '^\[prompt' "$tmp/chat2.err" | sed -n 2p | python3 -c "
import re,sys
m=re.search(r'prompt (\d+) new of (\d+)', sys.stdin.read()); assert m and int(m.group(1)) < int(m.group(2)), m"
echo "ok   chat: four turns, /system, /reset, prefix reuse"

# Bad input: invalid UTF-8 in a prompt, a malformed tokenizer.json.
printf '\xff\xfe bad' | "$bin" tokenize >/dev/null 2>"$tmp/err" && { echo "invalid UTF-8 accepted"; exit 1; }
grep -q "UTF-8" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}}' >"$tmp/tokenizer.json"
echo hi | "$bin" tokenize -m "$tmp/tokenizer.json" >/dev/null 2>"$tmp/err" && { echo "malformed tokenizer accepted"; exit 1; }
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; exit 1; }
echo "ok   invalid UTF-8 and a malformed tokenizer.json give one error line: $(cat "$tmp/err")"
