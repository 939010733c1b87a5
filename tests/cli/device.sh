#!/usr/bin/env bash
# --device on the model commands: info lists the devices; a bad device name, --vram-budget, --vram-admit or
# --cpu-misses without --device cuda, a --vram-admit that is not a count, a --cpu-misses that is not a share, and (on a machine without a GPU, as CI) --device cuda are each
# one error line and exit code 1.
# tools/cuda_tests.sh checks --device cuda where there is a GPU.
source "$(dirname "$0")/lib/common.bash"

"$bin" info -m "$m/hf" >"$tmp/info"
grep -q "^devices: *cpu" "$tmp/info" || { cat "$tmp/info"; echo "info lists no cpu device"; exit 1; }
grep -Eq "cuda:0|no cuda: " "$tmp/info" || { cat "$tmp/info"; echo "info says nothing of CUDA"; exit 1; }
echo "ok   info lists the devices"

expect_error() {  # expect_error PATTERN ARGS...: exit 1, one line on stderr, holding PATTERN
  local pattern=$1
  shift
  if "$bin" "$@" >/dev/null 2>"$tmp/err"; then echo "accepted: $*"; exit 1; fi
  [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; echo "want one error line: $*"; exit 1; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err"; echo "want '$pattern': $*"; exit 1; }
}
expect_error "'gpu' is not a device (expected cpu, cuda or cuda:N)" run -m "$m/hf" --ids "$ids" -n 1 --device gpu
expect_error "--vram-budget needs --device cuda" logits -m "$m/hf" --ids "$ids" -o "$tmp/l" --vram-budget 1G
expect_error "--no-cuda-graph needs --device cuda" run -m "$m/hf" --ids "$ids" -n 1 --no-cuda-graph
expect_error "--vram-admit needs --device cuda" run -m "$m/hf" --ids "$ids" -n 1 --vram-admit 4
expect_error "--vram-admit: '-2' is not a count of experts or all" run -m "$m/hf" --ids "$ids" -n 1 --vram-admit=-2
expect_error "--vram-admit: 'half' is not a count of experts or all" run -m "$m/hf" --ids "$ids" -n 1 --vram-admit half
expect_error "--cpu-misses needs --device cuda" run -m "$m/hf" --ids "$ids" -n 1 --cpu-misses 0.5
expect_error "--cpu-misses: '1.5' is not a share from 0 to 1" run -m "$m/hf" --ids "$ids" -n 1 --cpu-misses 1.5
expect_error "--cpu-misses: 'half' is not a share from 0 to 1" run -m "$m/hf" --ids "$ids" -n 1 --cpu-misses half
echo "ok   bad --device, and --vram-budget, --vram-admit, --cpu-misses or --no-cuda-graph without cuda, refused"

# --devices (expert parallelism, docs/expert-parallel.md): the list's errors on run, bench and serve, before any device
# is looked for.
for cmd in "run --ids $ids -n 1" "bench --prompt-tokens 4 -n 1 --repeats 1" "serve --port 0"; do
  # shellcheck disable=SC2086
  {
    expect_error "needs at least 2 devices, 'cuda:0' names 1" $cmd -m "$m/hf" --devices cuda:0
    expect_error "cuda:1 is named twice in 'cuda:1,cuda:0,cuda:1'" $cmd -m "$m/hf" --devices cuda:1,cuda:0,cuda:1
    expect_error "'gpu1' is not a CUDA device (expected cuda:N" $cmd -m "$m/hf" --devices cuda:0,gpu1
    expect_error "an empty entry in 'cuda:0,'" $cmd -m "$m/hf" --devices cuda:0,
    expect_error "--devices and --device cannot be given together" $cmd -m "$m/hf" --devices cuda:0,cuda:1 --device cpu
    expect_error "--placement-trace: $tmp/none.csv: no such file" $cmd -m "$m/hf" --devices cuda:0,cuda:1 \
      --placement-trace "$tmp/none.csv"
  }
done
expect_error "serve --devices: not yet" serve -m "$m/hf" --port 0 --devices cuda:0,cuda:1
echo "ok   bad --devices lists, and --devices with --device, refused on run, bench and serve"

if grep -q "no cuda: " "$tmp/info"; then
  expect_error "--devices: no CUDA device: " run -m "$m/hf" --ids "$ids" -n 1 --devices cuda:0,cuda:1
  echo "ok   --devices without a GPU: one clear error"
  for cmd in "run --ids $ids -n 1" "logits --ids $ids -o $tmp/l" "bench --prompt-tokens 4 -n 1 --repeats 1" \
    "perplexity -f $data/demo/heldout.txt --ctx 16"; do
    # shellcheck disable=SC2086
    expect_error "--device cuda: no CUDA device: " $cmd -m "$m/hf" --device cuda
  done
  echo "ok   --device cuda without a GPU: one clear error on run, logits, bench, perplexity"
else
  echo "skip --device cuda without a GPU: this machine has one (tools/cuda_tests.sh covers it)"
fi
