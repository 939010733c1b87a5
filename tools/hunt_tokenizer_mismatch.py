#!/usr/bin/env python3
"""Hunt for a freshly trained tokenizer on which Seedling's tokenizer and HF `tokenizers` disagree, and cut the
disagreement down to a few lines of text.

HF's BPE training is not deterministic, so every round trains a slightly different `metaspace_bpe` (and
`bytelevel_bpe`) exactly as tools/make_tokenizer_goldens.py does, encodes the deterministic ~10 MB bench corpus
with HF (single thread) and with our `tokenizer_bench --print-ids`, and compares the ids one by one. On a mismatch
it saves the tokenizer, locates the first differing id, takes the lines around it, checks that they fail on their
own (both sides encode the same small file), and shrinks them (drop lines, then trim characters) to a minimal
failing text. Everything found is packed into OUT_DIR/hunt_results.tar.gz (plus summary.json and hunt_log.txt).

Usage (repository root, GPU machine, Python with tokenizers 0.23.2):
  LD_LIBRARY_PATH=.devcarry/lib python3 tools/hunt_tokenizer_mismatch.py OUT_DIR \
      [--rounds 12] [--budget-s 240] [--bin .devcarry/tokenizer_bench] [--lib .devcarry/lib]
(LD_LIBRARY_PATH is also set by the script for the binary from --lib.)
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

LOG_LINES: list[str] = []


def log(msg: str) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    LOG_LINES.append(line)
    print(line, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Our side: tokenizer_bench
# ----------------------------------------------------------------------------------------------------------------


class OurBench:
    def __init__(self, binary: Path, lib: Path | None, timeout_s: float = 300.0):
        self.binary = binary
        self.env = dict(os.environ)
        if lib is not None:
            self.env["LD_LIBRARY_PATH"] = str(lib) + (
                ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else ""
            )
        self.timeout_s = timeout_s
        self.calls = 0
        self.has_print_ids = True  # cleared by probe() for an old binary without --print-ids

    def probe(self, tokenizer: Path, work: Path) -> None:
        f = work / "probe_print_ids.txt"
        f.write_bytes(b"hello world\n")
        r = self.run(tokenizer, f, print_ids=True)
        if not r["ok"]:
            r2 = self.run(tokenizer, f, print_ids=False)
            if r2["ok"]:
                self.has_print_ids = False
                log("WARNING: the binary has no --print-ids (rebuild bench/tokenizer_bench.cpp); comparing by id count"
                    " and FNV-1a hash only")
            else:
                log(f"WARNING: the binary fails on a tiny probe: {r['error'][:300]} / {r2['error'][:300]}")

    def run(self, tokenizer: Path, text_file: Path, print_ids: bool = True) -> dict:
        """Returns {"ok": bool, "ids": [...] or None, "count": int, "hash": str, "error": str}."""
        self.calls += 1
        print_ids = print_ids and self.has_print_ids
        cmd = [str(self.binary)] + (["--print-ids"] if print_ids else []) + [str(tokenizer), str(text_file), "1"]
        try:
            p = subprocess.run(cmd, env=self.env, capture_output=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"timeout after {self.timeout_s}s: {cmd}"}
        except OSError as e:
            return {"ok": False, "error": f"cannot run {cmd}: {e}"}
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            return {"ok": False, "error": f"rc {p.returncode}: {p.stderr.decode('utf-8', 'replace')[-2000:]}"}
        lines = out.split("\n")
        head = lines[0] if lines else ""
        m_count = re.search(r'"ids":\s*(\d+)', head)
        m_hash = re.search(r'"ids_fnv1a64":\s*"([0-9a-f]+)"', head)
        m_secs = re.search(r'"seconds_best":\s*([0-9.eE+-]+)', head)
        if not m_count or not m_hash:
            return {"ok": False, "error": f"unparsable output: {out[:500]!r} stderr {p.stderr[-500:]!r}"}
        res = {"ok": True, "count": int(m_count.group(1)), "hash": m_hash.group(1), "ids": None,
               "seconds": float(m_secs.group(1)) if m_secs else None}
        if print_ids:
            body = lines[1].strip() if len(lines) > 1 else ""
            res["ids"] = [int(x) for x in body.split(",")] if body else []
            if len(res["ids"]) != res["count"]:
                return {"ok": False, "error": f"--print-ids gave {len(res['ids'])} ids, header says {res['count']}"
                        " (is the binary built with --print-ids?)"}
        return res


# ----------------------------------------------------------------------------------------------------------------
# Comparison and shrinking
# ----------------------------------------------------------------------------------------------------------------


def first_diff(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else -1


class Checker:
    """mismatch(text) for one tokenizer: HF ids vs ours on the same small file."""

    def __init__(self, hf_encode, ours: OurBench, tok_path: Path, work: Path):
        self.hf_encode = hf_encode  # text -> list[int]
        self.ours = ours
        self.tok_path = tok_path
        self.work = work
        self.n = 0

    def compare(self, text: str) -> dict:
        self.n += 1
        f = self.work / "probe.txt"
        f.write_bytes(text.encode("utf-8"))  # binary: \r\n stays \r\n
        hf = list(self.hf_encode(text))
        ours = self.ours.run(self.tok_path, f, print_ids=True)
        if not ours["ok"]:
            return {"mismatch": True, "hf": hf, "ours": None, "error": ours["error"]}
        if ours["ids"] is None:  # old binary: count and hash only
            import make_tokenizer_goldens as g

            same = len(hf) == ours["count"] and g.fnv1a64_ids(hf) == ours["hash"]
            return {"mismatch": not same, "hf": hf, "ours": None, "error": None}
        return {"mismatch": hf != ours["ids"], "hf": hf, "ours": ours["ids"], "error": None}

    def fails(self, text: str) -> bool:
        return self.compare(text)["mismatch"]


def split_lines(text: str) -> list[str]:
    pieces = text.split("\n")
    return [p + "\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def line_of_char(lines: list[str], char_pos: int) -> int:
    pos = 0
    for i, l in enumerate(lines):
        if pos + len(l) > char_pos:
            return i
        pos += len(l)
    return max(0, len(lines) - 1)


def locate_window(chk: Checker, lines: list[str], center: int, deadline: float) -> tuple[int, int] | None:
    """A window [a, b) of lines around `center` that fails on its own; widens until it does."""
    for w in (0, 1, 2, 4, 8, 16, 64, 256, 1024, 4096):
        if time.time() > deadline:
            break
        a, b = max(0, center - w), min(len(lines), center + w + 1)
        if chk.fails("".join(lines[a:b])):
            log(f"  window lines [{a}, {b}) fails on its own")
            return a, b
    return None


def bisect_chunks(chk: Checker, lines: list[str], deadline: float) -> tuple[int, int] | None:
    """Fallback: split into chunks, take the first failing chunk, recurse."""
    a, b = 0, len(lines)
    while b - a > 4 and time.time() < deadline:
        n = 16
        step = max(1, (b - a + n - 1) // n)
        found = None
        for s in range(a, b, step):
            e = min(b, s + step)
            if chk.fails("".join(lines[s:e])):
                found = (s, e)
                break
        if found is None:
            # Fails only as a whole: keep the smallest failing prefix of [a, b).
            lo, hi = a + 1, b
            while lo < hi and time.time() < deadline:
                mid = (lo + hi) // 2
                if chk.fails("".join(lines[a:mid])):
                    hi = mid
                else:
                    lo = mid + 1
            log(f"  no chunk fails alone; smallest failing prefix is lines [{a}, {lo})")
            return a, lo
        a, b = found
        log(f"  chunk [{a}, {b}) fails")
    return (a, b) if chk.fails("".join(lines[a:b])) else None


def shrink_lines(chk: Checker, lines: list[str], deadline: float) -> list[str]:
    """Drop lines while it still fails: binary search on the front and the back, then one line at a time."""
    cur = list(lines)
    lo, hi = 0, len(cur) - 1  # largest k with cur[k:] failing
    while lo < hi and time.time() < deadline:
        mid = (lo + hi + 1) // 2
        if chk.fails("".join(cur[mid:])):
            lo = mid
        else:
            hi = mid - 1
    if lo and chk.fails("".join(cur[lo:])):
        cur = cur[lo:]
    lo, hi = 1, len(cur)  # smallest k with cur[:k] failing
    while lo < hi and time.time() < deadline:
        mid = (lo + hi) // 2
        if chk.fails("".join(cur[:mid])):
            hi = mid
        else:
            lo = mid + 1
    if lo < len(cur) and chk.fails("".join(cur[:lo])):
        cur = cur[:lo]
    changed = len(cur) <= 40
    while changed and len(cur) > 1 and time.time() < deadline:
        changed = False
        for i in range(len(cur)):
            cand = cur[:i] + cur[i + 1:]
            if cand and chk.fails("".join(cand)):
                cur = cand
                changed = True
                break
    return cur


def shrink_chars(chk: Checker, text: str, deadline: float) -> str:
    """Trim characters from the front, then the back (binary search each), then drop single chars greedily."""
    # Front: largest k with text[k:] failing (assumes rough monotonicity; verified at the end).
    lo, hi = 0, len(text) - 1
    while lo < hi and time.time() < deadline:
        mid = (lo + hi + 1) // 2
        if chk.fails(text[mid:]):
            lo = mid
        else:
            hi = mid - 1
    if chk.fails(text[lo:]):
        text = text[lo:]
    lo, hi = 1, len(text)
    while lo < hi and time.time() < deadline:
        mid = (lo + hi) // 2
        if chk.fails(text[:mid]):
            hi = mid
        else:
            lo = mid + 1
    if chk.fails(text[:lo]):
        text = text[:lo]
    # Greedy single-character removal for short texts.
    if len(text) <= 400:
        i = 0
        while i < len(text) and time.time() < deadline:
            cand = text[:i] + text[i + 1:]
            if cand and chk.fails(cand):
                text = cand
            else:
                i += 1
    return text


# ----------------------------------------------------------------------------------------------------------------
# One tokenizer
# ----------------------------------------------------------------------------------------------------------------


def merges_info(tok_json: str) -> dict:
    j = json.loads(tok_json)
    m = j.get("model", {})
    merges = m.get("merges", [])
    pairs = [tuple(x) if isinstance(x, list) else tuple(x.split(" ", 1)) for x in merges]
    seen: dict = {}
    dups = []
    for r, p in enumerate(pairs):
        if p in seen:
            dups.append({"pair": list(p), "first_rank": seen[p], "rank": r})
        else:
            seen[p] = r
    vocab = m.get("vocab", {})
    # Tokens reachable by more than one merge (a + b == c + d), and merges whose result has a lower id than a part.
    products: dict = {}
    for p in pairs:
        products.setdefault(p[0] + p[1], []).append(p)
    multi = sum(1 for v in products.values() if len(v) > 1)
    return {"merges": len(pairs), "duplicate_merges": dups[:50], "n_duplicate_merges": len(dups),
            "tokens_with_several_merges": multi, "vocab": len(vocab)}


COMMITTED = TOOLS.parent / "tests" / "data" / "tokenizer"


def same_as_committed(name: str, tok_json: str):
    """Whether the fresh tokenizer equals tests/data/tokenizer/trained/NAME.json.xz (None when not readable)."""
    try:
        committed = json.loads(lzma.decompress((COMMITTED / "trained" / f"{name}.json.xz").read_bytes()))
        return committed == json.loads(tok_json)
    except Exception:
        return None


def committed_bench_ids(name: str):
    try:
        return json.loads((COMMITTED / "bench.json").read_text())["results"][name]["whole_tokens"]
    except Exception:
        return None


def check_tokenizer(name: str, rnd: int, tok, text: str, corpus_file: Path, ours: OurBench, work: Path,
                    found_dir: Path, deadline_bisect: float) -> dict:
    tok_json = tok.to_str()
    digest = hashlib.sha1(tok_json.encode()).hexdigest()[:10]
    tok_path = work / f"r{rnd:02d}_{name}.json"
    tok_path.write_text(tok_json, encoding="utf-8")
    info = {"round": rnd, "name": name, "sha1": digest, **merges_info(tok_json)}
    info["same_as_committed"] = same_as_committed(name, tok_json)
    t0 = time.time()
    enc = tok.encode(text, add_special_tokens=False)
    hf_ids = list(enc.ids)
    info["hf_seconds"] = round(time.time() - t0, 2)
    info["hf_ids"] = len(hf_ids)
    if rnd == 0 and name == "metaspace_bpe":
        ours.probe(tok_path, work)
    r = ours.run(tok_path, corpus_file, print_ids=True)
    if not r["ok"]:
        info["ours_error"] = r["error"]
        log(f"round {rnd} {name}: OUR SIDE FAILED: {r['error'][:300]}")
        ours_ids = None
    else:
        ours_ids = r["ids"]
        info["ours_ids"] = r["count"]
        info["ours_seconds"] = r["seconds"]
        try:
            import make_tokenizer_goldens as g

            info["hf_hash"], info["ours_hash"] = g.fnv1a64_ids(hf_ids), r["hash"]
        except Exception:
            pass
    if ours_ids is None and r["ok"]:  # old binary without --print-ids
        match = r["count"] == len(hf_ids) and info.get("hf_hash") == r["hash"]
    else:
        match = ours_ids is not None and ours_ids == hf_ids
    info["match"] = match
    info["committed_bench_ids"] = committed_bench_ids(name)
    log(f"round {rnd} {name} [{digest}]: HF {len(hf_ids)} ids, ours {info.get('ours_ids')}, "
        f"{'MATCH' if match else 'MISMATCH'}; duplicate merges {info['n_duplicate_merges']}; "
        f"same as committed tokenizer: {info['same_as_committed']} "
        f"(committed bench.json: {info['committed_bench_ids']} ids)")
    if info["n_duplicate_merges"]:
        log(f"  duplicate merges (pair, first rank, later rank): {info['duplicate_merges'][:5]}")
        keep = found_dir / f"dupmerges_r{rnd:02d}_{name}.json.xz"
        keep.write_bytes(lzma.compress(tok_json.encode()))
    if match:
        return info

    # ---- mismatch: keep the tokenizer and cut the text down
    fd = found_dir / f"r{rnd:02d}_{name}"
    fd.mkdir(parents=True, exist_ok=True)
    (fd / "tokenizer.json").write_text(tok_json, encoding="utf-8")
    info["saved"] = str(fd.name)
    hf_encode = lambda s: tok.encode(s, add_special_tokens=False).ids  # noqa: E731
    chk = Checker(hf_encode, ours, tok_path, work)
    lines = split_lines(text)
    window = None
    try:
        if ours_ids is not None and ours_ids:
            i = first_diff(hf_ids, ours_ids)
            info["first_diff_index"] = i
            j = min(i, len(enc.offsets) - 1)
            char_pos = enc.offsets[j][0] if j >= 0 else 0
            # Python offsets are char offsets of the input; clamp in case they are byte offsets.
            char_pos = min(char_pos, len(text) - 1)
            ctx = 8
            info["first_diff"] = {
                "hf_ids": hf_ids[max(0, i - ctx): i + ctx],
                "hf_tokens": [tok.id_to_token(x) for x in hf_ids[max(0, i - ctx): i + ctx]],
                "ours_ids": ours_ids[max(0, i - ctx): i + ctx],
                "ours_tokens": [tok.id_to_token(x) for x in ours_ids[max(0, i - ctx): i + ctx]],
                "char_pos": char_pos,
                "text_around": text[max(0, char_pos - 200): char_pos + 200],
            }
            log(f"  first differing id at index {i} (char {char_pos}): HF {info['first_diff']['hf_tokens'][ctx:ctx+4]}"
                f" vs ours {info['first_diff']['ours_tokens'][ctx:ctx+4]}")
            window = locate_window(chk, lines, line_of_char(lines, char_pos), deadline_bisect)
        if window is None:
            log("  window search failed; bisecting chunks")
            window = bisect_chunks(chk, lines, deadline_bisect)
    except Exception:
        info["bisect_error"] = traceback.format_exc()
        log("  bisect error:\n" + info["bisect_error"])
    if window is None:
        info["minimal"] = None
        log("  could not find a failing piece that fails on its own")
        (fd / "info.json").write_text(json.dumps(info, ensure_ascii=False, indent=1))
        return info
    a, b = window
    piece_lines = shrink_lines(chk, lines[a:b], deadline_bisect)
    piece = "".join(piece_lines)
    (fd / "failing_lines.txt").write_bytes(piece.encode("utf-8"))
    small = shrink_chars(chk, piece, deadline_bisect)
    res = chk.compare(small)
    if not res["mismatch"]:  # shrinking went astray; keep the line-level piece
        small = piece
        res = chk.compare(small)
    (fd / "failing_text.txt").write_bytes(small.encode("utf-8"))
    k = first_diff(res["hf"], res["ours"] or [])
    info["minimal"] = {
        "text": small,
        "lines_text": piece,
        "hf_ids": res["hf"],
        "hf_tokens": [tok.id_to_token(x) for x in res["hf"]],
        "ours_ids": res["ours"],
        "ours_tokens": [tok.id_to_token(x) for x in (res["ours"] or [])],
        "first_diff_index": k,
        "error": res["error"],
        "probes": chk.n,
    }
    (fd / "hf_ids.json").write_text(json.dumps(res["hf"]))
    (fd / "our_ids.json").write_text(json.dumps(res["ours"]))
    log(f"  minimal failing text ({len(small)} chars, {chk.n} probes): {small!r}")
    log(f"  HF  : {info['minimal']['hf_tokens']}")
    log(f"  ours: {info['minimal']['ours_tokens']}")
    (fd / "info.json").write_text(json.dumps(info, ensure_ascii=False, indent=1))
    return info


# ----------------------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--budget-s", type=float, default=240.0, help="no new round starts after this many seconds")
    ap.add_argument("--bisect-s", type=float, default=120.0, help="extra seconds allowed per mismatch for shrinking")
    ap.add_argument("--bin", type=Path, default=Path(".devcarry/tokenizer_bench"))
    ap.add_argument("--lib", type=Path, default=Path(".devcarry/lib"))
    ap.add_argument("--bench-mb", type=float, default=10.0)
    ap.add_argument("--train-mb", type=float, default=4.0)
    ap.add_argument("--max-failures", type=int, default=2, help="stop after this many mismatching tokenizers")
    ap.add_argument("--no-bytelevel", action="store_true", help="train only metaspace_bpe")
    args = ap.parse_args()
    t_start = time.time()

    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hunt_tok_"))
    found = work / "found"
    found.mkdir()
    summary: dict = {"rounds": [], "errors": [], "args": {k: str(v) for k, v in vars(args).items()}}

    def finish(rc: int) -> int:
        summary["seconds"] = round(time.time() - t_start, 1)
        (out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1))
        try:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(str(found), arcname="found")
                data = json.dumps(summary, ensure_ascii=False, indent=1).encode()
                ti = tarfile.TarInfo("found/summary.json")
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
            (out / "hunt_results.tar.gz").write_bytes(buf.getvalue())
        except Exception:
            log("tar failed:\n" + traceback.format_exc())
        (out / "hunt_log.txt").write_text("\n".join(LOG_LINES) + "\n")
        return rc

    try:
        import make_tokenizer_goldens as g  # sets RAYON_NUM_THREADS=1 before importing tokenizers
        import tokenizers

        log(f"tokenizers {tokenizers.__version__}, python {sys.version.split()[0]}, work dir {work}")
        summary["tokenizers_version"] = tokenizers.__version__
    except Exception:
        summary["errors"].append("import failed:\n" + traceback.format_exc())
        log(summary["errors"][-1])
        return finish(2)

    binary = args.bin.resolve()
    lib = args.lib.resolve() if args.lib and args.lib.exists() else None
    if not binary.exists():
        summary["errors"].append(f"binary {binary} does not exist")
        log(summary["errors"][-1])
        return finish(2)
    ours = OurBench(binary, lib)

    # The bench corpus, exactly as make_tokenizer_goldens.py builds it (bytes, then one UTF-8 decode).
    seed, line_percent = 0x5EED1E55, 55
    corpus_bytes = g.make_bench_corpus(int(args.bench_mb * 1_000_000), seed, line_percent, g.bench_lines())
    text = corpus_bytes.decode("utf-8")
    corpus_file = work / "bench_corpus.txt"
    corpus_file.write_bytes(corpus_bytes)
    summary["corpus"] = {"bytes": len(corpus_bytes), "fnv1a64": g.fnv1a64(corpus_bytes)}
    log(f"bench corpus: {len(corpus_bytes)} bytes, fnv1a64 {summary['corpus']['fnv1a64']}")
    # Sanity: our binary reads the same bytes (a tokenizer-independent check of the file comes from the count
    # of bytes it reports).
    train_corpus = g.training_corpus(int(args.train_mb * 1e6))

    failures = 0
    for rnd in range(args.rounds):
        if time.time() - t_start > args.budget_s:
            log(f"budget of {args.budget_s}s spent after {rnd} rounds")
            break
        trainers = [("metaspace_bpe", lambda: g.train_metaspace(train_corpus, 2500))]
        if not args.no_bytelevel:
            trainers.append(("bytelevel_bpe", lambda: g.train_bytelevel(train_corpus, 3000)))
        for name, train in trainers:
            try:
                t0 = time.time()
                tok = train()
                log(f"round {rnd} {name}: trained in {time.time() - t0:.1f}s")
                info = check_tokenizer(name, rnd, tok, text, corpus_file, ours, work, found,
                                       time.time() + args.bisect_s)
            except Exception:
                info = {"round": rnd, "name": name, "error": traceback.format_exc()}
                summary["errors"].append(info["error"])
                log(f"round {rnd} {name} error:\n{info['error']}")
            summary["rounds"].append({k: v for k, v in info.items() if k not in ("duplicate_merges",)}
                                     | {"duplicate_merges": info.get("duplicate_merges", [])[:5]})
            if info.get("match") is False:
                failures += 1
            (out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1))
        if failures >= args.max_failures:
            log(f"{failures} mismatching tokenizers found; stopping")
            break
    summary["failures"] = failures
    log(f"done: {len(summary['rounds'])} tokenizers checked, {failures} mismatching, "
        f"{ours.calls} binary runs, {time.time() - t_start:.0f}s")
    return finish(0)


if __name__ == "__main__":
    sys.exit(main())
