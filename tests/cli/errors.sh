#!/usr/bin/env bash
# Bad input to the command line: each case exits 1 with exactly one line "seedling: error: ..." that names the file
# or key, and never crashes. Usage: errors.sh SEEDLING_BINARY TEST_DATA_DIR
set -u
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
src=$data/models/mixtral_a/hf

# expect_error NAME EXPECTED_SUBSTRING -- COMMAND...
expect_error() {
  local name=$1 want=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^seedling: error: " "$tmp/err" || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL $name: exit $rc, $lines stderr lines, wanted '$want':"
    cat "$tmp/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
}

fresh() {  # a copy of the tiny Mixtral folder to break
  rm -rf "$tmp/m" && mkdir -p "$tmp/m" && cp "$src"/* "$tmp/m/"
}

expect_error missing-folder "$tmp/nope" -- "$bin" run -m "$tmp/nope" --ids 1,2

fresh
rm "$tmp/m/model.safetensors"
expect_error missing-weights "no *.safetensors" -- "$bin" run -m "$tmp/m" --ids 1,2

fresh
head -c 20000 "$src/model.safetensors" >"$tmp/m/model.safetensors"
expect_error truncated-shard "$tmp/m/model.safetensors" -- "$bin" info -m "$tmp/m"

# edit_header FILE PYTHON: runs PYTHON on the safetensors header `h` of FILE (a dict) and writes it back compactly,
# padded to its old length so that every data offset stays valid.
edit_header() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
exec(sys.argv[2])
t = json.dumps(h, separators=(',', ':')).encode()
t += b' ' * (n - len(t)) if len(t) <= n else b''
open(p, 'wb').write(struct.pack('<Q', len(t)) + t + bytes(b[8 + n:]))
PY
}

fresh
# an end offset far past the file
edit_header "$tmp/m/model.safetensors" "h[sorted(k for k in h if k != '__metadata__')[0]]['data_offsets'][1] += 10**9"
expect_error offsets-past-end "run past the end" -- "$bin" info -m "$tmp/m"

fresh
sed -i 's/"intermediate_size": 40/"intermediate_size": 48/' "$tmp/m/config.json"
expect_error wrong-shape "expected [48, 64]" -- "$bin" run -m "$tmp/m" --ids 1,2

fresh
sed -i 's/"model_type": "mixtral"/"model_type": "gpt_neox"/' "$tmp/m/config.json"
expect_error unknown-model-type "'gpt_neox' is not supported" -- "$bin" info -m "$tmp/m"

fresh
sed -i 's/"hidden_act": "silu"/"hidden_act": "gelu"/' "$tmp/m/config.json"
expect_error unsupported-activation "hidden_act" -- "$bin" info -m "$tmp/m"

echo "{ broken" >"$tmp/m/config.json"
expect_error config-not-json "config.json" -- "$bin" info -m "$tmp/m"

expect_error bad-ids "'x'" -- "$bin" run -m "$src" --ids 1,x,3
expect_error id-out-of-range "out of range" -- "$bin" run -m "$src" --ids 1,999
expect_error context-full "context full" -- "$bin" run -m "$src" --ids 1,2,3,4 --ctx 3

# The hybrid families (qwen3_5_moe's multimodal folder): a layer_types that does not match the stored tensors, a conv
# kernel other than the stored one, a missing A_log.
hybrid() {
  rm -rf "$tmp/h" && mkdir -p "$tmp/h" && cp "$data/models/qwen3_5_moe_a/hf"/* "$tmp/h/"
}
hybrid
python3 - "$tmp/h/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["layer_types"] = ["full_attention", "linear_attention", "linear_attention", "full_attention"]
json.dump(c, open(sys.argv[1], "w"))
PY
expect_error hybrid-layer-types "'layer_types', but 'model.language_model.layers.0.linear_attn.conv1d.weight' is there" -- \
  "$bin" run -m "$tmp/h" --ids 1,2
hybrid
sed -i 's/"linear_conv_kernel_dim": 4/"linear_conv_kernel_dim": 3/' "$tmp/h/config.json"
expect_error hybrid-conv-kernel "has a conv kernel of 4, but config.json's key 'linear_conv_kernel_dim' is 3" -- \
  "$bin" run -m "$tmp/h" --ids 1,2
hybrid
p=model.language_model.layers.2.linear_attn.
edit_header "$tmp/h/model.safetensors" "h['$p' + 'A_lug'] = h.pop('$p' + 'A_log')"
expect_error hybrid-missing-a-log "model.language_model.layers.2.linear_attn.A_log" -- "$bin" run -m "$tmp/h" --ids 1,2

expect_error perplexity-on-a-folder "is a folder" -- "$bin" perplexity -f "$data"
# -t past the bound: CLI11's own two lines (the value and "Run with --help"), exit 1, never an abort.
"$bin" run -m "$src" --ids 1,2 -t 100000 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "not in range" "$tmp/err"; then echo "ok   threads-bound: $(head -n 1 "$tmp/err")"; else
  echo "FAIL threads-bound: exit $rc"
  cat "$tmp/err"
  failures=$((failures + 1))
fi
if [ "$failures" -ne 0 ]; then
  echo "$failures error cases failed"
  exit 1
fi
echo "all error cases passed"
