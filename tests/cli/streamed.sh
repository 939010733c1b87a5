#!/usr/bin/env bash
# Experts streamed from a packed folder into a RAM slot cache give the same bits as the mapped (resident) experts,
# under budgets that evict on every token, with either policy; the cache simulator replays a trace of a real run to
# the run's own measured LRU hit rate; bad budgets and corrupted blobs give one clear error line.
source "$(dirname "$0")/lib/common.bash"
"$bin" pack -m "$m/hf" -o "$tmp/tiny" >/dev/null 2>&1

"$bin" logits -m "$tmp/tiny" --ids "$ids" -o "$tmp/resident.f32" 2>/dev/null
ref_ids=$("$bin" run -m "$tmp/tiny" --ids "$ids" -n 12 --ignore-eos --print-ids 2>/dev/null | tail -n 1)
for flags in "--expert-slots 2" "--expert-slots 2 --expert-policy lfu" "--expert-slots 3 --expert-policy lfu" \
  "--ram-budget 40K" "--expert-slots 5" "--expert-slots 3 --prefetch-width 2" "--expert-slots 5 --prefetch-width 4"; do
  # shellcheck disable=SC2086
  "$bin" logits -m "$tmp/tiny" --ids "$ids" -o "$tmp/streamed.f32" $flags 2>"$tmp/err"
  cmp -s "$tmp/resident.f32" "$tmp/streamed.f32" || { echo "logits differ with $flags"; exit 1; }
  # shellcheck disable=SC2086
  got=$("$bin" run -m "$tmp/tiny" --ids "$ids" -n 12 --ignore-eos --print-ids $flags 2>"$tmp/err" | tail -n 1)
  [ "$got" = "$ref_ids" ] || { echo "generated ids differ with $flags: $got vs $ref_ids"; exit 1; }
  grep -q "misses" "$tmp/err" || { echo "no expert statistics with $flags"; cat "$tmp/err"; exit 1; }
done
echo "ok   streamed experts (2, 3, 5 slots; LRU and LFU; --ram-budget; --prefetch-width) give bit-identical logits and ids"
# Next-layer prefetch reads guesses ahead and says how many the router then chose; it needs streamed experts.
grep -q "prefetched" "$tmp/err" || { echo "--prefetch-width 4 read no guess"; cat "$tmp/err"; exit 1; }
if "$bin" run -m "$tmp/tiny" --ids 1,2 -n 1 --prefetch-width 2 2>"$tmp/err" >/dev/null; then
  echo "--prefetch-width without streamed experts accepted"; exit 1
fi
grep -q "nothing to prefetch" "$tmp/err" || { cat "$tmp/err"; exit 1; }
if "$bin" run -m "$tmp/tiny" --ids 1,2 -n 1 --expert-slots 3 --prefetch-width 99 2>"$tmp/err" >/dev/null; then
  echo "--prefetch-width 99 accepted"; exit 1
fi
grep -q "experts a layer" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok   --prefetch-width on streamed experts: guesses read and counted; refused without streaming or too wide"

# The simulator reproduces a real run's LRU hit rate from that run's own route trace.
"$bin" pack -m "$data/../../models/seedling-demo-moe" -o "$tmp/demo" >/dev/null 2>&1
"$bin" run -m "$tmp/demo" -p $'import os\n\n\ndef list_python_files(root):\n' -n 48 --expert-slots 48 \
  --route-trace "$tmp/trace.csv" 2>"$tmp/err" >/dev/null
real=$(grep -o 'hit rate [0-9.]*%' "$tmp/err" | grep -o '[0-9.]*%')
sim=$("$bin" cache-sim "$tmp/trace.csv" --slots 48 --policy lru 2>/dev/null | awk '$1 == 48 {print $2}')
[ -n "$real" ] && [ "$real" = "$sim" ] || { echo "cache-sim $sim vs measured $real"; exit 1; }
echo "ok   cache-sim replays the run's trace to its measured LRU hit rate ($real)"

# Bad input.
if "$bin" run -m "$tmp/tiny" --ids 1,2 --expert-slots 1 2>"$tmp/err" >/dev/null; then echo "1 slot accepted"; exit 1; fi
grep -q "top-k, 2 slots" "$tmp/err" || { cat "$tmp/err"; exit 1; }
if "$bin" run -m "$m/hf" --ids 1,2 --ram-budget 1G 2>"$tmp/err" >/dev/null; then echo "budget on HF folder"; exit 1; fi
grep -q "need a packed folder" "$tmp/err" || { cat "$tmp/err"; exit 1; }
if "$bin" run -m "$tmp/tiny" --ids 1,2 --ram-budget 4Q 2>"$tmp/err" >/dev/null; then echo "bad size"; exit 1; fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; exit 1; }
cp -r "$tmp/tiny" "$tmp/broken"
f=$(ls "$tmp"/broken/experts-*.bin | head -n 1)
printf '\x55\x55\x55\x55' | dd of="$f" bs=1 seek=4096 conv=notrunc status=none  # inside the second blob
cp "$f" "$tmp/before"
if "$bin" run -m "$tmp/broken" --ids "$ids" -n 4 --expert-slots 2 2>"$tmp/err" >/dev/null; then
  echo "corrupted blob accepted"
  exit 1
fi
grep -q "xxh64" "$tmp/err" && grep -qF "$f" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; exit 1; }
cmp -s "$f" "$tmp/before" || { echo "the source file changed"; exit 1; }
echo "ok   too few slots, a budget on an HF folder, a bad size and a corrupted blob: one error line each"

# With no budget, the choice follows the memory available (SEEDLING_MEM_AVAILABLE acts out a small machine).
"$bin" logits -m "$tmp/tiny" --ids "$ids" -o "$tmp/auto.f32" 2>"$tmp/err"
grep -q "experts: all .* mapped" "$tmp/err" || { cat "$tmp/err"; exit 1; }
# The demo model: resident tensors (bound) 2.83 MB, experts 7 MB, reserve 1 GiB + 10% of what is available. With
# 1,199,526,471 bytes available the experts do not fit beside the reserve, but more than top-4 of them do.
"$bin" logits -m "$tmp/demo" --ids 5,6,7,8 -o "$tmp/demo_mapped.f32" 2>/dev/null
SEEDLING_MEM_AVAILABLE=1199526471 "$bin" logits -m "$tmp/demo" --ids 5,6,7,8 -o "$tmp/auto.f32" 2>"$tmp/err"
grep -q "streaming them with --ram-budget" "$tmp/err" || { cat "$tmp/err"; exit 1; }
cmp -s "$tmp/demo_mapped.f32" "$tmp/auto.f32" || { echo "logits differ under the automatic budget"; exit 1; }
if SEEDLING_MEM_AVAILABLE=1000000 "$bin" run -m "$tmp/tiny" --ids 1,2 2>"$tmp/err" >/dev/null; then
  echo "a machine too small was accepted"
  exit 1
fi
grep -q "not enough memory" "$tmp/err" && grep -q "top-2 experts" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok   default placement: mapped when it fits, a budget from the memory available, a refusal naming the minimum"

"$bin" bench -m "$tmp/tiny" --expert-slots 2 --prompt-tokens 8 -n 4 --repeats 1 >"$tmp/bench" 2>"$tmp/err"
grep -q "of the measured read bandwidth" "$tmp/bench" && grep -q "hit rate" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok   bench on a packed folder with streamed experts"
