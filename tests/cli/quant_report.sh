#!/usr/bin/env bash
# `seedling quant-report`: --gaussian N --json gives one object per codec with the four keys, seeds ranked sanely
# (affine error grows with the group, P4 under P3, every codec above its rate-distortion bound); -m on the demo model
# (routed experts, --tensor) the same ranks over sampled rows; --against a bf16 pack gives KLD exactly 0 and a q4 pack
# KLD > 0; bad input is one error line each.
# Usage: quant_report.sh SEEDLING_BINARY TEST_DATA_DIR
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

if ! "$bin" quant-report --gaussian 4096 --seeds 256 --json -q >"$tmp/out" 2>"$tmp/err"; then
  echo "FAIL quant-report exited non-zero:"; cat "$tmp/err"; exit 1
fi
python3 - "$tmp/out" <<'PY' || failures=$((failures + 1))
import json, sys
rows = json.load(open(sys.argv[1]))
names = [r["codec"] for r in rows]
want = ["bf16", "int8_g64", "int4_g32", "int4_g64", "int4_g128", "int3_g64", "p3", "p4", "s3"]
assert names == want, names
for r in rows:
    assert set(r) == {"codec", "bits_per_weight", "rel_mse", "bound_rel_mse"}, r
    assert abs(r["bound_rel_mse"] - 2 ** (-2 * r["bits_per_weight"])) < 1e-12 * max(1, r["bound_rel_mse"]), r
    assert r["rel_mse"] > r["bound_rel_mse"], r  # nothing beats the Gaussian rate-distortion bound
by = {r["codec"]: r for r in rows}
# 256 seeds only (seconds, not minutes): seeds must still beat the best single random direction by far.
assert by["p4"]["rel_mse"] < by["p3"]["rel_mse"] < 0.5, (by["p4"], by["p3"])
assert by["int4_g32"]["rel_mse"] < by["int4_g64"]["rel_mse"] < by["int4_g128"]["rel_mse"] < by["int3_g64"]["rel_mse"]
assert abs(by["p4"]["bits_per_weight"] - 4.5) < 0.01 and abs(by["s3"]["bits_per_weight"] - 3.0) < 0.02
print("ok   quant-report --json: 9 codecs, keys, bounds")
PY

"$bin" quant-report --gaussian 1000 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "not a multiple of the row length 2048" "$tmp/err"; then
  echo "FAIL bad N: exit $rc"; cat "$tmp/err"; failures=$((failures + 1))
else
  echo "ok   bad N: $(cat "$tmp/err")"
fi

# Model-level reports on the bundled demo model (bf16 weights; a few rows and seeds keep it to seconds).
demo=$(dirname "$0")/../../models/seedling-demo-moe
text=$2/demo/heldout.txt
if ! "$bin" quant-report -m "$demo" --rows 2 --seeds 64 --json -q -t 2 >"$tmp/model" 2>"$tmp/err"; then
  echo "FAIL quant-report -m:"; cat "$tmp/err"; exit 1
fi
"$bin" quant-report -m "$demo" --tensor model.layers.0.self_attn.q_proj.weight --rows 8 --seeds 64 --json -q -t 2 \
  >"$tmp/tensor" 2>"$tmp/err" || { echo "FAIL quant-report --tensor:"; cat "$tmp/err"; exit 1; }
python3 - "$tmp/model" "$tmp/tensor" <<'PY' || failures=$((failures + 1))
import json, sys
for path, weights in ((sys.argv[1], 6 * 32 * (2 * 2 * 192 + 2 * 32)), (sys.argv[2], 8 * 192)):
    rows = json.load(open(path))
    assert [r["codec"] for r in rows] == ["bf16", "int8_g32", "int4_g32", "int4_g64", "int4_g128", "int3_g64",
                                           "p3", "p4", "s3"], rows
    by = {r["codec"]: r for r in rows}
    assert all(r["weights"] == weights for r in rows), (path, rows)  # gate/up rows of 192, down rows of 32
    assert by["bf16"]["rel_mse"] == 0, by["bf16"]  # the model is stored in bf16
    assert 0 < by["int8_g32"]["rel_mse"] < by["int4_g32"]["rel_mse"] < by["int4_g64"]["rel_mse"] < by["int3_g64"]["rel_mse"]
    for r in rows[1:]:
        assert r["rel_mse"] > r["bound_rel_mse"], r
print("ok   quant-report -m (routed experts, 2 rows each) and --tensor: 9 codecs, sampled weights, ranks")
PY

# Logits against packed copies: bf16 is the same model (KLD exactly 0), q4_g32 is not.
"$bin" pack -m "$demo" -o "$tmp/bf16" --experts bf16 --dense bf16 >/dev/null 2>&1
"$bin" pack -m "$demo" -o "$tmp/q4" --experts q4_g32 >/dev/null 2>&1
for arm in bf16 q4; do
  "$bin" quant-report -m "$demo" --against "$tmp/$arm" -f "$text" --tokens 640 --ctx 128 --json -q -t 2 \
    >"$tmp/kld-$arm" 2>"$tmp/err" || { echo "FAIL quant-report --against $arm:"; cat "$tmp/err"; exit 1; }
done
python3 - "$tmp/kld-bf16" "$tmp/kld-q4" <<'PY' || failures=$((failures + 1))
import json, sys
same, q4 = (json.load(open(p)) for p in sys.argv[1:])
for r in (same, q4):
    assert r["tokens"] == 640 and r["windows"] == 5 and r["scored"] == 5 * 127, r
assert same["kld_mean"] == 0 and same["kld_max"] == 0 and same["top1_agreement"] == 1, same
assert same["ppl_reference"] == same["ppl_test"], same
assert q4["kld_mean"] > 0 and q4["kld_max"] >= q4["kld_mean"] and q4["top1_agreement"] < 1, q4
assert q4["ppl_reference"] == same["ppl_reference"] and q4["ppl_test"] != q4["ppl_reference"], q4
print("ok   --against: bf16 pack KLD 0, top-1 100%%; q4_g32 pack KLD %.4f, top-1 %.1f%%"
      % (q4["kld_mean"], 100 * q4["top1_agreement"]))
PY

# expect_error NAME EXPECTED_SUBSTRING -- COMMAND...
expect_error() {
  local name=$1 want=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL $name: exit $rc, wanted '$want':"; cat "$tmp/err"; failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
}
tiny=$2/models/qwen3_moe_a/hf
"$bin" pack -m "$tiny" -o "$tmp/tiny" >/dev/null 2>&1
expect_error no-source "give either --gaussian N or -m DIR" -- "$bin" quant-report
expect_error both-sources "give either --gaussian N or -m DIR" -- "$bin" quant-report --gaussian 2048 -m "$demo"
expect_error no-tensor "model.nope" -- "$bin" quant-report -m "$demo" --tensor model.nope -q
expect_error vector-tensor "expected a matrix" -- "$bin" quant-report -m "$demo" --tensor model.norm.weight -q
expect_error zero-rows "--rows 0 must be at least 1" -- "$bin" quant-report -m "$demo" --rows 0 -q
expect_error packed-weights "is a packed folder" -- "$bin" quant-report -m "$tmp/q4" -q
expect_error against-no-text "--against needs -f TEXT_FILE" -- "$bin" quant-report -m "$demo" --against "$tmp/q4"
expect_error against-other-model "has vocab_size 4096 but --against $tmp/tiny has 256" -- \
  "$bin" quant-report -m "$demo" --against "$tmp/tiny" -f "$text" -q
expect_error against-short-text "fewer than one window of --ctx 512" -- \
  "$bin" quant-report -m "$demo" --against "$tmp/q4" -f "$text" --tokens 100 -q
"$bin" imatrix -f "$text" --max-tokens 64 -o "$tmp/demo-im.safetensors" -t 2 >/dev/null 2>&1
expect_error imatrix-other-model "tensor 'layers.0.attn.qkv.sum_sq' has shape [192], the model expects [64]" -- \
  "$bin" quant-report -m "$tiny" --imatrix "$tmp/demo-im.safetensors" -q
expect_error imatrix-with-tensor "does not go with --tensor" -- \
  "$bin" quant-report -m "$demo" --tensor model.embed_tokens.weight --imatrix "$tmp/demo-im.safetensors" -q
exit $failures
