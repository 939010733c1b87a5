# Sourced by the tests/cli/*.sh scripts (this folder is not globbed as a test): arguments, a scratch folder removed
# on exit, and the reference ids of the tiny golden checkpoint qwen3_moe_a.
set -euo pipefail
bin=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m=$data/models/qwen3_moe_a

# reference_ids KEY [MODEL_DIR]: the comma-separated ids under KEY ("ids" or "greedy") of MODEL_DIR/reference.json
# (default $m).
reference_ids() {
  python3 -c "import json,sys;print(','.join(map(str,json.load(open(sys.argv[1]))[sys.argv[2]])))" \
    "${2:-$m}/reference.json" "$1"
}
ids=$(reference_ids ids)

# expect_error WHAT PATTERN COMMAND...: the command must fail with exactly one stderr line matching PATTERN.
expect_error() {
  local what=$1 pattern=$2
  shift 2
  if "$@" >"$tmp/out" 2>"$tmp/err"; then echo "$what: expected failure"; exit 1; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "$what: expected one error line, got:"; cat "$tmp/err"; exit 1; }
  grep -q "$pattern" "$tmp/err" || { echo "$what: error lacks '$pattern':"; cat "$tmp/err"; exit 1; }
  echo "ok   $what"
}
