#!/usr/bin/env bash
# `seedling imatrix` on the bundled demo model: the file holds every layer's energies with row counts that add up
# (each token reaches top-k experts per MoE layer), and bad input is one error line naming the file or flag.
# Usage: imatrix.sh SEEDLING_BINARY TEST_DATA_DIR
source "$(dirname "$0")/lib/common.bash"
text=$data/demo/heldout.txt

"$bin" imatrix -f "$text" -o "$tmp/im.safetensors" --ctx 64 --max-tokens 200 -t 2 >"$tmp/out" 2>/dev/null
grep -q "(200 tokens in 4 windows of at most 64)" "$tmp/out" || { cat "$tmp/out"; exit 1; }
python3 - "$tmp/im.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
meta = h.pop("__metadata__")
assert meta["seedling_format"] == "seedling-imatrix" and meta["tokens"] == "200", meta
def arr(name):
    t = h[name]; lo, hi = t["data_offsets"]
    fmt = {"F32": "f", "I64": "q"}[t["dtype"]]
    return t["shape"], struct.unpack("<%d%s" % ((hi - lo) // struct.calcsize(fmt), fmt), data[lo:hi])
layers = 6
assert len(h) == layers * 6, sorted(h)
for l in range(layers):
    _, attn_rows = arr("layers.%d.attn.rows" % l)
    assert attn_rows == (200,), attn_rows
    shape, rows = arr("layers.%d.experts.rows" % l)
    assert shape == [32] and sum(rows) == 200 * 4, (l, rows)  # demo model: 32 experts, top-4
    shape, gu = arr("layers.%d.experts.gate_up.sum_sq" % l)
    assert shape == [32, 192] and min(gu) >= 0, shape
    for e in range(32):
        assert (sum(gu[e * 192:(e + 1) * 192]) > 0) == (rows[e] > 0), (l, e)
    shape, _ = arr("layers.%d.experts.down.sum_sq" % l)
    assert shape == [32, 32], shape
print("ok   imatrix file: 6 layers, rows add up to 4 per token, energies where rows went")
PY

# expect_error NAME EXPECTED_SUBSTRING -- COMMAND...
expect_error() {
  local name=$1 want=$2
  shift 3
  set +e
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  set -e
  if [ "$rc" -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL $name: exit $rc, wanted '$want':"; cat "$tmp/err"; exit 1
  fi
  echo "ok   $name: $(cat "$tmp/err")"
}
expect_error missing-text "$tmp/nope.txt: cannot open" -- "$bin" imatrix -f "$tmp/nope.txt" -o "$tmp/x.safetensors"
: >"$tmp/empty.txt"
expect_error empty-text "has no tokens" -- "$bin" imatrix -f "$tmp/empty.txt" -o "$tmp/x.safetensors"
expect_error unwritable "$tmp/no/dir/x.safetensors: cannot open for writing" -- \
  "$bin" imatrix -f "$text" --max-tokens 8 -o "$tmp/no/dir/x.safetensors"

# pack --imatrix: only with a seed tier, and only a file of the same model.
"$bin" imatrix -f "$text" --max-tokens 64 -o "$tmp/demo.safetensors" -t 2 >/dev/null 2>&1
expect_error imatrix-affine "--imatrix weights the seed search; --experts 'q4_g32' is not a seed tier" -- \
  "$bin" pack -m "$m/hf" -o "$tmp/p" --experts q4_g32 --imatrix "$tmp/demo.safetensors"
expect_error imatrix-other-model "tensor 'layers.0.attn.qkv.sum_sq' has shape [192], the model expects [64]" -- \
  "$bin" pack -m "$m/hf" -o "$tmp/p" --experts p4 --seed-search-seeds 16 --imatrix "$tmp/demo.safetensors"
expect_error imatrix-missing "$tmp/nope.safetensors" -- \
  "$bin" pack -m "$m/hf" -o "$tmp/p" --experts p4 --seed-search-seeds 16 --imatrix "$tmp/nope.safetensors"
