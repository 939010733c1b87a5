#!/usr/bin/env python3
"""Train Seedling's small demo MoE (qwen3_moe) on the Python sources of the machine it runs on.

Run on the GPU machine (one H200; torch, transformers 5.x, tokenizers, safetensors, numpy, matplotlib; no network):

    python3 tools/train_demo_model.py --out "$OUT"            # ~7 minutes, 300 s of it training

What it does, in order (every stage logs with flush=True to stdout and to OUT/demo_train_log.txt):
  a. corpus: the stdlib (sysconfig stdlib path) plus the .py files of installed distributions whose licence
     (dist-info METADATA: License-Expression, classifiers, License, else the licence file) is permissive (MIT, BSD,
     Apache-2.0, PSF, ISC, Zlib, Unlicense, CC0, HPND, public domain) and that ship no compiled extension ("pure
     Python"; --include-platlib widens this). Skips tests dirs, vendored code, files > 256 KB or with very long
     lines (generated), non-UTF-8 files, files containing our special-token strings; CRLF -> LF; dedupes by content
     hash; caps bytes per package and in total with a seeded choice. Files are split train / held-out by file with a
     fixed seed, and a ~32 KB held-out text (whole held-out files concatenated) is written for the perplexity test.
  b. tokenizer: byte-level BPE with HF tokenizers, Qwen2-style pre-tokenizer (the Qwen regex Split, then ByteLevel
     without its own regex), no normalizer, no post-processor, vocab 4096, specials <|endoftext|> (id 0, eos/pad),
     <|im_start|>, <|im_end|>. Saves tokenizer.json and tokenizer_config.json (with a ChatML chat_template).
  c. model: Qwen3MoeForCausalLM, every layer MoE, 32 experts top-4 (norm_topk_prob), tied embeddings; the parameter
     count and the folder size (bf16) are checked against --size-budget-mb BEFORE training. Training: seeded,
     bf16 autocast, AdamW (fused) + linear warmup + cosine to 10 %, grad clip 1.0, router load-balancing loss
     (output_router_logits=True; Switch-style E * sum_e f_e P_e per layer, averaged over layers, coefficient
     --aux-coef 0.01, computed here from the router outputs because some transformers 5.x releases apply softmax
     twice in theirs; router_aux_loss_coef in config.json records it), random windows of --train-ctx tokens from the
     train stream (documents joined by <|endoftext|>), a fixed wall-time budget (--budget s; the step count is
     estimated from measured step times so the cosine ends on time; --steps N fixes it instead).
  d. saves a standard HF folder in bf16 (config.json, model.safetensors, generation_config.json, tokenizer.json,
     tokenizer_config.json, README.md model card), reloads it, and checks the reload reproduces the logits: like
     with like, i.e. the in-memory model with its weights rounded to bf16 as saved, run in fp32 with the fp32 RoPE
     buffers that loading recomputes and the same (eager) attention and experts as the reloaded folder.
  e. held-out perplexity with transformers in float32 (eager attention, eager experts, TF32 off) from the SAVED
     folder; the windowing is defined in ppl_reference.json ("definition") and below.
  f. greedy completions (float32, model.generate, do_sample=False, 32 new tokens) of three Python prompts.
  g. loss curve (PNG + SVG), expert-use histogram per layer on the held-out text (PNG), routing concentration (JSON).
  h. a route trace of the held-out text (tools/record_route_trace.py format), gzip CSV.

Perplexity definition (what `seedling perplexity -m DIR -f FILE --ctx N` must reproduce):
  tokens = tokenizer.json encoding of the whole file (bytes decoded as UTF-8, no BOS, no special tokens added).
  n_windows = floor(len(tokens) / ctx); window w = tokens[w*ctx : (w+1)*ctx]; trailing tokens that do not fill a
  window are dropped. Each window runs independently from position 0 (no cache across windows). In each window the
  tokens at positions 1..ctx-1 are scored: nll_j = -log softmax(logits[j-1])[tokens[j]]; position 0 is context
  only. n_tokens_scored = n_windows*(ctx-1); mean_nll = sum(nll)/n_tokens_scored (natural log);
  ppl = exp(mean_nll); nll_stderr = std(nll over all scored tokens, ddof=1)/sqrt(n_tokens_scored).

Outputs written to --out (3 files, nothing else):
  demo_model.tar      the model folder <model-name>/ (config.json, model.safetensors, generation_config.json,
                      tokenizer.json, tokenizer_config.json, README.md)
  demo_artifacts.tar  artifacts/: heldout.txt, ppl_reference.json, greedy_reference.json, routing_concentration.json,
                      expert_use.png, loss_curve.png, loss_curve.svg, loss_history.csv, corpus_manifest.json,
                      tensors.json, route_trace_heldout.csv.gz (+ .meta.json), demo_train_log.txt
  demo_train_log.txt  the log (also written while running, so a crash still leaves it)
Scratch files go to --work (default: a fresh temporary folder outside --out).

Locally (no torch): `python3 tools/train_demo_model.py --only-corpus --out /tmp/x` runs stage a alone.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import sys
import sysconfig
import tarfile
import tempfile
import time
import traceback

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS_TOKEN = "<|endoftext|>"
# The pre-tokenizer regex of Qwen2/Qwen3 tokenizer.json files.
QWEN_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GREEDY_PROMPTS = [
    "def fibonacci(n):\n",
    "import os\n\n\ndef list_python_files(root):\n",
    "class Stack:\n    def __init__(self):\n",
]

_LOG_FILES: list = []
_T0 = time.time()


def log(msg: str = "") -> None:
    line = f"[{time.time() - _T0:7.1f}s] {msg}"
    print(line, flush=True)
    for f in _LOG_FILES:
        f.write(line + "\n")
        f.flush()


def die(msg: str) -> None:
    log("FATAL: " + msg)
    sys.exit(2)


# --------------------------------------------------------------------------------------------------------------
# a. corpus
# --------------------------------------------------------------------------------------------------------------

# for licence identifiers, classifiers and short License fields
_NON_PERMISSIVE = re.compile(
    r"(A?GPL|LGPL|\bGNU\b|\bMPL\b|Mozilla|EUPL|CDDL|\bEPL\b|Eclipse|SSPL|BUSL|Commons Clause|Proprietary|"
    r"Commercial|CC-BY-SA|CC-BY-NC|Artistic|\bOSL\b|Sleepycat|Creative Commons Attribution-ShareAlike)",
    re.I,
)
# for whole licence texts (which say "commercial damages", "GPL-compatible" and such in passing)
_NON_PERMISSIVE_TEXT = re.compile(
    r"(GNU (Lesser |Library |Affero )?General Public License|Mozilla Public License|Eclipse Public License|"
    r"European Union Public Licen|Server Side Public License|Business Source License|Commons Clause|"
    r"Attribution-ShareAlike|NonCommercial|Common Development and Distribution License)",
    re.I,
)
_PERMISSIVE = [
    ("MIT", re.compile(r"\bMIT\b|\bExpat\b|\bX11\b|Permission is hereby granted, free of charge", re.I)),
    ("Apache-2.0", re.compile(r"Apache", re.I)),
    ("BSD", re.compile(r"\bBSD\b|BSD-\d|0BSD|Redistribution and use in source and binary forms", re.I)),
    ("PSF", re.compile(r"\bPSF\b|Python Software Foundation|Python-2\.0", re.I)),
    ("ISC", re.compile(r"\bISC\b", re.I)),
    ("Zlib", re.compile(r"\bzlib\b", re.I)),
    ("Unlicense", re.compile(r"Unlicense", re.I)),
    ("CC0", re.compile(r"\bCC0\b|CC0-1\.0", re.I)),
    ("HPND", re.compile(r"HPND|Historical Permission Notice", re.I)),
    ("BSL-1.0", re.compile(r"BSL-1\.0|Boost Software License", re.I)),
    ("NCSA", re.compile(r"\bNCSA\b", re.I)),
    ("Public-Domain", re.compile(r"Public Domain", re.I)),
]


def _permissive_labels(text: str) -> list[str]:
    return [name for name, rx in _PERMISSIVE if rx.search(text)]


def classify_spdx(expr: str):
    """Decide an SPDX License-Expression. Returns (label, ok)."""
    e = expr.replace("(", " ").replace(")", " ")
    e = re.sub(r"\s+WITH\s+\S+", " ", e, flags=re.I)
    for alt in re.split(r"\s+OR\s+", e.strip(), flags=re.I):
        ids = [x.strip() for x in re.split(r"\s+AND\s+", alt.strip(), flags=re.I) if x.strip()]
        if ids and all(_permissive_labels(i) and not _NON_PERMISSIVE.search(i) for i in ids):
            return " AND ".join(ids), True
    return expr.strip(), False


def classify_text(text: str):
    """Classify free licence text (a License: field or a LICENSE file). Returns (label or None, ok)."""
    head = text[:6000]
    if _NON_PERMISSIVE_TEXT.search(head):
        return None, False
    labels = _permissive_labels(head)
    if labels:
        return "/".join(labels), True
    return None, False


def classify_metadata(md, license_texts) -> tuple[str, bool, str]:
    """md: an email.message-like metadata object. Returns (label, permissive?, how)."""
    expr = (md.get("License-Expression") or "").strip()
    if expr:
        label, ok = classify_spdx(expr)
        return label, ok, "License-Expression"
    cands = []
    for c in md.get_all("Classifier") or []:
        if c.startswith("License ::"):
            name = c.split("::")[-1].strip()
            if name != "OSI Approved":
                cands.append(name)
    lic = (md.get("License") or "").strip()
    if lic and lic.upper() != "UNKNOWN" and len(lic) <= 200:
        cands.append(lic)
    if cands:
        if any(_NON_PERMISSIVE.search(c) for c in cands):
            return "; ".join(cands), False, "classifiers/License"
        labels = sorted({l for c in cands for l in _permissive_labels(c)})
        if labels:
            return "/".join(labels), True, "classifiers/License"
    if lic and len(lic) > 200:
        if _NON_PERMISSIVE_TEXT.search(lic[:6000]):
            return "copyleft text in License field", False, "License text"
        label, ok = classify_text(lic)
        if label:
            return label, ok, "License text"
    for t in license_texts:
        if _NON_PERMISSIVE_TEXT.search(t[:6000]):
            return "copyleft licence file", False, "licence file"
    for t in license_texts:
        label, ok = classify_text(t)
        if label:
            return label, ok, "licence file"
    return "unknown", False, "none"


SKIP_DIR_NAMES = {
    "test", "tests", "testing_data", "unittests", "idle_test", "__pycache__", "testsuite", "test_data", "testdata",
    "_vendor", "vendor", "vendored", "_vendored", "extern", "_externals", "site-packages", "dist-packages",
    "fixtures", "benchmarks",
}
SPECIAL_STRINGS = tuple(SPECIAL_TOKENS) + ("<|im_", "<|endof")


def _skip_rel_path(rel: str) -> bool:
    parts = rel.replace("\\", "/").split("/")
    if any(p in SKIP_DIR_NAMES for p in parts[:-1]):
        return True
    name = parts[-1]
    if not name.endswith(".py"):
        return True
    if name.startswith("test_") or name.endswith("_test.py") or name in ("conftest.py", "tests.py"):
        return True
    return False


def read_source(path: str, max_bytes: int):
    """Returns normalised text or None (with the reason) for one candidate .py file."""
    try:
        st = os.stat(path)
    except OSError:
        return None, "unreadable"
    if st.st_size > max_bytes:
        return None, "too big"
    if st.st_size < 64:
        return None, "tiny"
    try:
        raw = open(path, "rb").read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None, "not utf-8"
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        return None, "binary"
    lines = text.split("\n")
    if max(len(l) for l in lines) > 1000:
        return None, "long lines"
    if sum(1 for l in lines if len(l) > 200) > 0.05 * len(lines):
        return None, "long lines"
    if any(s in text for s in SPECIAL_STRINGS):
        return None, "special-token string"
    if not text.endswith("\n"):
        text += "\n"
    return text, None


def site_dirs() -> list[str]:
    import site

    cands = []
    try:
        cands += site.getsitepackages()
    except Exception:
        pass
    try:
        cands.append(site.getusersitepackages())
    except Exception:
        pass
    for k in ("purelib", "platlib"):
        try:
            cands.append(sysconfig.get_paths()[k])
        except Exception:
            pass
    cands += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    out, seen = [], set()
    for p in cands:
        if p and os.path.isdir(p):
            rp = os.path.realpath(p)
            if rp not in seen:
                seen.add(rp)
                out.append(p)
    return out


def gather_corpus(args):
    """Returns (docs, manifest). docs: list of dicts {path, package, text} sorted by (package, path)."""
    from importlib import metadata as im

    max_file = args.max_file_kb * 1024
    skipped: dict[str, int] = {}
    packages = []
    per_pkg_files: dict[str, list] = {}

    # stdlib
    stdlib = sysconfig.get_paths()["stdlib"]
    files = []
    for root, dirs, fnames in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIR_NAMES and not d.startswith("."))
        for fn in sorted(fnames):
            full = os.path.join(root, fn)
            rel = os.path.relpath(full, stdlib)
            if _skip_rel_path(rel):
                continue
            files.append((rel, full))
    per_pkg_files["python-stdlib"] = files
    packages.append({"package": "python-stdlib", "version": platform.python_version(), "licence": "PSF-2.0",
                     "how": "CPython standard library", "pure": True, "path": stdlib})

    # distributions in site-packages
    seen_names = set()
    rejected = []
    for sp in site_dirs():
        try:
            dists = list(im.distributions(path=[sp]))
        except Exception as e:
            log(f"  cannot list distributions in {sp}: {e}")
            continue
        def _name(d):
            try:
                return (d.metadata.get("Name") or "").strip()
            except Exception:
                return ""

        dists.sort(key=lambda d: (_name(d).lower(), str(d.version)))
        for d in dists:
            name = _name(d)
            norm = re.sub(r"[-_.]+", "-", name).lower()
            if not name or norm in seen_names:
                continue
            seen_names.add(norm)
            try:
                dfiles = d.files
            except Exception:
                dfiles = None
            if not dfiles:
                rejected.append({"package": name, "version": d.version, "why": "no file list (RECORD)"})
                continue
            compiled = any(str(f).endswith((".so", ".pyd", ".dylib", ".dll")) or ".so." in str(f) for f in dfiles)
            lic_texts = []
            for f in dfiles:
                base = os.path.basename(str(f)).upper()
                if base.startswith(("LICENSE", "LICENCE", "COPYING")) and (
                        ".dist-info" in str(f) or ".egg-info" in str(f) or "/" not in str(f)):
                    try:
                        lic_texts.append(open(d.locate_file(f), "r", errors="replace").read(8000))
                    except OSError:
                        pass
            label, ok, how = classify_metadata(d.metadata, lic_texts)
            if not ok:
                rejected.append({"package": name, "version": d.version, "why": f"licence: {label} ({how})"})
                continue
            if compiled and not args.include_platlib:
                rejected.append({"package": name, "version": d.version, "why": f"compiled extension ({label})"})
                continue
            pf = []
            for f in dfiles:
                s = str(f)
                if ".." in s.split("/") or not s.endswith(".py") or ".dist-info" in s or ".egg-info" in s:
                    continue
                if _skip_rel_path(s):
                    continue
                pf.append((s, str(d.locate_file(f))))
            if not pf:
                rejected.append({"package": name, "version": d.version, "why": "no .py files"})
                continue
            per_pkg_files[name] = sorted(pf)
            packages.append({"package": name, "version": d.version, "licence": label, "how": how,
                             "pure": not compiled, "path": sp})

    # read, filter, dedupe, cap per package
    rng = random.Random(args.seed)
    seen_hash = set()
    docs = []
    max_pkg = int(args.max_pkg_mb * 1e6)
    for pkg in sorted(per_pkg_files):
        items = list(per_pkg_files[pkg])
        rng_pkg = random.Random(f"{args.seed}:{pkg}")
        rng_pkg.shuffle(items)  # seeded choice when a package is over its cap
        kept, nbytes = [], 0
        for rel, full in items:
            text, why = read_source(full, max_file)
            if text is None:
                skipped[why] = skipped.get(why, 0) + 1
                continue
            h = hashlib.sha1(text.strip().encode()).hexdigest()
            if h in seen_hash:
                skipped["duplicate"] = skipped.get("duplicate", 0) + 1
                continue
            if nbytes + len(text) > max_pkg:
                skipped["package cap"] = skipped.get("package cap", 0) + 1
                if nbytes > 0.99 * max_pkg:
                    break
                continue
            seen_hash.add(h)
            kept.append({"package": pkg, "path": rel, "text": text})
            nbytes += len(text)
        docs.extend(kept)
    # total cap, seeded
    docs.sort(key=lambda d: (d["package"], d["path"]))
    total = sum(len(d["text"]) for d in docs)
    cap = int(args.max_corpus_mb * 1e6)
    if total > cap:
        order = list(range(len(docs)))
        rng.shuffle(order)
        keep, acc = set(), 0
        for i in order:
            if acc + len(docs[i]["text"]) <= cap:
                keep.add(i)
                acc += len(docs[i]["text"])
        skipped["total cap"] = len(docs) - len(keep)
        docs = [d for i, d in enumerate(docs) if i in keep]
    # manifest
    stats: dict[str, list] = {}
    for d in docs:
        s = stats.setdefault(d["package"], [0, 0])
        s[0] += 1
        s[1] += len(d["text"].encode())
    used = []
    for p in packages:
        if p["package"] in stats:
            q = dict(p)
            q["files"], q["bytes"] = stats[p["package"]]
            used.append(q)
    manifest = {"packages": used, "rejected": rejected, "skipped_files": skipped,
                "n_files": len(docs), "bytes": sum(s[1] for s in stats.values()),
                "python": platform.python_version(), "site_dirs": site_dirs()}
    return docs, manifest


def split_heldout(docs, args):
    rng = random.Random(args.seed + 1)
    idx = list(range(len(docs)))
    rng.shuffle(idx)
    n_held = max(20, int(round(len(docs) * args.heldout_frac)))
    held_set = set(idx[:n_held])
    train = [d for i, d in enumerate(docs) if i not in held_set]
    held = [docs[i] for i in idx[:n_held]]  # seeded order
    # the perplexity test text: whole held-out files of 1-8 KB, in seeded order, until >= heldout_bytes
    parts, n = [], 0
    used = []
    for d in held:
        b = len(d["text"].encode())
        if b < 1024 or b > 8 * 1024:
            continue
        if n + b > args.heldout_bytes * 1.5:
            continue
        parts.append(d["text"])
        used.append(f"{d['package']}:{d['path']}")
        n += b
        if n >= args.heldout_bytes:
            break
    return train, held, "".join(parts), used


# --------------------------------------------------------------------------------------------------------------
# b. tokenizer
# --------------------------------------------------------------------------------------------------------------

def train_tokenizer(train_docs, args, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(args.seed + 2)
    order = list(range(len(train_docs)))
    rng.shuffle(order)
    sample, n = [], 0
    for i in order:
        sample.append(train_docs[i]["text"])
        n += len(sample[-1])
        if n >= args.tok_sample_mb * 1e6:
            break
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(sample, trainer=trainer, length=len(sample))
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    added = {}
    for t in SPECIAL_TOKENS:
        added[str(tok.token_to_id(t))] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                           "single_word": False, "special": True}
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": EOS_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": args.max_positions,
        "chat_template": CHAT_TEMPLATE,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return tok, n


# --------------------------------------------------------------------------------------------------------------
# c. model and training
# --------------------------------------------------------------------------------------------------------------

def build_config(args, vocab_size, eos_id):
    from transformers import Qwen3MoeConfig

    kw = dict(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.dense_inter,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        hidden_act="silu",
        max_position_embeddings=args.max_positions,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        use_cache=True,
        tie_word_embeddings=True,
        attention_bias=False,
        use_sliding_window=False,
        attention_dropout=0.0,
        decoder_sparse_step=1,
        moe_intermediate_size=args.moe_inter,
        num_experts_per_tok=args.top_k,
        num_experts=args.experts,
        norm_topk_prob=True,
        output_router_logits=True,
        router_aux_loss_coef=args.aux_coef,
        mlp_only_layers=[],
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    cfg = None
    for variant in ("rope_parameters", "rope_theta", "plain"):
        try:
            if variant == "rope_parameters":
                cfg = Qwen3MoeConfig(rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta}, **kw)
            elif variant == "rope_theta":
                cfg = Qwen3MoeConfig(rope_theta=args.rope_theta, **kw)
            else:
                cfg = Qwen3MoeConfig(**kw)
            break
        except Exception as e:
            log(f"   Qwen3MoeConfig with {variant}: {type(e).__name__}: {str(e)[:200]}")
    if cfg is None:
        die("cannot build a Qwen3MoeConfig")
    log(f"   config built with {variant}")
    hd = getattr(cfg, "head_dim", None) or args.hidden // args.heads
    if hd != args.head_dim:
        die(f"config head_dim {hd} != requested {args.head_dim}")
    if int(cfg.num_experts) != args.experts or int(cfg.num_experts_per_tok) != args.top_k:
        die("config did not take num_experts / num_experts_per_tok")
    return cfg


def count_params(model):
    seen, n = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def check_init(model, std):
    import torch

    fixed = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                bad = (not torch.isfinite(p).all()) or p.abs().max().item() == 0 or p.float().std().item() > 1.0
                if bad:
                    p.normal_(0.0, std)
                    fixed.append(name)
    return fixed


def set_experts_impl(model, name):
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(name)
        return True
    return name == "eager"


def set_attn_eager(model):
    """Eager attention, as load_fp32 asks of from_pretrained (the default of a model built from a config may be sdpa)."""
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
            return
        except Exception as e:
            log(f"   note: set_attn_implementation('eager') failed ({type(e).__name__}: {str(e)[:200]}); "
                "setting config._attn_implementation")
    model.config._attn_implementation = "eager"


def lr_at(step, total, args):
    warm = min(args.warmup, max(1, total // 10))
    if step < warm:
        return args.lr * (step + 1) / warm
    prog = min(1.0, (step - warm) / max(1, total - warm))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * prog)))


def train(args, model, train_ids, held_ids, device):
    import torch

    B, T = args.batch, args.train_ctx
    train_t = torch.from_numpy(train_ids).long().to(device)
    held_t = torch.from_numpy(held_ids).long().to(device)
    if len(held_ids) < T + 2 or len(train_ids) < 10 * T:
        die(f"too little data: train {len(train_ids)} held-out {len(held_ids)} tokens")
    ar = torch.arange(T, device=device)
    g = torch.Generator(device="cpu")
    g.manual_seed(args.seed)

    def batch_from(stream, gen, n=B):
        offs = torch.randint(0, stream.numel() - T, (n,), generator=gen).to(device)
        return stream[offs[:, None] + ar[None, :]]

    geval = torch.Generator(device="cpu")
    geval.manual_seed(args.seed + 3)
    eval_batches = [batch_from(held_t, geval, min(B, 64)) for _ in range(args.eval_batches)]

    decay, no_decay = [], []
    for n_, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if device == "cuda" else \
        torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    coef = float(args.aux_coef)
    E, K = args.experts, args.top_k
    warned = []
    router_out_is_prob = []  # decided once, on the first batch

    def fwd(x):
        """Returns (total loss, cross-entropy, balance loss). The balance loss is computed here, not taken from
        transformers: some 5.x releases return softmax probabilities as router_logits and their
        load_balancing_loss_func applies softmax again, which flattens it to almost no signal."""
        with autocast:
            out = model(input_ids=x, use_cache=False, output_router_logits=True)
        logits = out.logits
        ce = torch.nn.functional.cross_entropy(logits[:, :-1, :].float().reshape(-1, logits.shape[-1]),
                                               x[:, 1:].reshape(-1))
        rl = getattr(out, "router_logits", None)
        if rl is not None and len(rl) > 0:
            parts = []
            for r in rl:
                r = r.float().reshape(-1, E)
                if not router_out_is_prob:
                    with torch.no_grad():
                        router_out_is_prob.append(bool((r.min() >= 0) & ((r.sum(-1) - 1).abs().max() < 1e-3)))
                    log(f"  router_logits from the model are {'probabilities' if router_out_is_prob[0] else 'logits'}"
                        f" ({len(rl)} layers)")
                p = r if router_out_is_prob[0] else torch.softmax(r, dim=-1)
                idx = torch.topk(p, K, dim=-1).indices
                frac = torch.zeros(E, device=p.device).scatter_add_(
                    0, idx.reshape(-1), torch.ones(idx.numel(), device=p.device)) / r.shape[0]
                parts.append(E * (frac * p.mean(0)).sum())  # = top_k when perfectly balanced
            aux = torch.stack(parts).mean()
        else:
            if not warned:
                warned.append(1)
                log("  WARNING: the model returned no router_logits; using its own aux_loss")
            aux = out.aux_loss if getattr(out, "aux_loss", None) is not None else torch.zeros((), device=device)
        return ce + coef * aux, ce, aux

    @torch.no_grad()
    def evaluate():
        model.eval()
        tot = 0.0
        for x in eval_batches:
            _, ce, _ = fwd(x)
            tot += ce.item()
        model.train()
        return tot / len(eval_batches)

    # pick the experts backend: the fastest one that runs (fwd+bwd, no optimizer step, so weights are untouched)
    model.train()
    cands = ["grouped_mm", "eager"] if device == "cuda" else ["eager"]
    if args.experts_backend != "auto":
        cands = [args.experts_backend]
    timings = {}
    for impl in cands:
        try:
            if not set_experts_impl(model, impl):
                continue
            x = batch_from(train_t, torch.Generator(device="cpu").manual_seed(999))
            for i in range(4):
                if i == 1:
                    if device == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.time()
                loss, ce, aux = fwd(x)
                loss.backward()
            if device == "cuda":
                torch.cuda.synchronize()
            timings[impl] = (time.time() - t0) / 3
            if not torch.isfinite(loss):
                raise RuntimeError(f"non-finite loss {loss.item()}")
            log(f"  experts backend {impl}: {timings[impl] * 1000:.1f} ms per fwd+bwd, loss {loss.item():.3f}, "
                f"aux {float(aux):.3f}")
        except Exception as e:
            log(f"  experts backend {impl}: unusable ({type(e).__name__}: {str(e)[:300]})")
        finally:
            opt.zero_grad(set_to_none=True)
    if not timings:
        die("no experts backend could run a training step")
    impl = min(timings, key=timings.get)
    set_experts_impl(model, impl)
    log(f"training with experts backend {impl!r}")

    history, evals = [], []
    total = args.steps if args.steps > 0 else 10 ** 9
    fixed_steps = args.steps > 0
    t_start = time.time()
    hard_stop = args.budget * 1.04 + 5
    step = 0
    acc_ce = torch.zeros((), device=device)
    acc_aux = torch.zeros((), device=device)
    acc_n = 0
    tokens_seen = 0
    calib_at = {30, 300}
    t_calib0 = None
    while step < total:
        lr = lr_at(step, total if total < 10 ** 9 else 10 ** 6, args)
        for gr in opt.param_groups:
            gr["lr"] = lr
        x = batch_from(train_t, g)
        loss, ce_t, aux = fwd(x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc_ce += ce_t.detach()
        acc_aux += aux.detach()
        acc_n += 1
        step += 1
        tokens_seen += B * T
        if step == 10:
            if device == "cuda":
                torch.cuda.synchronize()
            t_calib0 = (time.time(), step)
        if not fixed_steps and step in calib_at and t_calib0 is not None:
            if device == "cuda":
                torch.cuda.synchronize()
            now = time.time()
            per_step = (now - t_calib0[0]) / (step - t_calib0[1])
            left = args.budget - (now - t_start)
            new_total = step + max(1, int(left / per_step * 0.98))
            log(f"  calibration at step {step}: {per_step * 1000:.1f} ms/step -> total steps {new_total}")
            total = new_total
        if step % args.log_every == 0 or step == total:
            ce = (acc_ce / acc_n).item()
            au = (acc_aux / acc_n).item()
            el = time.time() - t_start
            history.append({"step": step, "time_s": round(el, 2), "lr": lr, "train_ce": ce, "aux": au,
                            "tokens": tokens_seen})
            acc_ce.zero_()
            acc_aux.zero_()
            acc_n = 0
            if not math.isfinite(ce):
                die(f"loss is not finite at step {step}")
            if step % (args.log_every * 10) == 0:
                log(f"  step {step}/{total if total < 10 ** 9 else '?'} t={el:.0f}s lr={lr:.2e} ce={ce:.4f} "
                    f"aux={au:.4f} tokens={tokens_seen / 1e6:.1f}M")
        if step % args.eval_every == 0 or step == total:
            he = evaluate()
            evals.append({"step": step, "time_s": round(time.time() - t_start, 2), "heldout_ce": he})
            log(f"  eval step {step}: held-out ce {he:.4f} (ppl {math.exp(he):.2f})")
        if not fixed_steps and time.time() - t_start > hard_stop:
            log(f"  hard time stop at step {step}")
            break
    if not evals or evals[-1]["step"] != step:
        he = evaluate()
        evals.append({"step": step, "time_s": round(time.time() - t_start, 2), "heldout_ce": he})
    wall = time.time() - t_start
    return {"history": history, "evals": evals, "steps": step, "tokens_seen": tokens_seen, "wall_s": wall,
            "experts_backend": impl, "backend_ms": {k: round(v * 1000, 2) for k, v in timings.items()}}


# --------------------------------------------------------------------------------------------------------------
# d-h. save, evaluate, report
# --------------------------------------------------------------------------------------------------------------

def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))


def make_tar(tar_path, src_dir, arcname):
    def norm(ti):
        ti.mtime = 0
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    tmp = tar_path + ".tmp"
    with tarfile.open(tmp, "w") as tf:
        tf.add(src_dir, arcname=arcname, filter=norm, recursive=False)
        for f in sorted(os.listdir(src_dir)):
            p = os.path.join(src_dir, f)
            if os.path.isfile(p):
                tf.add(p, arcname=f"{arcname}/{f}", filter=norm)
    os.replace(tmp, tar_path)


def load_fp32(model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    try:
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                                 experts_implementation="eager")
    except Exception as e:
        log(f"   from_pretrained with experts_implementation failed ({type(e).__name__}: {str(e)[:200]}); "
            "retrying without it")
        m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    try:
        set_experts_impl(m, "eager")
    except Exception as e:
        log(f"   note: set_experts_implementation('eager') failed: {e}")
    return m


def perplexity(model, ids, ctx, device, rec=None, batch=16):
    import numpy as np
    import torch

    n_windows = len(ids) // ctx
    if n_windows < 1:
        raise RuntimeError(f"held-out text has {len(ids)} tokens < ctx {ctx}")
    all_nll = []
    counts = None
    with torch.no_grad():
        for w0 in range(0, n_windows, batch):
            ws = list(range(w0, min(n_windows, w0 + batch)))
            x = torch.tensor([ids[w * ctx:(w + 1) * ctx] for w in ws], dtype=torch.long, device=device)
            logits = model(input_ids=x, use_cache=False).logits.float()
            lp = torch.log_softmax(logits[:, :-1, :], dim=-1)
            nll = -lp.gather(-1, x[:, 1:, None]).squeeze(-1)  # [b, ctx-1]
            all_nll.append(nll.double().cpu().numpy())
            if rec is not None:
                got = rec.take()
                if counts is None:
                    counts = {li: np.zeros(rec.n_experts, dtype=np.int64) for li in rec.layers}
                for li, (e, _) in got.items():
                    counts[li] += np.bincount(e.reshape(-1).numpy(), minlength=rec.n_experts)
    nll = np.concatenate(all_nll, axis=0)  # [n_windows, ctx-1]
    flat = nll.reshape(-1)
    mean = float(flat.mean())
    res = {
        "ctx": ctx,
        "n_file_tokens": len(ids),
        "n_windows": int(n_windows),
        "n_tokens_scored": int(flat.size),
        "mean_nll": mean,
        "ppl": float(math.exp(mean)),
        "nll_stderr": float(flat.std(ddof=1) / math.sqrt(flat.size)),
        "window_nll_stderr": float(nll.mean(axis=1).std(ddof=1) / math.sqrt(n_windows)) if n_windows > 1 else None,
        "window_mean_nll": [float(v) for v in nll.mean(axis=1)],
        "first_window_token_nll": [round(float(v), 6) for v in nll[0]],
    }
    return res, counts


def greedy(model, tok, eos_id, device, max_new=32):
    import torch

    out = []
    for prompt in GREEDY_PROMPTS:
        pids = tok.encode(prompt, add_special_tokens=False).ids
        x = torch.tensor([pids], dtype=torch.long, device=device)
        with torch.no_grad():
            g = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                               do_sample=False, eos_token_id=eos_id, pad_token_id=eos_id)
        seq = g[0].tolist()
        new = seq[len(pids):]
        # cross-check with full recomputation (no KV cache): argmax at each step must equal the generated token
        steps, mismatch = [], 0
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([seq], device=device), use_cache=False).logits[0].float()
        for j, t in enumerate(new):
            row = logits[len(pids) - 1 + j]
            top2 = torch.topk(row, 2)
            a, b = top2.indices.tolist()
            if a != t:
                mismatch += 1
            steps.append({"id": t, "logit": round(float(row[t]), 5), "runner_up_id": b if a == t else a,
                          "margin": round(float(top2.values[0] - top2.values[1]), 5)})
        out.append({
            "prompt": prompt,
            "prompt_ids": pids,
            "output_ids": new,
            "full_ids": seq,
            "completion_text": tok.decode(new, skip_special_tokens=False),
            "stopped_at_eos": bool(eos_id in new),
            "no_cache_argmax_mismatches": mismatch,
            "min_margin": min((s["margin"] for s in steps), default=None),
            "steps": steps,
        })
    return out


def plot_loss(res, path_png, path_svg):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = res["history"]
    xs = [r["step"] for r in h]
    ys = [r["train_ce"] for r in h]
    ema, sm = [], None
    for y in ys:
        sm = y if sm is None else 0.9 * sm + 0.1 * y
        ema.append(sm)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    ax.plot(xs, ys, color="#9ecae1", lw=0.8, label="train CE (per 10 steps)")
    ax.plot(xs, ema, color="#08519c", lw=1.4, label="train CE (EMA)")
    ev = res["evals"]
    ax.plot([e["step"] for e in ev], [e["heldout_ce"] for e in ev], "o-", color="#d94801", ms=3, lw=1,
            label="held-out CE")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(bottom=max(0.0, min(ys + [e["heldout_ce"] for e in ev]) - 0.3), top=min(max(ys), 8.5) + 0.2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"seedling demo MoE: {res['steps']} steps, {res['tokens_seen'] / 1e6:.0f}M tokens, "
                 f"{res['wall_s']:.0f} s", fontsize=9)
    fig.tight_layout()
    fig.savefig(path_png)
    fig.savefig(path_svg)
    plt.close(fig)


def plot_experts(counts, path_png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    layers = sorted(counts)
    n = len(layers)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(8, 1.8 * rows + 0.6), dpi=100, squeeze=False)
    for k, li in enumerate(layers):
        ax = axes[k // cols][k % cols]
        c = counts[li].astype(float)
        share = 100 * c / c.sum()
        ax.bar(np.arange(len(c)), share, color="#3182bd", width=0.85)
        ax.axhline(100 / len(c), color="#d94801", lw=0.8, ls="--")
        top_q = np.sort(c)[::-1][: max(1, len(c) // 4)].sum() / c.sum()
        ax.set_title(f"layer {li}: top quarter of experts take {100 * top_q:.1f}% of uses", fontsize=8)
        ax.set_xlim(-0.7, len(c) - 0.3)
        ax.tick_params(labelsize=7)
        ax.set_ylabel("% of uses", fontsize=7)
        ax.set_xlabel("expert id", fontsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("expert use per layer on held-out text (dashed: uniform)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path_png)
    plt.close(fig)


def concentration(counts, top_k):
    import numpy as np

    layers = []
    for li in sorted(counts):
        c = counts[li].astype(np.float64)
        tot = c.sum()
        q = max(1, len(c) // 4)
        s = np.sort(c)[::-1]
        p = c / tot
        ent = float(-(p[p > 0] * np.log2(p[p > 0])).sum())
        layers.append({"layer": int(li), "n_experts": int(len(c)), "quarter": q, "uses": int(tot),
                       "top_quarter_share": float(s[:q].sum() / tot), "max_share": float(s[0] / tot),
                       "min_share": float(s[-1] / tot), "unused_experts": int((c == 0).sum()),
                       "entropy_bits": ent, "max_entropy_bits": float(math.log2(len(c))),
                       "counts": [int(v) for v in c]})
    return {"definition": "share of all expert uses (top_k per token per layer) on the held-out perplexity windows "
                          "taken by the most-used quarter of the experts of that layer; uniform routing gives 0.25",
            "top_k": top_k, "layers": layers,
            "mean_top_quarter_share": float(np.mean([l["top_quarter_share"] for l in layers]))}


def write_model_card(path, info):
    a = info["args"]
    pk = info["manifest"]["packages"]
    rows = "\n".join(f"| {p['package']} | {p['version']} | {p['licence']} | {p['files']} | {p['bytes'] / 1e6:.2f} |"
                     for p in sorted(pk, key=lambda p: -p["bytes"]))
    ppl = info.get("ppl") or {}
    conc = info.get("conc") or {}
    conc_line = ", ".join(f"L{l['layer']} {100 * l['top_quarter_share']:.1f}%" for l in conc.get("layers", []))
    greedy_txt = ""
    for g in info.get("greedy") or []:
        greedy_txt += "```python\n" + g["prompt"] + g["completion_text"] + "\n```\n\n"
    text = f"""---
license: other
library_name: transformers
pipeline_tag: text-generation
tags: [qwen3_moe, moe, tiny, demo, seedling]
---

# {a.model_name}

A tiny Mixture-of-Experts language model of Python code, trained from scratch in {info['train']['wall_s']:.0f} s
on one GPU, so that Seedling (a C++ MoE inference engine) has a real, trained model to ship, run and test:
realistic activations and real, non-uniform expert routing instead of random weights.

## Architecture (`qwen3_moe`, standard Hugging Face folder)

| | |
| --- | --- |
| layers | {a.layers}, every one MoE |
| hidden size | {a.hidden} |
| attention | {a.heads} query heads, {a.kv_heads} KV heads, head_dim {a.head_dim}, q/k RMSNorm, RoPE theta {a.rope_theta:g} |
| experts | {a.experts} routed experts per layer, top-{a.top_k}, softmax router, norm_topk_prob, moe_intermediate_size {a.moe_inter}, SwiGLU |
| vocabulary | {info['vocab']} (byte-level BPE; `<|endoftext|>` = {info['eos_id']} is eos and pad; no BOS) |
| embeddings | tied (no separate lm_head tensor) |
| parameters | {info['n_params']:,} ({info['active_params']:,} active per token incl. embeddings) |
| stored as | bf16 safetensors, {info['folder_bytes'] / 1e6:.2f} MB for the whole folder |
| trained context | {a.train_ctx} tokens (max_position_embeddings {a.max_positions}) |

## Training

- Data: {info['manifest']['n_files']} Python files, {info['manifest']['bytes'] / 1e6:.1f} MB, from the Python
  {info['manifest']['python']} standard library and the pure-Python packages with permissive licences installed on
  the training machine (list below). Test folders, vendored code, generated files and duplicates were left out.
  {info['n_heldout_files']} files were held out (by file, seed {a.seed}).
- Tokens: {info['n_train_tokens'] / 1e6:.1f}M training tokens (documents joined by `<|endoftext|>`),
  {info['train']['tokens_seen'] / 1e6:.0f}M tokens seen ({info['train']['tokens_seen'] / max(1, info['n_train_tokens']):.1f} epochs).
- {info['train']['steps']} steps of {a.batch} x {a.train_ctx} tokens, AdamW (betas 0.9/0.95, weight decay {a.wd}),
  peak LR {a.lr:g}, warmup {a.warmup} steps, cosine to {a.min_lr_frac:g} x peak, grad clip 1.0, bf16 autocast
  (transformers experts backend `{info['train'].get('experts_backend')}`),
  router load-balancing loss (Switch-style, per layer, coefficient {a.aux_coef}), seed {a.seed}; wall time {info['train']['wall_s']:.0f} s
  on {info['device_name']}.
- Final train cross-entropy (plain mean of the last five logged values, each a mean over up to {a.log_every} steps):
  {info['final_train_ce']:.4f} nats/token; held-out cross-entropy at the end: {info['train']['evals'][-1]['heldout_ce']:.4f}
  (in memory, bf16 autocast, random {a.train_ctx}-token windows of the held-out files; not the perplexity below).

## Evaluation

Held-out perplexity (transformers {info['versions']['transformers']}, float32, from this folder) on a
{info['heldout_bytes']} byte held-out text, windows of {ppl.get('ctx')} tokens, non-overlapping, first token of each
window not scored: **{ppl.get('ppl', float('nan')):.3f}** (mean NLL {ppl.get('mean_nll', float('nan')):.4f}
+- {ppl.get('nll_stderr', float('nan')):.4f} nats, {ppl.get('n_tokens_scored')} tokens scored).

Routing concentration on that text (share of expert uses taken by the most-used quarter of the experts; 25% is
uniform): {conc_line}.

Greedy completions (float32, 32 new tokens):

{greedy_txt}
## What it is not good for

Anything real. It is a {info['n_params'] / 1e6:.1f}M-parameter model trained for a few minutes: it writes
Python-looking text with plausible names and indentation, and it is usually wrong. It has not seen natural
language beyond comments and docstrings, it follows no instructions (the chat template is there only so chat code
paths can run), it knows nothing beyond its {info['manifest']['bytes'] / 1e6:.0f} MB of Python sources and it will repeat licence headers and boilerplate.
It exists to test and demonstrate an inference engine: numerics, routing, expert caching, codecs.

## Data sources and licences

| package | version | licence | files | MB |
| --- | --- | --- | --- | --- |
{rows}

The licence of each package was read from its installed metadata (License-Expression, classifiers, License field or
licence file); packages whose licence is copyleft (even in part), proprietary or unknown were not used, nor
(unless --include-platlib) packages that ship compiled extensions. Made by `tools/train_demo_model.py`
of the Seedling repository.
"""
    with open(path, "w") as f:
        f.write(text)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="train Seedling's demo qwen3_moe model (see the module docstring)")
    ap.add_argument("--out", required=True, help="folder for the 3 output files")
    ap.add_argument("--work", default="", help="scratch folder (default: new temp dir); must be outside --out")
    ap.add_argument("--budget", type=float, default=300.0, help="training wall-time budget in seconds (default 300)")
    ap.add_argument("--steps", type=int, default=0, help="fixed number of steps instead of the time budget")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--model-name", default="seedling-demo-moe")
    # corpus
    ap.add_argument("--max-corpus-mb", type=float, default=96.0)
    ap.add_argument("--max-pkg-mb", type=float, default=12.0)
    ap.add_argument("--max-file-kb", type=int, default=256)
    ap.add_argument("--include-platlib", action="store_true",
                    help="also take the .py files of permissive packages that ship compiled extensions")
    ap.add_argument("--heldout-frac", type=float, default=0.02)
    ap.add_argument("--heldout-bytes", type=int, default=32768)
    ap.add_argument("--only-corpus", action="store_true", help="stage a only (works without torch)")
    # tokenizer
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tok-sample-mb", type=float, default=24.0)
    # model
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--moe-inter", type=int, default=32)
    ap.add_argument("--dense-inter", type=int, default=512, help="intermediate_size (unused: every layer is MoE)")
    ap.add_argument("--max-positions", type=int, default=2048)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--size-budget-mb", type=float, default=11.5, help="max model folder size, 1e6 bytes")
    # training
    ap.add_argument("--train-ctx", type=int, default=512)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--experts-backend", default="auto", choices=["auto", "grouped_mm", "eager"],
                    help="transformers experts implementation for training (auto: the faster one that runs)")
    # evaluation
    ap.add_argument("--ctx", type=int, default=256, help="perplexity window (tokens)")
    ap.add_argument("--trace-ctx", type=int, default=512, help="route-trace window (tokens)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--trace-predict", action="store_true",
                    help="with the trace, the next-layer predictions (record_route_trace.py --predict-out)")
    a = ap.parse_args(argv)
    if a.experts < 32 or a.top_k < 4:
        ap.error("the issue asks for >= 32 experts and top-k >= 4")
    return a


def main(argv=None):
    args = parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="seedling_demo_")
    if work == out or work.startswith(out + os.sep):
        die("--work must be outside --out (only the final files may land in --out)")
    os.makedirs(work, exist_ok=True)
    art = os.path.join(work, "artifacts")
    mdir = os.path.join(work, args.model_name)
    for d in (art, mdir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    logf = open(os.path.join(out, "demo_train_log.txt"), "w")
    _LOG_FILES.append(logf)
    log(f"train_demo_model.py {' '.join(sys.argv[1:])}")
    log(f"python {platform.python_version()} on {platform.platform()}; out={out} work={work}")

    random.seed(args.seed)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    failures = []

    # ---- a. corpus
    t = time.time()
    docs, manifest = gather_corpus(args)
    if not docs:
        die("no corpus files found")
    train_docs, held_docs, held_text, held_used = split_heldout(docs, args)
    with open(os.path.join(art, "heldout.txt"), "wb") as f:
        f.write(held_text.encode("utf-8"))
    manifest["heldout_files"] = len(held_docs)
    manifest["heldout_text_files"] = held_used
    manifest["heldout_text_bytes"] = len(held_text.encode())
    with open(os.path.join(art, "corpus_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    log(f"a. corpus: {manifest['n_files']} files, {manifest['bytes'] / 1e6:.1f} MB from "
        f"{len(manifest['packages'])} packages ({time.time() - t:.1f} s); train {len(train_docs)} files, "
        f"held-out {len(held_docs)} files; heldout.txt {len(held_text.encode())} bytes from {len(held_used)} files")
    for p in sorted(manifest["packages"], key=lambda p: -p["bytes"]):
        log(f"   {p['package']:<28} {p['version']:<12} {p['licence']:<24} {p['files']:>5} files "
            f"{p['bytes'] / 1e6:6.2f} MB")
    log(f"   rejected {len(manifest['rejected'])} distributions; skipped files: {manifest['skipped_files']}")
    for r in manifest["rejected"]:
        log(f"   - {r['package']} {r['version']}: {r['why']}")
    if args.only_corpus:
        shutil.copy(os.path.join(out, "demo_train_log.txt"), os.path.join(art, "demo_train_log.txt"))
        make_tar(os.path.join(out, "demo_artifacts.tar"), art, "artifacts")
        log("only-corpus: done")
        return 0
    if manifest["bytes"] < 4e6:
        die(f"corpus too small ({manifest['bytes']} bytes)")

    # ---- fail fast on missing libraries
    missing = []
    for m in ("torch", "transformers", "tokenizers", "safetensors", "numpy", "matplotlib"):
        try:
            __import__(m)
        except Exception as e:
            missing.append(f"{m} ({e})")
    if missing:
        die("missing Python packages: " + ", ".join(missing))
    import numpy as np
    import torch
    import transformers
    import tokenizers
    import safetensors

    try:
        from transformers import GenerationConfig, Qwen3MoeForCausalLM  # noqa: F401
    except ImportError as e:
        die(f"transformers {transformers.__version__} has no Qwen3MoeForCausalLM: {e}")
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        die("CUDA is not available (use --device cpu only for a smoke test)")
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu"
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__,
                "numpy": np.__version__, "python": platform.python_version()}
    log(f"versions: {versions}; device {device_name}")
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if device == "cuda":
        torch.cuda.manual_seed_all(args.seed)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # ---- b. tokenizer
    t = time.time()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    tok, tok_chars = train_tokenizer(train_docs, args, mdir)
    vocab_size = tok.get_vocab_size()
    eos_id = tok.token_to_id(EOS_TOKEN)
    if vocab_size > args.vocab:
        die(f"tokenizer vocab {vocab_size} > {args.vocab}")
    def stream(docs_):
        enc = tok.encode_batch([d["text"] for d in docs_], add_special_tokens=False)
        parts = []
        for e in enc:
            parts.append(np.asarray(e.ids, dtype=np.int32))
            parts.append(np.asarray([eos_id], dtype=np.int32))
        return np.concatenate(parts)

    train_ids = stream(train_docs)
    held_ids = stream(held_docs)
    ntrain_bytes = sum(len(d["text"].encode()) for d in train_docs)
    log(f"b. tokenizer: vocab {vocab_size} (eos id {eos_id}) trained on {tok_chars / 1e6:.1f} M chars; "
        f"train {len(train_ids) / 1e6:.2f}M tokens ({ntrain_bytes / max(1, len(train_ids)):.2f} bytes/token), "
        f"held-out {len(held_ids) / 1e3:.0f}k tokens ({time.time() - t:.1f} s)")

    # ---- c. model, size check, training
    cfg = build_config(args, args.vocab, eos_id)
    model = Qwen3MoeForCausalLM(cfg)
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        model.tie_weights()
        log("   tied the embeddings by hand")
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        die("lm_head is not tied to the embeddings; the size budget assumes tied embeddings")
    fixed = check_init(model, cfg.initializer_range)
    if fixed:
        log(f"   re-initialised {len(fixed)} tensors that were zero/non-finite after init: {fixed[:6]}")
    n_params = count_params(model)
    tok_bytes = dir_bytes(mdir)
    est = 2 * n_params + tok_bytes + 64 * 1024
    per_expert = 3 * args.hidden * args.moe_inter
    emb = args.vocab * args.hidden
    active = n_params - args.layers * (args.experts - args.top_k) * per_expert
    log(f"c. model: {n_params:,} parameters ({active:,} active per token), expert {per_expert:,} params; "
        f"estimated folder {est / 1e6:.2f} MB (bf16 weights {2 * n_params / 1e6:.2f} MB + tokenizer "
        f"{tok_bytes / 1e6:.2f} MB + 64 KB) vs budget {args.size_budget_mb} MB; embeddings {emb:,}")
    if est > args.size_budget_mb * 1e6:
        die(f"model folder would be {est / 1e6:.2f} MB > {args.size_budget_mb} MB; shrink the model")
    model.to(device)
    t = time.time()
    res = train(args, model, train_ids, held_ids, device)
    hist = res["history"]
    last = hist[-5:] if len(hist) >= 5 else hist
    final_train_ce = float(sum(r["train_ce"] for r in last) / len(last))
    log(f"   trained {res['steps']} steps, {res['tokens_seen'] / 1e6:.1f}M tokens in {res['wall_s']:.1f} s; "
        f"final train ce {final_train_ce:.4f}, held-out ce {res['evals'][-1]['heldout_ce']:.4f}")
    with open(os.path.join(art, "loss_history.csv"), "w") as f:
        f.write("step,time_s,lr,train_ce,aux,tokens\n")
        for r in hist:
            f.write(f"{r['step']},{r['time_s']},{r['lr']:.6g},{r['train_ce']:.6f},{r['aux']:.6f},{r['tokens']}\n")
        for e in res["evals"]:
            f.write(f"# eval step {e['step']} time_s {e['time_s']} heldout_ce {e['heldout_ce']:.6f}\n")

    # ---- d. save in bf16
    model.eval()
    try:
        set_experts_impl(model, "eager")
    except Exception as e:
        log(f"   note: set_experts_implementation('eager') failed: {e}")
    model.config.output_router_logits = False
    model.config.use_cache = True
    # Buffers that are not saved (the RoPE inv_freq) are recomputed in fp32 by from_pretrained, but model.to(bf16)
    # rounds them and .float() cannot undo that; keep fp32 copies so the reload check compares like with like.
    saved_keys = set(model.state_dict().keys())
    unsaved_buffers = {n: b.detach().clone() for n, b in model.named_buffers()
                       if b.is_floating_point() and n not in saved_keys}
    model.to(torch.bfloat16)
    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=eos_id, pad_token_id=eos_id,
                                               do_sample=False)
    model.save_pretrained(mdir)
    cfg_path = os.path.join(mdir, "config.json")
    cj = json.load(open(cfg_path))
    changed = []
    if "head_dim" not in cj:
        cj["head_dim"] = args.head_dim
        changed.append("head_dim")
    if changed:
        with open(cfg_path, "w") as f:
            json.dump(cj, f, indent=2, sort_keys=False)
        log(f"   added {changed} to config.json")
    from safetensors import safe_open

    tensors = {}
    for fn in sorted(os.listdir(mdir)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(mdir, fn), "pt") as sf:
                for k in sf.keys():
                    sl = sf.get_slice(k)
                    tensors[k] = {"shape": list(sl.get_shape()), "dtype": str(sl.get_dtype()), "file": fn}
    with open(os.path.join(art, "tensors.json"), "w") as f:
        json.dump(tensors, f, indent=0)
    log(f"d. saved {mdir}: {sorted(os.listdir(mdir))}, {len(tensors)} tensors, e.g. "
        f"{[k for k in sorted(tensors) if 'layers.0.' in k][:8]}")
    log(f"   config.json: {json.dumps(cj, sort_keys=True)}")
    info = {"args": args, "manifest": manifest, "train": res, "n_params": n_params, "active_params": active,
            "vocab": vocab_size, "eos_id": eos_id, "device_name": device_name, "versions": versions,
            "final_train_ce": final_train_ce, "n_train_tokens": len(train_ids), "n_heldout_files": len(held_docs),
            "heldout_bytes": len(held_text.encode()), "folder_bytes": dir_bytes(mdir) + 6000}
    write_model_card(os.path.join(mdir, "README.md"), info)
    make_tar(os.path.join(out, "demo_model.tar"), mdir, args.model_name)
    log(f"   wrote {out}/demo_model.tar (first version, before evaluation)")

    # Reload check, like with like: the in-memory model holds the bf16-rounded weights that were saved; upcast it to
    # fp32, give it back the fp32 values of the unsaved buffers (loading recomputes them in fp32) and the eager
    # attention and experts that load_fp32 uses, then compare its weights and logits with the reloaded folder.
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    loaded = None
    try:
        ref = model.float().to(device).eval()
        buf_rel = 0.0
        with torch.no_grad():
            for n, v in unsaved_buffers.items():
                b = ref.get_buffer(n)
                v = v.to(device=b.device, dtype=torch.float32)
                buf_rel = max(buf_rel, ((b - v).abs() / v.abs().clamp_min(1e-30)).max().item())
                b.copy_(v)
        log(f"   reload check: restored {len(unsaved_buffers)} unsaved fp32 buffers "
            f"({sorted(unsaved_buffers)[:2]}...; the bf16 cast had changed them by up to {buf_rel:.1e} relative)")
        set_attn_eager(ref)
        set_experts_impl(ref, "eager")
        x = torch.tensor([held_ids[:256].tolist()], dtype=torch.long, device=device)
        with torch.no_grad():
            lr_ = ref(input_ids=x, use_cache=False).logits.float()
        ref_params = {n: p.detach() for n, p in ref.named_parameters()}
        loaded = load_fp32(mdir).to(device).eval()
        wdiff, n_same = 0.0, 0
        with torch.no_grad():
            for n, p in loaded.named_parameters():
                if n in ref_params and ref_params[n].shape == p.shape:
                    wdiff = max(wdiff, (ref_params[n] - p).abs().max().item())
                    n_same += 1
        del ref, ref_params, model
        log(f"   reload check: weights: {n_same} of {len(list(loaded.named_parameters()))} parameters matched by "
            f"name, max |diff| {wdiff:.2e} (0 expected: both are the saved bf16 values)")
        with torch.no_grad():
            ll = loaded(input_ids=x, use_cache=False).logits.float()
        d = (lr_ - ll).abs()
        diff = d.max().item()
        argmax_same = (lr_.argmax(-1) == ll.argmax(-1)).float().mean().item()
        log(f"   reload check: max |logit diff| in-memory (bf16 weights, fp32 compute) vs saved folder (fp32) = "
            f"{diff:.2e} (mean {d.mean().item():.2e}; argmax agrees at {100 * argmax_same:.1f}% of positions)")
        if diff > 1e-3 or wdiff > 0:
            raise RuntimeError(f"saved folder does not reproduce the trained model (max logit diff {diff}, "
                               f"max weight diff {wdiff})")
    except Exception as e:
        failures.append("reload")
        log("ERROR reload check: " + "".join(traceback.format_exception(e))[-2000:])
        if loaded is None:
            loaded = load_fp32(mdir).to(device).eval()

    # ---- e. perplexity (float32, saved folder) + expert use
    sys.path.insert(0, TOOLS_DIR)
    import record_route_trace as rrt

    held_file_ids = tok.encode(held_text, add_special_tokens=False).ids
    ppl, counts, conc, router_check = None, None, None, None
    try:
        rec = rrt.RouteRecorder(loaded).attach()
        ppl, counts = perplexity(loaded, held_file_ids, args.ctx, device, rec)
        rec.detach()
        router_check = {"mismatches": rec.mismatches, "tokens_compared": rec.compared}
        log(f"   router check (recomputed top-k vs the router's own indices): {router_check}")
        ppl.update({
            "file": "heldout.txt",
            "file_bytes": len(held_text.encode()),
            "file_sha256": hashlib.sha256(held_text.encode()).hexdigest(),
            "definition": (
                "tokens = tokenizer.json encoding of the file (bytes decoded as UTF-8; no BOS, no special tokens "
                "added). n_windows = floor(len(tokens)/ctx); window w = tokens[w*ctx:(w+1)*ctx]; the trailing "
                "tokens that do not fill a window are dropped. Each window is run on its own from position 0 (no "
                "cache shared between windows). Within a window the tokens at positions 1..ctx-1 are scored, "
                "nll_j = -log softmax(logits[j-1])[tokens[j]] (natural log); position 0 is only context. "
                "n_tokens_scored = n_windows*(ctx-1); mean_nll = sum(nll)/n_tokens_scored; ppl = exp(mean_nll); "
                "nll_stderr = std(all scored nll, ddof=1)/sqrt(n_tokens_scored); window_nll_stderr = "
                "std(per-window mean nll, ddof=1)/sqrt(n_windows)."),
            "dtype": "float32", "attention": "eager", "experts": "eager", "tf32": False, "device": device_name,
            "model": args.model_name, "versions": versions,
            "token_ids": held_file_ids,
        })
        with open(os.path.join(art, "ppl_reference.json"), "w") as f:
            json.dump(ppl, f, indent=1)
        log(f"e. held-out perplexity (fp32, ctx {args.ctx}): {ppl['ppl']:.4f}, mean nll {ppl['mean_nll']:.5f} +- "
            f"{ppl['nll_stderr']:.5f}, {ppl['n_windows']} windows, {ppl['n_tokens_scored']} tokens scored")
        info["ppl"] = ppl
    except Exception as e:
        failures.append("perplexity")
        log("ERROR perplexity: " + "".join(traceback.format_exception(e))[-3000:])

    # ---- f. greedy
    try:
        gr = greedy(loaded, tok, eos_id, device)
        with open(os.path.join(art, "greedy_reference.json"), "w") as f:
            json.dump({"max_new_tokens": 32, "do_sample": False, "dtype": "float32", "attention": "eager",
                       "experts": "eager", "tf32": False, "eos_token_id": eos_id, "model": args.model_name,
                       "note": "output_ids are the new tokens only; generation stops early only at eos; "
                               "steps[i].margin = top-1 minus top-2 logit at that step (small margins are where "
                               "another engine may legitimately diverge)",
                       "versions": versions, "prompts": gr}, f, indent=1)
        for g_ in gr:
            log(f"f. greedy {g_['prompt']!r} -> {g_['completion_text']!r} (min margin {g_['min_margin']}, "
                f"no-cache mismatches {g_['no_cache_argmax_mismatches']})")
        info["greedy"] = gr
    except Exception as e:
        failures.append("greedy")
        log("ERROR greedy: " + "".join(traceback.format_exception(e))[-3000:])

    # ---- g. plots and routing concentration
    try:
        plot_loss(res, os.path.join(art, "loss_curve.png"), os.path.join(art, "loss_curve.svg"))
        log("g. wrote loss_curve.png / .svg")
    except Exception as e:
        failures.append("loss plot")
        log("ERROR loss plot: " + "".join(traceback.format_exception(e))[-2000:])
    if counts is not None:
        try:
            conc = concentration(counts, args.top_k)
            conc["router_index_check"] = router_check
            with open(os.path.join(art, "routing_concentration.json"), "w") as f:
                json.dump(conc, f, indent=1)
            info["conc"] = conc
            log("   routing concentration (top-quarter share per layer): " +
                ", ".join(f"L{l['layer']}={l['top_quarter_share']:.3f}" for l in conc["layers"]))
            plot_experts(counts, os.path.join(art, "expert_use.png"))
            log("   wrote expert_use.png")
        except Exception as e:
            failures.append("routing report")
            log("ERROR routing report: " + "".join(traceback.format_exception(e))[-2000:])

    # ---- h. route trace of the held-out text
    if not args.no_trace:
        try:
            tpath = os.path.join(art, "route_trace_heldout.csv.gz")
            ppath = os.path.join(art, "route_prediction_heldout.csv.gz") if args.trace_predict else None
            meta = rrt.record_trace(loaded, held_file_ids, tpath, ctx=args.trace_ctx, device=device, extra_meta={
                "model_dir": args.model_name, "text_file": "heldout.txt",
                "text_sha256": hashlib.sha256(held_text.encode()).hexdigest(),
                "text_bytes": len(held_text.encode())}, predict_out=ppath)
            if ppath:
                nl = meta["next_layer_prediction"]
                log(f"   next-layer prediction: precision@k {nl['precision_at_k_mean']}, "
                    f"recall@2k {nl['recall_at_2k_mean']}")
            log(f"h. route trace: {meta['rows']} rows, router index mismatches {meta['router_index_mismatches']}/"
                f"{meta['router_tokens_compared']}")
        except Exception as e:
            failures.append("route trace")
            log("ERROR route trace: " + "".join(traceback.format_exception(e))[-2000:])

    # ---- final model card, tars
    try:
        from transformers import AutoTokenizer

        at = AutoTokenizer.from_pretrained(mdir)
        same = at(held_text, add_special_tokens=False)["input_ids"] == held_file_ids
        log(f"   AutoTokenizer loads the folder ({type(at).__name__}); same ids as tokenizers: {same}")
    except Exception as e:
        log(f"   note: AutoTokenizer could not load the folder: {type(e).__name__}: {str(e)[:300]}")
    info["folder_bytes"] = dir_bytes(mdir) - os.path.getsize(os.path.join(mdir, "README.md")) + 6000
    write_model_card(os.path.join(mdir, "README.md"), info)
    fb = dir_bytes(mdir)
    log(f"   model folder: {fb} bytes ({fb / 1e6:.2f} MB) : " +
        ", ".join(f"{f}={os.path.getsize(os.path.join(mdir, f))}" for f in sorted(os.listdir(mdir))))
    if fb > args.size_budget_mb * 1e6:
        failures.append("size")
        log(f"ERROR model folder {fb / 1e6:.2f} MB > {args.size_budget_mb} MB")
    make_tar(os.path.join(out, "demo_model.tar"), mdir, args.model_name)
    log(f"done in {time.time() - _T0:.0f} s; failures: {failures or 'none'}")
    logf.flush()
    shutil.copy(os.path.join(out, "demo_train_log.txt"), os.path.join(art, "demo_train_log.txt"))
    make_tar(os.path.join(out, "demo_artifacts.tar"), art, "artifacts")
    print(f"outputs: {sorted(os.listdir(out))}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
