#!/usr/bin/env python3
"""The logit error of the int8-activation CPU products against the float ones, on one packed model.

Runs `seedling logits` on windows of a text twice, SEEDLING_CPU_DOT=float (the reference) and =int8, and prints the
largest |logit difference|, the KLD sum_v p_float(v) (log p_float(v) - log p_int8(v)) per position (mean and max, in
double) and how often both argmaxes agree. Plain Python (no numpy): the demo's 4,096-token vocabulary is small.

Usage: bench/int8_logit_error.py SEEDLING MODEL TEXT [--windows N] [--ctx N] [--tokenizer FOLDER]
       bench/int8_logit_error.py SEEDLING MODEL --random-ids VOCAB ...   (a checkpoint without a tokenizer)
--tokenizer: tokenize TEXT with FOLDER's tokenizer (a GGUF written without one, from that folder's weights).
"""
import argparse
import math
import os
import random
import struct
import subprocess
import tempfile


def logits(seedling, model, ids, mode, path):
    env = dict(os.environ, SEEDLING_CPU_DOT=mode)
    subprocess.run([seedling, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", path],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack(f"<{len(data) // 4}f", data)


def log_softmax(row):
    top = max(row)
    lse = top + math.log(sum(math.exp(v - top) for v in row))
    return [v - lse for v in row]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seedling")
    ap.add_argument("model")
    ap.add_argument("text", nargs="?")
    ap.add_argument("--random-ids", type=int, default=0, help="ids drawn from [0, N) (seed 1) instead of a text")
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--tokenizer", help="a model folder whose tokenizer reads TEXT (default: MODEL's)")
    a = ap.parse_args()
    if a.random_ids:
        rng = random.Random(1)
        ids = [rng.randrange(a.random_ids) for _ in range(a.windows * a.ctx)]
    else:
        with open(a.text, "rb") as f:
            out = subprocess.run([a.seedling, "tokenize", "-m", a.tokenizer or a.model], input=f.read(), check=True,
                                 capture_output=True).stdout.decode()
        ids = [int(t) for t in out.strip().splitlines()[-1].split(",")]
    max_abs, klds, agree = 0.0, [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(a.windows):
            window = ids[w * a.ctx:(w + 1) * a.ctx]
            ref = logits(a.seedling, a.model, window, "float", os.path.join(tmp, "f"))
            got = logits(a.seedling, a.model, window, "int8", os.path.join(tmp, "i"))
            vocab = len(ref) // len(window)
            for p in range(len(window)):
                r, g = ref[p * vocab:(p + 1) * vocab], got[p * vocab:(p + 1) * vocab]
                max_abs = max(max_abs, max(abs(x - y) for x, y in zip(r, g)))
                lr, lg = log_softmax(r), log_softmax(g)
                klds.append(sum(math.exp(x) * (x - y) for x, y in zip(lr, lg)))
                agree += r.index(max(r)) == g.index(max(g))
    n = len(klds)
    print(f"{a.model}: {n} positions ({a.windows} windows of {a.ctx}); max |logit diff| {max_abs:.4g}; "
          f"KLD mean {sum(klds) / n:.3g} max {max(klds):.3g}; top-1 agreement {100.0 * agree / n:.2f}%")


if __name__ == "__main__":
    main()
