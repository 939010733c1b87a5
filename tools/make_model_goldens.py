#!/usr/bin/env python3
"""Golden data for the engine: tiny random checkpoints of each family and transformers' float32 logits.

Runs on the GPU machine (torch + transformers 5.x; no network). For every tiny config below it
  1. builds the model with transformers, sets EVERY parameter to a fresh random value (norm weights around 1,
     matrices ~ N(0, 1/fan_in), embeddings ~ N(0, 1)) so nothing sits at its initial value,
  2. casts to bf16 and saves with save_pretrained (whatever layout this transformers version writes),
  3. reloads that folder in float32 (eager attention) and records the logits of every position of a fixed token
     sequence, and a greedy continuation of 12 tokens from `generate`,
  4. writes a second copy in the layout of Hub checkpoints (one tensor per expert and projection, Mixtral's
     `block_sparse_moe.experts.N.w1/w2/w3` names), sharded with model.safetensors.index.json, reloads THAT in
     transformers and checks it gives identical logits, so both layouts are tested against one reference.

Usage: python3 tools/make_model_goldens.py OUT_DIR      (writes OUT_DIR/models.tar.gz)
Outputs per model NAME (under models/NAME/): hf/ (save_pretrained folder), hub/ (Hub-layout sharded folder),
logits.f32 (little-endian float32, row-major [len(ids) x vocab]), reference.json (ids, greedy continuation,
shapes, versions, tensor names as saved).
"""
import json
import math
import os
import re
import sys
import tarfile

import torch
import transformers
from safetensors.torch import load_file, save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else "out"

COMMON = dict(vocab_size=256, max_position_embeddings=512, rms_norm_eps=1e-6, hidden_act="silu",
              attention_dropout=0.0, bos_token_id=1, eos_token_id=2, pad_token_id=0)

MODELS = {
    # GQA, head_dim independent of hidden/heads, a dense layer via mlp_only_layers, norm_topk_prob true, untied.
    "qwen3_moe_a": ("qwen3_moe", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=32, intermediate_size=96,
                                      moe_intermediate_size=40, num_experts=8, num_experts_per_tok=2,
                                      norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
                                      tie_word_embeddings=False, rope_theta=10000.0)),
    # MHA, norm_topk_prob false, decoder_sparse_step 2 (layers 1 and 3 sparse), tied embeddings, top-3 of 6.
    "qwen3_moe_b": ("qwen3_moe", dict(hidden_size=48, num_hidden_layers=4, num_attention_heads=4,
                                      num_key_value_heads=4, head_dim=16, intermediate_size=80,
                                      moe_intermediate_size=28, num_experts=6, num_experts_per_tok=3,
                                      norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[],
                                      tie_word_embeddings=True, rope_theta=1000000.0)),
    # MQA (one KV head), top-2 of 4.
    "mixtral_a": ("mixtral", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=1, intermediate_size=40, num_local_experts=4,
                                  num_experts_per_tok=2, tie_word_embeddings=False, rope_theta=1000000.0,
                                  sliding_window=None)),
    # GQA with a sliding window shorter than the sequence.
    "mixtral_b": ("mixtral", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, intermediate_size=24, num_local_experts=3,
                                  num_experts_per_tok=2, tie_word_embeddings=False, rope_theta=10000.0,
                                  sliding_window=6)),
}

N_IDS = 24
N_NEW = 12


def make_config(family, kw):
    """A config for this transformers version; rope_theta is set in whichever dialect it uses."""
    kw = dict(kw)
    theta = kw.pop("rope_theta")
    cfg = transformers.AutoConfig.for_model(family, **COMMON, **kw)
    if hasattr(cfg, "rope_parameters"):
        params = dict(cfg.rope_parameters or {})
        params.update({"rope_type": "default", "rope_theta": theta})
        cfg.rope_parameters = params
    cfg.rope_theta = theta
    return cfg


def perturb(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name or "lm_head" in name:
                # Tied embeddings stay small so the layers, not the input token's own row, decide the logits.
                scale = 0.05 if model.config.tie_word_embeddings else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))


def hub_layout(sd, family, cfg):
    """Rename/split whatever save_pretrained wrote into the layout published Hub checkpoints use."""
    H, out = cfg.hidden_size, {}
    I = cfg.moe_intermediate_size if family == "qwen3_moe" else cfg.intermediate_size
    moe = "mlp" if family == "qwen3_moe" else "block_sparse_moe"
    names = ("gate_proj", "up_proj", "down_proj") if family == "qwen3_moe" else ("w1", "w3", "w2")
    for k, v in sd.items():
        m = re.match(r"(model\.layers\.\d+)\.(?:mlp|block_sparse_moe)\.(.*)$", k)
        if not m:
            out[k] = v
            continue
        prefix, rest = m.groups()
        fused = re.match(r"experts\.(gate_up_proj|down_proj)(?:\.weight)?$", rest)
        if fused:
            which = fused.group(1)
            for e in range(v.shape[0]):
                w = v[e]
                if which == "gate_up_proj":
                    if w.shape == (H, 2 * I):
                        w = w.t()
                    assert w.shape == (2 * I, H), (k, tuple(v.shape))
                    out[f"{prefix}.{moe}.experts.{e}.{names[0]}.weight"] = w[:I].contiguous()
                    out[f"{prefix}.{moe}.experts.{e}.{names[1]}.weight"] = w[I:].contiguous()
                else:
                    if w.shape == (I, H):
                        w = w.t()
                    assert w.shape == (H, I), (k, tuple(v.shape))
                    out[f"{prefix}.{moe}.experts.{e}.{names[2]}.weight"] = w.contiguous()
            continue
        per = re.match(r"experts\.(\d+)\.(\w+)\.weight$", rest)
        if per and family == "qwen3_moe" and moe == "mlp":
            out[f"{prefix}.mlp.{rest}"] = v
        elif per:
            e, proj = per.groups()
            proj = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}.get(proj, proj)
            out[f"{prefix}.{moe}.experts.{e}.{proj}.weight"] = v
        elif rest == "gate.weight":
            out[f"{prefix}.{moe}.gate.weight"] = v
        else:  # dense MLP of qwen3_moe mlp_only layers
            out[k] = v
    return out


def save_sharded(tensors, folder, n_shards=3):
    os.makedirs(folder, exist_ok=True)
    names = sorted(tensors)
    weight_map = {}
    for s in range(n_shards):
        part = names[s::n_shards]
        fname = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file({n: tensors[n].contiguous() for n in part}, os.path.join(folder, fname), metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def run_reference(folder, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                              attn_implementation="eager").cuda().eval()
    x = torch.tensor([ids], device="cuda")
    with torch.no_grad():
        logits = model(x).logits[0].float().cpu()
        gen = model.generate(x, max_new_tokens=N_NEW, do_sample=False, min_new_tokens=N_NEW,
                             eos_token_id=None, pad_token_id=0)
    return logits, gen[0, len(ids):].tolist()


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    root = os.path.join(OUT, "models")
    os.makedirs(root, exist_ok=True)
    for idx, (name, (family, kw)) in enumerate(MODELS.items()):
        gen = torch.Generator().manual_seed(1000 + idx)
        cfg_cls = make_config(family, kw)
        model = transformers.AutoModelForCausalLM.from_config(cfg_cls, dtype=torch.float32)
        perturb(model, gen)
        model = model.to(torch.bfloat16)
        d = os.path.join(root, name)
        model.save_pretrained(os.path.join(d, "hf"))
        ids = torch.randint(3, COMMON["vocab_size"], (N_IDS,), generator=gen).tolist()
        logits, greedy = run_reference(os.path.join(d, "hf"), ids)
        # The Hub layout, sharded, must read back to the same numbers in transformers.
        saved = {}
        for f in sorted(os.listdir(os.path.join(d, "hf"))):
            if f.endswith(".safetensors"):
                saved.update(load_file(os.path.join(d, "hf", f)))
        hub = hub_layout(saved, family, cfg_cls)
        save_sharded(hub, os.path.join(d, "hub"))
        for f in ("config.json", "generation_config.json"):
            src = os.path.join(d, "hf", f)
            if os.path.exists(src):
                with open(src) as a, open(os.path.join(d, "hub", f), "w") as b:
                    b.write(a.read())
        logits_hub, greedy_hub = run_reference(os.path.join(d, "hub"), ids)
        same = torch.equal(logits, logits_hub) and greedy == greedy_hub
        logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
        ref = {"name": name, "family": family, "ids": ids, "greedy": greedy, "vocab_size": COMMON["vocab_size"],
               "n_ids": len(ids), "transformers": transformers.__version__, "torch": torch.__version__,
               "hub_layout_matches_saved": same, "max_abs_hub_diff": float((logits - logits_hub).abs().max()),
               "saved_tensor_names": sorted(saved)[:40], "hub_tensor_names": sorted(hub)[:40],
               "logits_abs_max": float(logits.abs().max())}
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
        print(name, "greedy", greedy, "hub same:", same, "max|logit|", ref["logits_abs_max"], flush=True)
    with tarfile.open(os.path.join(OUT, "models.tar.gz"), "w:gz") as t:
        t.add(root, arcname="models")


if __name__ == "__main__":
    main()
