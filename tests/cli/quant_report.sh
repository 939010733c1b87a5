#!/usr/bin/env bash
# `seedling quant-report --gaussian N --json`: one object per codec with the four keys, seeds ranked sanely
# (affine error grows with the group, P4 under P3, every codec above its rate-distortion bound), and bad N rejected with one error line.
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
exit $failures
