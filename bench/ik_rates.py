"""llama-bench's CSV (`-o csv`, one `-p P -n 0 -gp P,N` run) on stdin -> "PREFILL DECODE" tok/s on one line, for
bench/cpu_vs_ik.sh and bench/gpu_vs_ik.sh. Standard library only."""
import csv
import sys

rows = [r for r in csv.DictReader(sys.stdin) if r.get("avg_ts")]
prefill = [r["avg_ts"] for r in rows if r["n_gen"] == "0"]
decode = [r["avg_ts"] for r in rows if r["n_gen"] != "0"]
if not prefill or not decode:
    sys.exit("ik_rates.py: no prefill and decode rows in llama-bench's CSV")
print(prefill[0], decode[0])
