#!/usr/bin/env bash
# `seedling pack` and `seedling synth --packed` end to end: a bf16 pack gives the HF folder's logits byte for byte,
# info and run work on packed folders, a q8 synth model loads and decodes, and bad input is one error line, exit 1,
# with nothing left behind that looks like a packed folder.
source "$(dirname "$0")/lib/common.bash"
want=$(reference_ids greedy)

"$bin" pack -m "$m/hf" -o "$tmp/p" --experts bf16 2>"$tmp/err" >/dev/null
grep -q "MB/s" "$tmp/err" || { echo "no progress bar with a rate"; cat "$tmp/err"; exit 1; }
grep -q "ETA" "$tmp/err" || { echo "no ETA in the progress bar"; exit 1; }
[ -f "$tmp/p/manifest.json" ] && [ -f "$tmp/p/resident.bin" ] && [ -f "$tmp/p/experts-000.bin" ]
[ ! -e "$tmp/p.partial" ] || { echo "p.partial left behind"; exit 1; }
[ -f "$tmp/p/generation_config.json" ] || { echo "generation_config.json not copied"; exit 1; }
echo "ok   pack writes manifest, resident.bin, experts files, copies generation_config.json, shows rate and ETA"

"$bin" logits -m "$m/hf" --ids "$ids" -o "$tmp/hf.f32" 2>/dev/null
"$bin" logits -m "$tmp/p" --ids "$ids" -o "$tmp/p.f32" 2>/dev/null
cmp -s "$tmp/hf.f32" "$tmp/p.f32" || { echo "packed bf16 logits differ from the HF folder"; exit 1; }
echo "ok   packed bf16 logits are byte-identical to the HF folder"

got=$("$bin" run -m "$tmp/p" --ids "$ids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
[ "$got" = "$want" ] || { echo "run on packed: got $got, want $want"; exit 1; }
echo "ok   run on a packed folder gives transformers' greedy continuation"

"$bin" pack -m "$m/hf" -o "$tmp/q" --experts q4_g32 --dense q8_g64 >/dev/null 2>&1
"$bin" info -m "$tmp/q" >"$tmp/info"
grep -q "family:           qwen3_moe" "$tmp/info"
hf_bpt=$("$bin" info -m "$m/hf" | sed -n 's/^bytes per token: *\([0-9.e+]*\).*/\1/p')
q_bpt=$(sed -n 's/^bytes per token: *\([0-9.e+]*\).*/\1/p' "$tmp/info")
python3 -c "import sys; a,b=float('$hf_bpt'),float('$q_bpt'); sys.exit(0 if b < 0.6*a else 1)" ||
  { echo "bytes per token at q4/q8 ($q_bpt) not well below bf16 ($hf_bpt)"; exit 1; }
echo "ok   info on a q4/q8 packed folder reports bytes per token at the stored codecs ($q_bpt vs $hf_bpt)"

"$bin" synth --packed q8_g32 --layers 2 --experts 4 --vocab 512 -o "$tmp/s" >/dev/null 2>&1
"$bin" info -m "$tmp/s" | grep -q "layers:           2"
"$bin" run -m "$tmp/s" --ids 1,2,3 -n 2 --ignore-eos --print-ids >/dev/null 2>&1
python3 - "$tmp/s/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format"] == "seedling-packed" and m["version"] == 1
for layer in m["experts"]:
    assert layer["gate"]["codec"] == "q8_g32", layer["gate"]
    assert all(b["offset"] % 4096 == 0 for b in layer["blobs"])
PY
echo "ok   synth --packed q8_g32 writes a packed Qwen3-30B-A3B-shaped model that info and run load"

# The Qwen3.5-35B-A3B shape cut to 4 layers: three Gated DeltaNet layers then gated full attention, each with 256
# experts' top-8 (here 4 experts) and the shared expert; info reports the plan and the recurrent state, run decodes.
"$bin" synth --preset qwen3.5-35b-a3b --packed q8_g32 --layers 4 --experts 4 --vocab 512 -o "$tmp/h" >/dev/null 2>&1
"$bin" info -m "$tmp/h" >"$tmp/h.info"
grep -q "family:           qwen3_5_moe_text" "$tmp/h.info" || { cat "$tmp/h.info"; exit 1; }
grep -q "layers 0-2:       gated delta net (16 key heads of 128, 32 value heads of 128, conv kernel 4)" "$tmp/h.info" ||
  { cat "$tmp/h.info"; exit 1; }
grep -q "layer 3:          attention (q/k norm per head, sigmoid output gate)" "$tmp/h.info" || { cat "$tmp/h.info"; exit 1; }
grep -q "shared expert (512, sigmoid-gated)" "$tmp/h.info" || { cat "$tmp/h.info"; exit 1; }
grep -q "over 64 of 256 dims" "$tmp/h.info" || { cat "$tmp/h.info"; exit 1; }
"$bin" run -m "$tmp/h" --ids 1,2,3 -n 2 --ignore-eos --print-ids >/dev/null 2>&1
echo "ok   synth --preset qwen3.5-35b-a3b writes the hybrid shape (Gated DeltaNet + gated attention) that info and run load"

"$bin" synth --packed q4_g64 --dense q4_g64 --layers 2 --experts 4 --vocab 512 -o "$tmp/sd" >/dev/null 2>&1
"$bin" run -m "$tmp/sd" --ids 1,2,3 -n 2 --ignore-eos --print-ids >/dev/null 2>&1
sd_bpt=$("$bin" info -m "$tmp/sd" | sed -n 's/^bytes per token: *\([0-9.e+]*\).*/\1/p')
"$bin" synth --packed q4_g64 --layers 2 --experts 4 --vocab 512 -o "$tmp/sb" >/dev/null 2>&1
sb_bpt=$("$bin" info -m "$tmp/sb" | sed -n 's/^bytes per token: *\([0-9.e+]*\).*/\1/p')
python3 - "$tmp/sd/manifest.json" "$tmp/sb/manifest.json" "$sd_bpt" "$sb_bpt" <<'PY'
import json, sys
d, b = (json.load(open(p)) for p in sys.argv[1:3])
assert d["source"]["dense"] == "q4_g64" and b["source"]["dense"] == "bf16", (d["source"], b["source"])
for name, t in d["resident"]["tensors"].items():
    kept = len(t["shape"]) == 1 or name.endswith("mlp.gate.weight")  # norms and routers stay bf16, as pack does
    assert t["codec"] == ("bf16" if kept else "q4_g64"), (name, t["codec"])
assert all(t["codec"] == "bf16" for t in b["resident"]["tensors"].values())
assert float(sys.argv[3]) < 0.5 * float(sys.argv[4]), (sys.argv[3], sys.argv[4])
PY
expect_error "seed codec for synth --dense" "only routed experts" "$bin" synth --packed q4_g64 --dense p3 --layers 2 \
  --experts 4 --vocab 512 -o "$tmp/sx"
expect_error "unknown synth --dense codec" "q3_g16" "$bin" synth --packed q4_g64 --dense q3_g16 --layers 2 \
  --experts 4 --vocab 512 -o "$tmp/sx"
echo "ok   synth --dense q4_g64 records the dense codec, packs attention/embedding/head (norms, routers bf16) and runs"

# Bad input: one error line, exit 1 (expect_error, lib/common.bash).
expect_error "unknown --experts codec" "q3_g16" "$bin" pack -m "$m/hf" -o "$tmp/x" --experts q3_g16
[ ! -e "$tmp/x" ] && [ ! -e "$tmp/x.partial" ] || { echo "bad codec left a folder"; exit 1; }
expect_error "existing output without --force" "exists" "$bin" pack -m "$m/hf" -o "$tmp/p"
expect_error "missing model folder" "no such model folder" "$bin" pack -m "$tmp/none" -o "$tmp/y"
cp -r "$tmp/p" "$tmp/t"
f=$tmp/t/experts-002.bin
truncate -s $(($(stat -c %s "$f") - 4096)) "$f"
expect_error "truncated expert file" "truncated" "$bin" info -m "$tmp/t"
cp -r "$tmp/p" "$tmp/c"
python3 - "$tmp/c/resident.bin" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0x5a]))
PY
expect_error "corrupted resident tensor" "checksum" "$bin" info -m "$tmp/c"
cp -r "$tmp/p" "$tmp/n"
rm "$tmp/n/resident.bin"
expect_error "manifest naming a missing file" "resident.bin" "$bin" info -m "$tmp/n"
