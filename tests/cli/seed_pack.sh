#!/usr/bin/env bash
# `seedling pack --experts p3|p4|s3` and `seedling synth --packed p4` end to end: the search shows blocks/s and an
# ETA, the manifest records the tier and --seed-search-seeds, mapped and streamed (2 slots) logits are byte for byte
# the same, a random p4 synth model loads and decodes, and bad seed input is one error line, exit 1, naming what is
# wrong (a wrong-size seed part, an out-of-range exponent naming file, layer, expert and part, a seed codec for dense
# matrices, an out-of-range --seed-search-seeds).
source "$(dirname "$0")/lib/common.bash"

for tier in p4 p3 s3; do
  "$bin" pack -m "$m/hf" -o "$tmp/$tier" --experts "$tier" --seed-search-seeds 32 2>"$tmp/err" >/dev/null
  grep -q "blocks/s" "$tmp/err" || { echo "$tier: no blocks/s in the search progress"; cat "$tmp/err"; exit 1; }
  grep -q "ETA" "$tmp/err" || { echo "$tier: no ETA in the search progress"; exit 1; }
  python3 - "$tmp/$tier/manifest.json" "$tier" <<'PY'
import json, sys
m, tier = json.load(open(sys.argv[1])), sys.argv[2]
assert m["source"]["experts"] == tier and m["source"]["seed_search_seeds"] == 32, m["source"]
for layer in m["experts"]:
    for part in ("gate", "up", "down"):
        assert layer[part]["codec"] == tier, layer[part]
PY
  "$bin" logits -m "$tmp/$tier" --ids "$ids" -o "$tmp/$tier.mapped.f32" 2>"$tmp/err"
  grep -q "mapped" "$tmp/err" || { echo "$tier: experts were not mapped"; cat "$tmp/err"; exit 1; }
  "$bin" logits -m "$tmp/$tier" --ids "$ids" -o "$tmp/$tier.streamed.f32" --expert-slots 2 2>/dev/null
  cmp -s "$tmp/$tier.mapped.f32" "$tmp/$tier.streamed.f32" ||
    { echo "$tier: streamed logits differ from mapped"; exit 1; }
  echo "ok   pack --experts $tier: progress with blocks/s and ETA, tier in the manifest, streamed = mapped bytes"
done

"$bin" synth --packed p4 --layers 2 --experts 4 --vocab 512 -o "$tmp/s" >/dev/null 2>&1
"$bin" run -m "$tmp/s" --ids 1,2,3 -n 2 --ignore-eos --print-ids >/dev/null 2>&1
"$bin" run -m "$tmp/s" --ids 1,2,3 -n 2 --ignore-eos --print-ids --expert-slots 8 >/dev/null 2>&1
python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert m['experts'][0]['down']['codec']=='p4'" \
  "$tmp/s/manifest.json"
echo "ok   synth --packed p4 writes random seed blobs that load (mapped and streamed) and decode"

# Bad input: one error line, exit 1 (expect_error, lib/common.bash).
expect_error "seed codec for dense matrices" "only routed experts" "$bin" pack -m "$m/hf" -o "$tmp/x" --dense p4
expect_error "--seed-search-seeds 0" "out of range" "$bin" pack -m "$m/hf" -o "$tmp/x" --experts p4 \
  --seed-search-seeds 0
[ ! -e "$tmp/x" ] && [ ! -e "$tmp/x.partial" ] || { echo "a refused pack left a folder"; exit 1; }

cp -r "$tmp/p4" "$tmp/w"
python3 - "$tmp/w/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["experts"][0]["up"]["bytes"] += 2
json.dump(m, open(sys.argv[1], "w"))
PY
expect_error "seed part whose manifest size disagrees with the layout" "experts\[0\].up.bytes.*p4" \
  "$bin" info -m "$tmp/w"

# Layer 0 expert 3: the gate's exponent bias becomes 100 and its first block's code 15 (e = 115 > 100).
cp -r "$tmp/p4" "$tmp/e"
python3 - "$tmp/e" <<'PY'
import json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
layer = m["experts"][0]
rows, cols = layer["gate"]["shape"]
n = rows * ((cols + 7) // 8)
at = layer["blobs"][3]["offset"] + layer["gate"]["offset"]
with open(d + "/" + layer["file"], "r+b") as f:
    f.seek(at); f.write(struct.pack("<i", 100))
    f.seek(at + 4 + 4 * n); b = f.read(1); f.seek(at + 4 + 4 * n); f.write(bytes([b[0] | 0x0F]))
PY
# Mapped: refused at open, after the placement line, before any token is computed.
if "$bin" logits -m "$tmp/e" --ids "$ids" -o "$tmp/e.f32" >"$tmp/out" 2>"$tmp/err"; then
  echo "out-of-range exponent: expected failure"; exit 1
fi
[ "$(grep -c "error" "$tmp/err")" -eq 1 ] || { echo "expected one error line, got:"; cat "$tmp/err"; exit 1; }
grep -q "experts-000.bin: layer 0 expert 3 gate (p4): block 0 has exponent code 15" "$tmp/err" ||
  { echo "the error does not name file, layer, expert, part and code:"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/e.f32" ] || { echo "logits were written from a bad blob"; exit 1; }
echo "ok   out-of-range exponent code: one error naming file, layer, expert and part, at open (mapped)"
