#!/usr/bin/env bash
# The main commands end to end on a tiny golden checkpoint: run --print-ids gives transformers' greedy tokens,
# logits writes [n x vocab] float32 equal to the reference within 1e-3 (and the same bytes fed in pieces), info and
# bench print their figures.
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

# --rows-per-forward: the prompt in forwards of 1 and of 5 rows gives the one forward's logits bytes (on the CPU a row's
# bits do not depend on the rows beside it); 0 is refused.
for n in 1 5; do
  "$bin" logits -m "$m/hub" --ids "$ids" -o "$tmp/l$n.f32" --rows-per-forward "$n" 2>/dev/null
  cmp -s "$tmp/l.f32" "$tmp/l$n.f32" || { echo "logits --rows-per-forward $n differ from one forward"; exit 1; }
done
if "$bin" logits -m "$m/hub" --ids "$ids" -o "$tmp/x.f32" --rows-per-forward 0 2>"$tmp/err"; then
  echo "--rows-per-forward 0 was accepted"; exit 1
fi
grep -q -- "--rows-per-forward" "$tmp/err" || { echo "the refusal does not name --rows-per-forward: $(cat "$tmp/err")"; exit 1; }
echo "ok   logits --rows-per-forward 1 and 5 = one forward, bit for bit; 0 refused"

# A 300-token prompt of the demo model (2 KV heads) token by token on 5 threads (attention split into chunks of 128
# keys across the threads, model/decoder.cpp) gives the bytes of one forward on 1 thread (a row a KV head at a time).
demo=$data/../../models/seedling-demo-moe
long=$(seq -s, 10 309)
"$bin" logits -m "$demo" --ids "$long" -o "$tmp/one.f32" -t 1 2>/dev/null
"$bin" logits -m "$demo" --ids "$long" -o "$tmp/split.f32" -t 5 --rows-per-forward 1 2>/dev/null
cmp -s "$tmp/one.f32" "$tmp/split.f32" || { echo "300 ids token by token on 5 threads differ from one forward"; exit 1; }
echo "ok   300 ids token by token on 5 threads (attention chunks across threads) = one forward on 1 thread"

"$bin" info -m "$m/hf" >"$tmp/info"
grep -q "family:           qwen3_moe" "$tmp/info"
grep -q "bytes per token:" "$tmp/info"
echo "ok   info"

"$bin" bench -m "$m/hf" --prompt-tokens 16 -n 4 --repeats 1 >"$tmp/bench" 2>/dev/null
grep -q "of the measured read bandwidth" "$tmp/bench"
echo "ok   bench"
# A sequence of the hybrid qwen3_next_a (3 linear layers: conv windows and delta-rule states; 1 attention layer: rows)
# allocated alone: its resident set grows by what KvCache computes, within 64 kB (pages; measured 0.147 of 0.148 MB).
"$bin" bench -m "$data/models/qwen3_next_a/hf" --prompt-tokens 16 -n 4 --repeats 1 >"$tmp/bench" 2>/dev/null
line=$(grep "^one sequence at 256 positions: .* recurrent state); measured: RSS " "$tmp/bench") ||
  { echo "bench printed no measured sequence memory:"; cat "$tmp/bench"; exit 1; }
computed=$(sed 's/.*positions: \([0-9.]*\) MB computed.*/\1/' <<<"$line")
measured=$(sed 's/.*measured: RSS \([-+0-9.]*\) MB.*/\1/' <<<"$line")
awk -v c="$computed" -v m="$measured" 'BEGIN { d = m - c; exit !(c > 0.1 && d <= 0.064 && d >= -0.064) }' ||
  { echo "bench: a sequence measured $measured MB of RSS, computed $computed MB"; exit 1; }
echo "ok   bench on a hybrid: one sequence's RSS growth $measured MB = computed $computed MB within 64 kB"

# Sampling with a seed is repeatable.
a=$("$bin" run -m "$m/hf" --ids "$ids" -n 8 --temp 0.8 --top-p 0.9 --seed 7 --print-ids 2>/dev/null | tail -n 1)
b=$("$bin" run -m "$m/hf" --ids "$ids" -n 8 --temp 0.8 --top-p 0.9 --seed 7 --print-ids 2>/dev/null | tail -n 1)
[ "$a" = "$b" ] || { echo "seeded sampling differs: $a vs $b"; exit 1; }
echo "ok   seeded sampling repeats"

# --cpu-dot: int8 activations on affine weights (the default) give SEEDLING_CPU_DOT=int8's bytes, and not the float
# path's; a value other than float or int8 is refused.
"$bin" pack -m "$m/hf" --experts q4_g32 --dense q4_g32 -o "$tmp/q4" >/dev/null 2>&1
"$bin" logits -m "$tmp/q4" --ids "$ids" --cpu-dot int8 -o "$tmp/int8.f32" 2>/dev/null
SEEDLING_CPU_DOT=int8 "$bin" logits -m "$tmp/q4" --ids "$ids" -o "$tmp/env.f32" 2>/dev/null
"$bin" logits -m "$tmp/q4" --ids "$ids" --cpu-dot float -o "$tmp/float.f32" 2>/dev/null
[ -s "$tmp/int8.f32" ] && cmp -s "$tmp/int8.f32" "$tmp/env.f32" || { echo "--cpu-dot int8 differs from SEEDLING_CPU_DOT=int8"; exit 1; }
cmp -s "$tmp/int8.f32" "$tmp/float.f32" && { echo "--cpu-dot int8 gave the float path's bytes"; exit 1; }
"$bin" logits -m "$tmp/q4" --ids "$ids" -o "$tmp/default.f32" 2>/dev/null
cmp -s "$tmp/int8.f32" "$tmp/default.f32" || { echo "the default is not int8 activations"; exit 1; }
if "$bin" logits -m "$tmp/q4" --ids "$ids" --cpu-dot fast -o "$tmp/x.f32" 2>"$tmp/err"; then
  echo "--cpu-dot fast was accepted"; exit 1
fi
grep -q -- "--cpu-dot" "$tmp/err" || { echo "the refusal does not name --cpu-dot: $(cat "$tmp/err")"; exit 1; }
echo "ok   --cpu-dot int8 = SEEDLING_CPU_DOT=int8 = the default, not float; others refused"
