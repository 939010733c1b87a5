#!/usr/bin/env bash
# seedling cache-sim on a small trace with hand-checked hit rates: the table, the SVG plot (well-formed XML, one
# line per policy), gzipped input, and clear errors on bad input.
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One layer, top-1, experts 1 2 1 3 2 1 (transformers' columns). With 2 slots and no prefetch:
# lru hits once (the second 1), belady twice (keeps 2 for its reuse); with 3 slots only the 3 first uses miss.
{
  echo "token_index,layer,expert_ids,weights,token_id"
  t=0
  for e in 1 2 1 3 2 1; do echo "$t,0,$e,1.0,0"; t=$((t + 1)); done
} >"$tmp/t.csv"
"$bin" cache-sim "$tmp/t.csv" --slots 2,3 --policy lru,belady --no-prefetch --plot "$tmp/p.svg" >"$tmp/out"
grep -Eq "^ +2 +16\.67% +33\.33%$" "$tmp/out" || { cat "$tmp/out"; echo "slots 2: want lru 16.67%, belady 33.33%"; exit 1; }
grep -Eq "^ +3 +50\.00% +50\.00%$" "$tmp/out" || { cat "$tmp/out"; echo "slots 3: want 50.00% for both"; exit 1; }
grep -q "ceiling:   50.00%" "$tmp/out"
python3 - "$tmp/p.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert len(root.findall(ns + "polyline")) == 2, "one line per policy"
texts = [t.text for t in root.iter(ns + "text")]
assert "lru" in texts and "belady" in texts and "hit rate" in texts, texts
PY
echo "ok   cache-sim table and plot"

gzip -k "$tmp/t.csv"
"$bin" cache-sim "$tmp/t.csv.gz" --slots 2 --policy lru --no-prefetch | grep -Eq "^ +2 +16\.67%$"
echo "ok   cache-sim reads .csv.gz"

# --admit-per-step: the admission line, and each cell's copies a step beside its hit rate.
"$bin" cache-sim "$tmp/t.csv" --slots 2 --policy lru --admit-per-step 1 >"$tmp/cap.txt"
grep -q "^admission: at most 1 misses a step" "$tmp/cap.txt" || { cat "$tmp/cap.txt"; exit 1; }
grep -Eq "^ +2 +[0-9.]+% +[0-9.]+$" "$tmp/cap.txt" || { cat "$tmp/cap.txt"; exit 1; }
echo "ok   cache-sim --admit-per-step"

if "$bin" cache-sim "$tmp/t.csv" --policy fifo 2>"$tmp/err"; then echo "fifo accepted"; exit 1; fi
grep -q "unknown eviction policy 'fifo'" "$tmp/err"
if "$bin" cache-sim "$tmp/missing.csv" 2>"$tmp/err"; then echo "missing trace accepted"; exit 1; fi
grep -q "missing.csv" "$tmp/err"
if "$bin" cache-sim "$tmp/t.csv" --slots 0 2>"$tmp/err"; then echo "0 slots accepted"; exit 1; fi
grep -q "slot count" "$tmp/err"
echo "ok   cache-sim errors"
