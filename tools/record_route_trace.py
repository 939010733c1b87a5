#!/usr/bin/env python3
"""Record the routing of a Hugging Face MoE checkpoint (qwen3_moe and friends) on a text file.

Usage (GPU machine, or CPU for small files):
    python3 tools/record_route_trace.py --model DIR --text FILE --out trace.csv.gz [--ctx 512] [--device auto]

Traces are data, not source: keep them out of git.

Trace format (CSV; gzip-compressed when --out ends in .gz)
---------------------------------------------------------
Header line, then one row per (token, MoE layer), tokens in file order and, within a token, layers ascending:

    token_index,layer,expert_ids,weights,token_id
    0,0,17 3 29 8,0.412345 0.250000 0.201111 0.136544,1043

- token_index: 0-based position of the token in the whole tokenized file. The file is read as bytes, decoded as
  UTF-8 and tokenized with the folder's tokenizer.json (HF `tokenizers`), no special tokens added, no BOS.
- layer: 0-based decoder layer index. Only layers with a router appear (dense `mlp_only_layers` are skipped).
- expert_ids: the top-k experts chosen for the token, space separated, in descending router probability
  (torch.topk order; ties keep the lower index first as torch does on the device used).
- weights: the routing weights applied to those experts, same order, "%.6f", space separated: softmax over all
  experts in float32, top-k, then divided by their sum when the config sets norm_topk_prob (qwen3_moe does).
- token_id: the input token id at token_index (repeated on each layer's row, so a row stands alone).

Windowing: the token stream is cut into consecutive non-overlapping windows of --ctx tokens (the last one may be
shorter); each window is run independently from position 0, with no KV cache carried across windows. So the routing
of token i depends on tokens [ctx*floor(i/ctx) .. i] only.

A sidecar JSON "<out>.meta.json" (the out path with a trailing .gz and .csv removed, plus .meta.json) records the model
folder, the text file's sha256, ctx, number of tokens, top_k, number of experts, MoE layers, dtype, device and the
library versions, plus per-layer expert-use counts.

Next-layer prediction (--predict-out FILE): what a prefetcher could know one layer early. For every MoE layer l
whose previous layer l-1 exists, layer l's router is applied early to the residual stream that leaves layer l-1,
normalised by layer l's post_attention_layernorm (layer l's attention has not run yet: Pre-gated MoE, ProMoE and fMoE
predict this way). FILE is a CSV `token_index,layer,predicted_ids`, the 2k experts of highest early score in
descending order (k = num_experts_per_tok); the sidecar JSON gets, per layer, precision@k (the share of the k
predicted experts that the router then chose) and recall@2k (the share of the chosen k among the 2k predicted).

How routing is read: a forward pre-hook on each layer's router module (`layer.mlp.gate`, an nn.Linear in
transformers 4.x and a Qwen3MoeTopKRouter in 5.x, both with a `.weight` of shape [n_experts, hidden]) takes its input
hidden states and recomputes logits = F.linear(x, weight), softmax in float32, top-k and renormalisation exactly as
the model does. Where the router itself returns the chosen indices (transformers 5.x), a forward hook compares them
with the recomputed ones and the number of disagreements is reported (it should be 0).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import time


def log(msg: str) -> None:
    print(f"[route-trace] {msg}", flush=True)


def _need(mod: str):
    try:
        return __import__(mod)
    except Exception as e:  # pragma: no cover - depends on the machine
        sys.exit(f"record_route_trace: cannot import {mod!r} ({e}); it needs torch, transformers and tokenizers")


def find_routers(model):
    """Return [(layer_index, router_module)] for every decoder layer that has a router with a 2-D weight."""
    inner = getattr(model, "model", model)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise RuntimeError("model has no .model.layers; not a decoder-only HF model this script knows")
    found = []
    for i, layer in enumerate(layers):
        mlp = getattr(layer, "mlp", None)
        gate = getattr(mlp, "gate", None) if mlp is not None else None
        w = getattr(gate, "weight", None) if gate is not None else None
        if w is not None and w.dim() == 2:
            found.append((i, gate))
    return found


def compute_routing(x, weight, top_k: int, norm_topk_prob: bool):
    """Router math of qwen3_moe / mixtral / olmoe: returns (ids [N,k] int64, weights [N,k] float32)."""
    import torch
    import torch.nn.functional as F

    x = x.reshape(-1, weight.shape[1])
    logits = F.linear(x, weight)
    probs = F.softmax(logits, dim=-1, dtype=torch.float32)
    w, ids = torch.topk(probs, top_k, dim=-1)
    if norm_topk_prob:
        w = w / w.sum(dim=-1, keepdim=True)
    return ids, w


class RouteRecorder:
    """Hooks every router of a model; after each forward, .take() returns {layer: (ids, weights)} on the CPU."""

    def __init__(self, model, top_k: int | None = None, norm_topk_prob: bool | None = None):
        cfg = model.config
        self.top_k = int(top_k if top_k is not None else cfg.num_experts_per_tok)
        self.norm = bool(norm_topk_prob if norm_topk_prob is not None else getattr(cfg, "norm_topk_prob", False))
        self.routers = find_routers(model)
        if not self.routers:
            raise RuntimeError("no router modules found (layer.mlp.gate with a 2-D weight)")
        self.n_experts = int(self.routers[0][1].weight.shape[0])
        self.layers = [i for i, _ in self.routers]
        self._cur: dict[int, tuple] = {}
        self.mismatches = 0
        self.compared = 0
        self._handles = []

    def attach(self):
        for li, mod in self.routers:
            try:
                h = mod.register_forward_pre_hook(self._make_pre(li, mod), with_kwargs=True)
            except TypeError:  # torch < 2.0
                h = mod.register_forward_pre_hook(self._make_pre(li, mod))
            self._handles.append(h)
            self._handles.append(mod.register_forward_hook(self._make_post(li)))
        return self

    def detach(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _make_pre(self, li, mod):
        def pre(module, args, kwargs=None):
            import torch

            x = args[0] if args else next(iter((kwargs or {}).values()))
            with torch.no_grad():
                ids, w = compute_routing(x, mod.weight, self.top_k, self.norm)
            self._cur[li] = (ids, w)
            return None

        return pre

    def _make_post(self, li):
        def post(module, args, output):
            import torch

            if isinstance(output, (tuple, list)) and len(output) >= 3 and torch.is_tensor(output[2]):
                mine = self._cur.get(li)
                theirs = output[2]
                if mine is not None and theirs.shape == mine[0].shape:
                    with torch.no_grad():
                        a = torch.sort(mine[0], dim=-1).values
                        b = torch.sort(theirs.to(a.device).long(), dim=-1).values
                        self.mismatches += int((a != b).any(dim=-1).sum().item())
                        self.compared += int(a.shape[0])

        return post

    def take(self):
        out = {li: (ids.cpu(), w.float().cpu()) for li, (ids, w) in self._cur.items()}
        self._cur = {}
        return out


class NextLayerPredictor:
    """Hooks every decoder layer's output; after a forward, .take(B, L) applies each MoE layer's router early to the
    previous layer's output (normalised by the MoE layer's post_attention_layernorm) and returns
    {layer: ids [B, L, 2k]} on the CPU, for the MoE layers that have a previous layer."""

    def __init__(self, model, top_k: int):
        inner = getattr(model, "model", model)
        self.layers = inner.layers
        self.width = 2 * top_k
        self.routers = dict(find_routers(model))
        self._out: dict[int, object] = {}
        self._handles = []

    def attach(self):
        for i, layer in enumerate(self.layers):
            self._handles.append(layer.register_forward_hook(self._make_hook(i)))
        return self

    def detach(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _make_hook(self, i):
        def hook(module, args, output):
            self._out[i] = output[0] if isinstance(output, (tuple, list)) else output

        return hook

    def take(self):
        import torch
        import torch.nn.functional as F

        got = {}
        with torch.no_grad():
            for li, router in self.routers.items():
                if li == 0 or (li - 1) not in self._out:
                    continue
                h = self._out[li - 1]
                xn = self.layers[li].post_attention_layernorm(h)
                x = xn.reshape(-1, router.weight.shape[1])
                probs = F.softmax(F.linear(x, router.weight), dim=-1, dtype=torch.float32)
                ids = torch.topk(probs, self.width, dim=-1).indices
                got[li] = ids.view(*h.shape[:-1], self.width).cpu()
        self._out = {}
        return got


def load_model(model_dir: str, dtype_name: str = "float32", device: str = "auto"):
    torch = _need("torch")
    transformers = _need("transformers")
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype_name]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kwargs = dict(attn_implementation="eager")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=dtype, experts_implementation="eager", **kwargs
        )
    except Exception as e:
        log(f"from_pretrained with experts_implementation failed ({type(e).__name__}: {e}); retrying without it")
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **kwargs)
    if hasattr(model, "set_experts_implementation"):
        try:
            model.set_experts_implementation("eager")
        except Exception as e:  # pragma: no cover
            log(f"note: set_experts_implementation('eager') failed: {e}")
    model.to(device).eval()
    return model, device


def tokenize_file(model_dir: str, text_path: str):
    tokenizers = _need("tokenizers")
    tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    raw = open(text_path, "rb").read()
    text = raw.decode("utf-8")
    ids = tok.encode(text, add_special_tokens=False).ids
    return ids, hashlib.sha256(raw).hexdigest(), len(raw)


def _open_out(path: str):
    if path.endswith(".gz"):
        # mtime=0 keeps the gzip bytes reproducible
        return io.TextIOWrapper(gzip.GzipFile(path, "wb", mtime=0), encoding="utf-8", newline="\n")
    return open(path, "w", encoding="utf-8", newline="\n")


def meta_path_for(out_path: str) -> str:
    p = out_path
    for suf in (".gz", ".csv"):
        if p.endswith(suf):
            p = p[: -len(suf)]
    return p + ".meta.json"


def record_trace(model, ids, out_path: str, ctx: int = 512, device: str | None = None, batch_windows: int = 16,
                 extra_meta: dict | None = None, predict_out: str | None = None):
    """Run the model over ids in windows of ctx and write the CSV trace (and, with predict_out, the next-layer
    predictions). Returns the meta dict."""
    import contextlib

    import torch

    if device is None:
        device = next(model.parameters()).device
    rec = RouteRecorder(model).attach()
    pred = NextLayerPredictor(model, rec.top_k).attach() if predict_out else None
    hit_k: dict[int, int] = {}
    hit_2k: dict[int, int] = {}
    n_pred: dict[int, int] = {}
    counts = {li: [0] * rec.n_experts for li in rec.layers}
    n = len(ids)
    starts = list(range(0, n, ctx))
    t0 = time.time()
    rows = 0
    try:
        with _open_out(out_path) as f, (_open_out(predict_out) if predict_out else contextlib.nullcontext()) as pf, \
                torch.no_grad():
            f.write("token_index,layer,expert_ids,weights,token_id\n")
            if pf is not None:
                pf.write("token_index,layer,predicted_ids\n")
            i = 0
            while i < len(starts):
                # batch windows of equal length together (all full windows; the short last one alone)
                group = [starts[i]]
                L = min(ctx, n - starts[i])
                while (len(group) < batch_windows and i + len(group) < len(starts)
                       and min(ctx, n - starts[i + len(group)]) == L):
                    group.append(starts[i + len(group)])
                x = torch.tensor([ids[s:s + L] for s in group], dtype=torch.long, device=device)
                model(input_ids=x, use_cache=False)
                got = rec.take()
                early = pred.take() if pred is not None else {}
                B = len(group)
                per_layer = {}
                for li in rec.layers:
                    e, w = got[li]
                    per_layer[li] = (e.view(B, L, -1).tolist(), w.view(B, L, -1).tolist())
                buf = []
                for b, s in enumerate(group):
                    for t in range(L):
                        tid = ids[s + t]
                        for li in rec.layers:
                            e = per_layer[li][0][b][t]
                            w = per_layer[li][1][b][t]
                            for ex in e:
                                counts[li][ex] += 1
                            buf.append(f"{s + t},{li},{' '.join(map(str, e))},{' '.join('%.6f' % v for v in w)},{tid}\n")
                rows += len(buf)
                f.write("".join(buf))
                pbuf = []
                for li, p in early.items():
                    p = p.tolist()
                    for b, s in enumerate(group):
                        for t in range(L):
                            chosen = set(per_layer[li][0][b][t])
                            guess = p[b][t]
                            hit_k[li] = hit_k.get(li, 0) + len(chosen.intersection(guess[: rec.top_k]))
                            hit_2k[li] = hit_2k.get(li, 0) + len(chosen.intersection(guess))
                            n_pred[li] = n_pred.get(li, 0) + rec.top_k
                            pbuf.append(f"{s + t},{li},{' '.join(map(str, guess))}\n")
                if pf is not None:
                    pf.write("".join(pbuf))
                i += B
    finally:
        rec.detach()
        if pred is not None:
            pred.detach()
    try:
        import transformers

        tf_version = transformers.__version__
    except Exception:
        tf_version = None
    meta = {
        "format": "csv: token_index,layer,expert_ids(space separated),weights(space separated),token_id",
        "windowing": f"consecutive non-overlapping windows of {ctx} tokens (last may be shorter), each run from "
                     "position 0 with no cache across windows",
        "ctx": ctx,
        "n_tokens": n,
        "rows": rows,
        "top_k": rec.top_k,
        "n_experts": rec.n_experts,
        "norm_topk_prob": rec.norm,
        "moe_layers": rec.layers,
        "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "device": str(device),
        "router_index_mismatches": rec.mismatches,
        "router_tokens_compared": rec.compared,
        "expert_use_counts": {str(k): v for k, v in counts.items()},
        "torch_version": torch.__version__,
        "transformers_version": tf_version,
        "seconds": round(time.time() - t0, 2),
    }
    if predict_out:
        meta["next_layer_prediction"] = {
            "file": os.path.basename(predict_out),
            "rule": "layer l's router on layer l's post_attention_layernorm of the residual stream leaving layer l-1",
            "precision_at_k": {str(li): round(hit_k[li] / n_pred[li], 4) for li in sorted(n_pred)},
            "recall_at_2k": {str(li): round(hit_2k[li] / n_pred[li], 4) for li in sorted(n_pred)},
            "precision_at_k_mean": round(sum(hit_k.values()) / max(1, sum(n_pred.values())), 4),
            "recall_at_2k_mean": round(sum(hit_2k.values()) / max(1, sum(n_pred.values())), 4),
        }
    if extra_meta:
        meta.update(extra_meta)
    with open(meta_path_for(out_path), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="HF model folder (config.json, *.safetensors, tokenizer.json)")
    ap.add_argument("--text", required=True, help="UTF-8 text file to run")
    ap.add_argument("--out", required=True, help="output CSV path (.csv or .csv.gz)")
    ap.add_argument("--ctx", type=int, default=512, help="window length in tokens (default 512)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--device", default="auto", help="auto, cuda, cpu")
    ap.add_argument("--max-tokens", type=int, default=0, help="only the first N tokens (0 = all)")
    ap.add_argument("--predict-out", default="", help="also write next-layer predictions here (.csv or .csv.gz)")
    a = ap.parse_args(argv)
    for p in (os.path.join(a.model, "config.json"), os.path.join(a.model, "tokenizer.json"), a.text):
        if not os.path.exists(p):
            sys.exit(f"record_route_trace: missing {p}")
    ids, sha, nbytes = tokenize_file(a.model, a.text)
    if a.max_tokens > 0:
        ids = ids[: a.max_tokens]
    log(f"{a.text}: {nbytes} bytes, {len(ids)} tokens")
    model, device = load_model(a.model, a.dtype, a.device)
    meta = record_trace(model, ids, a.out, ctx=a.ctx, device=device, extra_meta={
        "model_dir": os.path.abspath(a.model), "text_file": os.path.abspath(a.text), "text_sha256": sha,
        "text_bytes": nbytes}, predict_out=a.predict_out or None)
    log(f"wrote {a.out}: {meta['rows']} rows, router mismatches {meta['router_index_mismatches']}/"
        f"{meta['router_tokens_compared']}, {meta['seconds']} s")


if __name__ == "__main__":
    main()
