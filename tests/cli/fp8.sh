#!/usr/bin/env bash
# FP8 block-scaled experts as DeepSeek-V3 and the Qwen3 "-FP8" checkpoints release them (F8_E4M3 `*.weight` beside
# F32 `*.weight_scale_inv`, one scale per 32 x 32 block, quantization_config fp8), made here from qwen3_moe_a: every
# routed expert rounded to e4m3 at its block's max / 448. A second folder holds the same experts dequantized in F32.
# The FP8 folder packs as stored (fp8_g32 blobs, logits bit for bit the folder's), streams from disk bit for bit as
# resident, and `pack --experts q4_g64` transcodes it into the very bytes it makes from the dequantized copy.
source "$(dirname "$0")/lib/common.bash"

python3 - "$m/hf" "$tmp/fp8" "$tmp/deq" <<'PY'
import json, math, os, struct, sys
src, fp8_dir, deq_dir = sys.argv[1:]
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
data = raw[8 + n:]

def e4m3(c):  # the e4m3fn value of a code
    e, m = (c >> 3) & 15, c & 7
    v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if c & 0x80 else v
VALUES = [e4m3(c) for c in range(0x7F)]  # 0 .. 448, increasing

def nearest(v):  # the code of |v| rounded to nearest e4m3, ties to the even code, sign kept
    a = abs(v)
    best = min(range(0x7F), key=lambda c: (abs(VALUES[c] - a), c % 2))
    return best | (0x80 if v < 0 and best else 0)

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

def bf16_values(t):
    b = data[t["data_offsets"][0]:t["data_offsets"][1]]
    return [struct.unpack("<f", b"\0\0" + b[i:i + 2])[0] for i in range(0, len(b), 2)]

fp8, deq = {}, {}
for name, t in header.items():
    b = data[t["data_offsets"][0]:t["data_offsets"][1]]
    if ".mlp.experts." not in name or t["dtype"] != "BF16":
        fp8[name] = deq[name] = (t["dtype"], t["shape"], b)
        continue
    rows, cols = t["shape"]
    w = bf16_values(t)
    br, bc = math.ceil(rows / 32), math.ceil(cols / 32)
    scale = [0.0] * (br * bc)
    for r in range(rows):
        for k in range(cols):
            i = (r // 32) * bc + k // 32
            scale[i] = max(scale[i], abs(w[r * cols + k]))
    scale = [f32(s / 448) if s > 0 else 1.0 for s in scale]
    codes, vals = bytearray(rows * cols), []
    for r in range(rows):
        for k in range(cols):
            s = scale[(r // 32) * bc + k // 32]
            c = nearest(w[r * cols + k] / s)
            codes[r * cols + k] = c
            vals.append(f32(e4m3(c) * s))  # one float32 multiply, as the reader computes it
    fp8[name] = ("F8_E4M3", [rows, cols], bytes(codes))
    fp8[name + "_scale_inv"] = ("F32", [br, bc], struct.pack("<%df" % len(scale), *scale))
    deq[name] = ("F32", [rows, cols], struct.pack("<%df" % len(vals), *vals))

def write(folder, tensors, quantized):
    os.makedirs(folder)
    head, off = {}, 0
    for name, (dt, shape, b) in tensors.items():
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(b for _, _, b in tensors.values()))
    cfg = json.load(open(os.path.join(src, "config.json")))
    if quantized:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [32, 32]}
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))

write(fp8_dir, fp8, True)
write(deq_dir, deq, False)
PY

k=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['num_experts_per_tok'])" "$m/hf/config.json")
"$bin" logits -m "$tmp/fp8" --ids "$ids" -o "$tmp/fp8.f32" 2>/dev/null
"$bin" logits -m "$tmp/deq" --ids "$ids" -o "$tmp/deq.f32" 2>/dev/null
python3 - "$tmp/fp8.f32" "$tmp/deq.f32" <<'PY'
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
assert len(a) == len(b) > 0, (len(a), len(b))
fa, fb = (struct.unpack("<%df" % (len(x) // 4), x) for x in (a, b))
worst = max(abs(x - y) for x, y in zip(fa, fb))
# The same weight values through the fp8_g32 kernel and the f32 one: float rounding of sums, not FP8 error.
assert worst < 1e-4, worst
print("ok   fp8 folder = its dequantized f32 copy within %.2g (float rounding)" % worst)
PY

"$bin" pack -m "$tmp/fp8" -o "$tmp/fp8.packed" >/dev/null 2>&1
grep -q '"codec": "fp8_g32"' "$tmp/fp8.packed/manifest.json" || { echo "pack did not keep fp8_g32"; exit 1; }
"$bin" logits -m "$tmp/fp8.packed" --ids "$ids" -o "$tmp/packed.f32" 2>/dev/null
cmp -s "$tmp/fp8.f32" "$tmp/packed.f32" || { echo "fp8: packed logits differ from the folder's"; exit 1; }
"$bin" logits -m "$tmp/fp8.packed" --ids "$ids" -o "$tmp/streamed.f32" --expert-slots "$k" 2>/dev/null
cmp -s "$tmp/packed.f32" "$tmp/streamed.f32" || { echo "fp8: streamed logits differ from resident"; exit 1; }
echo "ok   fp8 packed as stored (fp8_g32) = folder, streamed in $k slots = resident, bit for bit"

"$bin" pack -m "$tmp/fp8" -o "$tmp/fp8.q4" --experts q4_g64 >/dev/null 2>&1
"$bin" pack -m "$tmp/deq" -o "$tmp/deq.q4" --experts q4_g64 >/dev/null 2>&1
for l in "$tmp"/fp8.q4/experts-*; do
  cmp -s "$l" "$tmp/deq.q4/$(basename "$l")" || { echo "fp8: q4_g64 transcode of $(basename "$l") differs"; exit 1; }
done
ls "$tmp"/fp8.q4/experts-* >/dev/null || { echo "fp8: no expert files packed"; exit 1; }
echo "ok   pack --experts q4_g64 from fp8 = from its dequantized values, byte for byte"
