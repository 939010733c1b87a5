#!/usr/bin/env bash
# `seedling pack --search-device cuda`: on a machine with a GPU the packed experts are byte for byte those of the CPU
# search (cuda/seed_search.h's promise, end to end); without one, one clear error line. Either way an unknown device
# and a device for experts that are not seed tiers are refused.
source "$(dirname "$0")/lib/common.bash"

if "$bin" info -m "$m/hf" | grep -q "cuda:0"; then
  "$bin" pack -m "$m/hf" -o "$tmp/cpu" --experts p4 --seed-search-seeds 512 >/dev/null 2>&1
  "$bin" pack -m "$m/hf" -o "$tmp/gpu" --experts p4 --seed-search-seeds 512 --search-device cuda >/dev/null 2>&1
  for f in "$tmp"/cpu/experts-*.bin; do
    cmp -s "$f" "$tmp/gpu/$(basename "$f")" || { echo "$(basename "$f"): the CUDA search's blobs differ"; exit 1; }
  done
  echo "ok   pack --search-device cuda: experts byte for byte those of the CPU search"
else
  expect_error "--search-device cuda without a GPU" "no CUDA device\|without the CUDA backend" \
    "$bin" pack -m "$m/hf" -o "$tmp/x" --experts p4 --search-device cuda
fi
expect_error "--search-device tpu" "unknown (known: cpu, cuda)" \
  "$bin" pack -m "$m/hf" -o "$tmp/x" --experts p4 --search-device tpu
expect_error "--search-device for int8 experts" "not a seed tier" \
  "$bin" pack -m "$m/hf" -o "$tmp/x" --experts q8_g32 --search-device cuda
[ ! -e "$tmp/x" ] || { echo "a refused pack left a folder"; exit 1; }
