#!/usr/bin/env python3
"""Per-layer quality of next-layer expert predictions against the routes they predict.

Reads a route trace (token_index,layer,expert_ids,...) and a prediction file (token_index,layer,predicted_ids, the
likeliest first), both .csv or .csv.gz (bench/traces/README.md), and prints per layer, for the first W predictions
(W = each --width): precision (the share of the W guesses the router then chose) and recall (the share of the
router's k choices among the W guesses). Markdown table on stdout.

  python3 tools/prediction_quality.py bench/traces/routing-30b-shape-trained.csv.gz \
      bench/traces/routing-30b-shape-trained.predictions.csv.gz --width 8 --width 16
"""
import argparse
import csv
import gzip
import sys
from collections import defaultdict


def rows(path):
    f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    return csv.DictReader(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("predictions")
    ap.add_argument("--width", type=int, action="append", help="guesses per token and layer (repeatable)")
    a = ap.parse_args()
    widths = a.width or [8, 16]
    routes = {}
    for r in rows(a.trace):
        routes[(int(r["token_index"]), int(r["layer"]))] = set(int(e) for e in r["expert_ids"].split())
    hit = defaultdict(int)  # (layer, width) -> guesses routed to
    guessed = defaultdict(int)
    chosen = defaultdict(int)  # layer -> router choices
    tokens = defaultdict(int)
    for r in rows(a.predictions):
        key = (int(r["token_index"]), int(r["layer"]))
        if key not in routes:
            sys.exit(f"{a.predictions}: token {key[0]} layer {key[1]} has no route in {a.trace}")
        guess = [int(e) for e in r["predicted_ids"].split()]
        layer = key[1]
        tokens[layer] += 1
        chosen[layer] += len(routes[key])
        for w in widths:
            if w > len(guess):
                sys.exit(f"{a.predictions}: {len(guess)} guesses for token {key[0]} layer {layer}, --width {w}")
            hit[(layer, w)] += len(set(guess[:w]) & routes[key])
            guessed[(layer, w)] += w
    head = "| layer | tokens | " + " | ".join(f"precision@{w} | recall@{w}" for w in widths) + " |"
    print(head)
    print("|" + " --- |" * (2 + 2 * len(widths)))
    for layer in sorted(tokens):
        cells = []
        for w in widths:
            cells += [f"{hit[(layer, w)] / guessed[(layer, w)]:.3f}", f"{hit[(layer, w)] / chosen[layer]:.3f}"]
        print(f"| {layer} | {tokens[layer]} | " + " | ".join(cells) + " |")
    cells = []
    for w in widths:
        h = sum(hit[(l, w)] for l in tokens)
        cells += [f"{h / sum(guessed[(l, w)] for l in tokens):.3f}", f"{h / sum(chosen.values()):.3f}"]
    print(f"| all | {sum(tokens.values())} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
