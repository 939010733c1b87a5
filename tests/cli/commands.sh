#!/usr/bin/env bash
# The main commands end to end on a tiny golden checkpoint: run --print-ids gives transformers' greedy tokens,
# logits writes [n x vocab] float32 equal to the reference within 1e-3, info and bench print their figures.
source "$(dirname "$0")/lib/common.bash"
want=$(reference_ids greedy)

got=$("$bin" run -m "$m/hf" --ids "$ids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
[ "$got" = "$want" ] || { echo "run --print-ids: got $got, want $want"; exit 1; }
echo "ok   run --print-ids equals transformers' greedy continuation"

"$bin" logits -m "$m/hub" --ids "$ids" -o "$tmp/l.f32" 2>/dev/null
python3 - "$tmp/l.f32" "$m/logits.f32" <<'PY'
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
assert len(a) == len(b), (len(a), len(b))
n = len(a) // 4
err = max(abs(x - y) for x, y in zip(struct.unpack('<%df' % n, a), struct.unpack('<%df' % n, b)))
assert err <= 1e-3, err
print("ok   logits file matches the reference, max |diff| %.2e" % err)
PY

"$bin" info -m "$m/hf" >"$tmp/info"
grep -q "family:           qwen3_moe" "$tmp/info"
grep -q "bytes per token:" "$tmp/info"
echo "ok   info"

"$bin" bench -m "$m/hf" --prompt-tokens 16 -n 4 --repeats 1 >"$tmp/bench" 2>/dev/null
grep -q "of the measured read bandwidth" "$tmp/bench"
echo "ok   bench"

# Sampling with a seed is repeatable.
a=$("$bin" run -m "$m/hf" --ids "$ids" -n 8 --temp 0.8 --top-p 0.9 --seed 7 --print-ids 2>/dev/null | tail -n 1)
b=$("$bin" run -m "$m/hf" --ids "$ids" -n 8 --temp 0.8 --top-p 0.9 --seed 7 --print-ids 2>/dev/null | tail -n 1)
[ "$a" = "$b" ] || { echo "seeded sampling differs: $a vs $b"; exit 1; }
echo "ok   seeded sampling repeats"
