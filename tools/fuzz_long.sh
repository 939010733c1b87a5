#!/usr/bin/env bash
# Long fuzzing runs of the libFuzzer targets (tests/fuzz/targets.txt), resumable and counted.
#
#   cmake -S . -B build-fuzz -G Ninja -DSEEDLING_FUZZ=ON -DSEEDLING_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
#     -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang && cmake --build build-fuzz --target fuzz_all
#   tools/fuzz_long.sh BIN_DIR WORK_DIR SECONDS JOBS ROUNDS [TARGET...]
#
# BIN_DIR holds the built targets (build-fuzz/fuzz). Each round runs every TARGET (default: all of targets.txt) in
# turn for SECONDS with libFuzzer's -fork=JOBS (JOBS 1: one process, no fork, which spends nothing on restarting
# jobs and is the faster choice on a machine of few cores) over WORK_DIR/corpus/TARGET (seeded from the repository's corpus and
# seed folder when first made, and kept, so a later run goes on from what an earlier one found), with the target's
# dictionary and tests/fuzz/numbers.dict, under ASan/UBSan as built. Each run appends one line to WORK_DIR/runs.tsv
# (target, UTC start, seconds, executions, coverage, crashes/timeouts/ooms, exit status) and keeps its log in
# WORK_DIR/logs/; a failing input lands in WORK_DIR/artifacts/. At the end it prints each target's total executions
# over every line of runs.tsv. Exits 1 when any run failed.
set -uo pipefail
if [ $# -lt 5 ]; then sed -n '2,15p' "$0"; exit 2; fi
root="$(cd "$(dirname "$0")/.." && pwd)"
bin=$1 work=$2 seconds=$3 jobs=$4 rounds=$5
shift 5
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then mapfile -t targets < <(awk '!/^#/ && NF { print $1 }' "$root/tests/fuzz/targets.txt"); fi
mkdir -p "$work/logs" "$work/artifacts" "$work/corpus"
[ -f "$work/runs.tsv" ] || printf 'target\tstart_utc\tseconds\texecs\tcov\toom_timeout_crash\tstatus\n' >"$work/runs.tsv"
failed=0
for ((round = 1; round <= rounds; ++round)); do
  for t in "${targets[@]}"; do
    read -r max_len seeds < <(awk -v n="$t" '$1 == n { print $2, $3 }' "$root/tests/fuzz/targets.txt")
    [ -n "${max_len:-}" ] || { echo "$t: not in tests/fuzz/targets.txt"; exit 2; }
    c="$work/corpus/$t"
    if [ ! -d "$c" ]; then
      mkdir -p "$c"
      cp "$root/tests/fuzz/corpus/$t"/* "$c/" 2>/dev/null || true
      if [ -n "${seeds:-}" ]; then cp "$root/$seeds"/* "$c/" 2>/dev/null || true; fi
    fi
    cat "$root/tests/fuzz/$t.dict" "$root/tests/fuzz/numbers.dict" >"$work/$t.dict" 2>/dev/null
    start="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    log="$work/logs/$t-$start.log"
    fork=(-fork="$jobs")
    [ "$jobs" -eq 1 ] && fork=(-print_final_stats=1)
    "$bin/$t" "${fork[@]}" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -print_funcs=0 -dict="$work/$t.dict" -artifact_prefix="$work/artifacts/$t-" "$c" >"$log" 2>&1
    status=$?
    # -fork prints "#N: cov: C ... oom/timeout/crash: a/b/c"; one process "#N<tab>KIND cov: C ..." and, at its end,
    # stat::number_of_executed_units (a crash there shows as the exit status and an artifact).
    last="$(grep -E '^#[0-9]+:? ?[[:space:]]*[A-Za-z]* *cov:' "$log" | tail -n 1)"
    execs="$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")"
    units="$(sed -nE 's/^stat::number_of_executed_units: ([0-9]+)/\1/p' "$log" | tail -n 1)"
    [ -n "$units" ] && execs=$units
    cov="$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$last")"
    otc="$(sed -nE 's/.*oom\/timeout\/crash: ([0-9/]+).*/\1/p' <<<"$last")"
    [ -n "$otc" ] || otc="exit $status"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$start" "$seconds" "${execs:-0}" "${cov:-0}" "${otc:-?}" "$status" \
      >>"$work/runs.tsv"
    echo "$t: $start ${seconds}s execs ${execs:-0} cov ${cov:-0} oom/timeout/crash ${otc:-?} exit $status"
    [ "$status" -eq 0 ] || failed=1
  done
done
echo "totals over $work/runs.tsv:"
awk -F'\t' 'NR > 1 { e[$1] += $4; s[$1] += $3; if ($7 != 0) f[$1]++ } END {
  for (t in e) printf "  %-22s %12d execs in %6d s, failed runs: %d\n", t, e[t], s[t], f[t] + 0 }' "$work/runs.tsv" | sort
exit $failed
