#!/usr/bin/env python3
"""Golden data for the engine: tiny random checkpoints of each family and transformers' logits.

Runs on the GPU machine (torch + transformers 5.x; no network). For every tiny config below it
  1. builds the model with transformers, sets EVERY parameter to a fresh random value (norm weights around 1,
     matrices ~ N(0, 1/fan_in), embeddings ~ N(0, 1)) so nothing sits at its initial value,
  2. casts to bf16 and saves with save_pretrained (whatever layout this transformers version writes),
  3. reloads that folder in float64 (eager attention) and records the logits of every position of a fixed token
     sequence, and a greedy continuation of 12 tokens from `generate`,
  4. writes a second copy in the layout of Hub checkpoints (one tensor per expert and projection, Mixtral's
     `block_sparse_moe.experts.N.w1/w2/w3` names), sharded with model.safetensors.index.json, reloads THAT in
     transformers and checks it gives identical logits, so both layouts are tested against one reference.

Since 2026-12-01 the reference is float64 (the saved folder loaded fresh with dtype=torch.float64, eager attention
and eager experts); the four first checkpoints (qwen3_moe_*, mixtral_*) were made in float32 before that and are
not regenerated unless named. gpt_oss_mxfp4 is gpt_oss_a's model with its experts quantized to MXFP4 as released
(`*_blocks` + `*_scales`, quantization_config mxfp4); its reference is the same model with those experts
dequantized exactly into bf16.

Usage: python3 tools/make_model_goldens.py OUT_DIR [NAME ...]   (writes OUT_DIR/models.tar.gz; default: every model)
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
    # Whole-projection q/k RMSNorm, GQA, clip_qkv, softmax top-2 of 8 not renormalised, every layer MoE.
    "olmoe_a": ("olmoe", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=False,
                              clip_qkv=2.5, tie_word_embeddings=False, rope_theta=10000.0)),
    # q/k/v biases, a shared expert behind its sigmoid gate, a dense layer (mlp_only_layers), top-2 of 8.
    "qwen2_moe_a": ("qwen2_moe", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=96, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=48, num_experts=8, num_experts_per_tok=2,
                                      norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[2],
                                      qkv_bias=True, use_sliding_window=False, tie_word_embeddings=False,
                                      rope_theta=1000000.0)),
    # Partial rotary (half of head_dim), q/k/v biases, a dense first layer, sigmoid routing over 2 groups (top 1
    # group) with a non-zero correction bias, renormalised and scaled, one shared expert.
    "glm4_moe_a": ("glm4_moe", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=32, partial_rotary_factor=0.5,
                                    intermediate_size=96, moe_intermediate_size=32, n_routed_experts=8,
                                    num_experts_per_tok=3, n_group=2, topk_group=1, n_shared_experts=1,
                                    first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
                                    attention_bias=True, use_qk_norm=False, tie_word_embeddings=False,
                                    rope_theta=10000.0)),
    # Attention sinks, a sliding window on every other layer, YaRN, q/k/v/o biases, top-4 of 8 with the softmax
    # over the top-k logits, biased experts with the clamped SwiGLU (weights scaled up so the clamp is reached).
    "gpt_oss_a": ("gpt_oss", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  head_dim=16, intermediate_size=96, num_local_experts=8, num_experts_per_tok=4,
                                  sliding_window=6, layer_types=["sliding_attention", "full_attention"],
                                  attention_bias=True, swiglu_limit=7.0, tie_word_embeddings=False,
                                  rope_theta=150000.0,
                                  rope_yarn=dict(factor=8.0, beta_fast=32.0, beta_slow=1.0,
                                                 original_max_position_embeddings=64, truncate=False))),
}
# gpt_oss_a's model (same seed) with its experts rounded to MXFP4: hf/ holds them dequantized in bf16 (exact),
# hub/ as released (blocks + e8m0 scales, quantization_config mxfp4).
MXFP4_OF = {"gpt_oss_mxfp4": "gpt_oss_a"}
FIRST_FLOAT32 = ("qwen3_moe_a", "qwen3_moe_b", "mixtral_a", "mixtral_b")
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]

N_IDS = 24
N_NEW = 12


def make_config(family, kw):
    """A config for this transformers version; rope_theta is set in whichever dialect it uses."""
    kw = dict(kw)
    theta = kw.pop("rope_theta")
    yarn = kw.pop("rope_yarn", None)
    partial = kw.get("partial_rotary_factor")
    cfg = transformers.AutoConfig.for_model(family, **COMMON, **kw)
    rope = {"rope_type": "default", "rope_theta": theta}
    if yarn is not None:
        rope = {"rope_type": "yarn", "rope_theta": theta, **yarn}
    if partial is not None:
        rope["partial_rotary_factor"] = partial
    if hasattr(cfg, "rope_parameters"):
        params = dict(cfg.rope_parameters or {})
        params.update(rope)
        cfg.rope_parameters = params
    elif yarn is not None:
        cfg.rope_scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
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
            elif name.endswith("sinks"):
                p.copy_(torch.randn(p.shape, generator=gen))  # per-head logits of the size of the scores
            elif name.endswith("_bias") and p.dim() == 2:  # gpt_oss expert biases (experts, width)
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
                if name.endswith("experts.gate_up_proj"):
                    p.mul_(3.0)  # gpt_oss: reach the SwiGLU clamp (|gate|, |up| > limit) on some rows
        # Persistent buffers are checkpoint tensors too (glm4_moe's e_score_correction_bias).
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.2 * torch.randn(b.shape, generator=gen))


def hub_layout(sd, family, cfg):
    """Rename/split whatever save_pretrained wrote into the layout published Hub checkpoints use."""
    if family not in ("qwen3_moe", "mixtral"):
        return dict(sd)  # this transformers version already saves these families in their Hub layout
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


def mxfp4_round(w):
    """w (..., n) float -> (blocks uint8 (..., n/32, 16), scales uint8 (..., n/32), dequantized float), as gpt-oss
    releases: 32 values a block, e8m0 scale 2^(s - 127), FP4 e2m1 codes, element 2i in the low nibble."""
    lut = torch.tensor(FP4_VALUES, dtype=torch.float64)
    x = w.double().reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = x.abs().amax(-1, keepdim=True).clamp(min=1e-30)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = x / torch.pow(2.0, e)
    codes = (scaled.abs().unsqueeze(-1) - lut[:8]).abs().argmin(-1)  # magnitude code 0..7
    codes = codes + 8 * (scaled < 0).long() * (codes > 0).long()
    deq = lut[codes] * torch.pow(2.0, e)
    # e2m1 steps are at most 2 (between 4 and 6), so rounding moves no value by more than one scale unit.
    assert ((deq - x).abs() <= torch.pow(2.0, e)).all() and (codes >= 8).any(), "MXFP4 rounding is off"
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    scales = (e.squeeze(-1) + 127).to(torch.uint8)
    return blocks, scales, deq.reshape(w.shape)


def mxfp4_experts(model):
    """Rounds every expert projection of a gpt_oss model to MXFP4 in place; returns {name: (blocks, scales)} in the
    released orientation (experts, out_features, in_features / 32, 16)."""
    packed = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not (name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj")):
                continue
            E, a, b = p.shape
            # transformers keeps (experts, in, out); the release stores (experts, out, in) blocks along in.
            out_in = p.transpose(1, 2) if (name.endswith("gate_up_proj") and b == 2 * model.config.intermediate_size) \
                or (name.endswith("down_proj") and b == model.config.hidden_size) else p
            blocks, scales, deq = mxfp4_round(out_in.float())
            p.copy_((deq.transpose(1, 2) if out_in is not p else deq).to(p.dtype))
            packed[name] = (blocks, scales)
    return packed


def run_reference(folder, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                              attn_implementation="eager").cuda().eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
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
    wanted = sys.argv[2:] or [n for n in list(MODELS) + list(MXFP4_OF) if n not in FIRST_FLOAT32]
    names = list(MODELS) + list(MXFP4_OF)
    for name in wanted:
        if name not in names:
            sys.exit(f"unknown model {name} (known: {', '.join(names)})")
    for name in wanted:
        base = MXFP4_OF.get(name, name)
        idx = list(MODELS).index(base)
        family, kw = MODELS[base]
        gen = torch.Generator().manual_seed(1000 + idx)
        cfg_cls = make_config(family, kw)
        model = transformers.AutoModelForCausalLM.from_config(cfg_cls, dtype=torch.float32)
        perturb(model, gen)
        model = model.to(torch.bfloat16)
        packed = mxfp4_experts(model) if name in MXFP4_OF else None
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
        if packed is not None:
            for pname, (blocks, scales) in packed.items():
                keys = [k for k in hub if k == pname or k == pname + ".weight"]
                if len(keys) != 1:
                    sys.exit(f"{name}: saved tensor of {pname} not found among {sorted(hub)[:60]}")
                key = keys[0].removesuffix(".weight")
                del hub[keys[0]]
                hub[key + "_blocks"] = blocks.contiguous()
                hub[key + "_scales"] = scales.contiguous()
        save_sharded(hub, os.path.join(d, "hub"))
        for f in ("config.json", "generation_config.json"):
            src = os.path.join(d, "hf", f)
            if os.path.exists(src):
                with open(src) as a, open(os.path.join(d, "hub", f), "w") as b:
                    b.write(a.read())
        mxfp4_check = None
        if packed is not None:
            with open(os.path.join(d, "hub", "config.json")) as f:
                c = json.load(f)
            c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
                "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
            with open(os.path.join(d, "hub", "config.json"), "w") as f:
                json.dump(c, f, indent=2)
            try:  # transformers' own MXFP4 reader, dequantizing, as a check of this script's packing
                q = transformers.AutoModelForCausalLM.from_pretrained(
                    os.path.join(d, "hub"), dtype=torch.bfloat16,
                    quantization_config=transformers.Mxfp4Config(dequantize=True))
                ref_sd = {k: v for k, v in model.state_dict().items()}
                worst = max(float((q.state_dict()[k].float().cpu() - v.float().cpu()).abs().max())
                            for k, v in ref_sd.items() if k in q.state_dict())
                mxfp4_check = {"transformers_dequantized_max_abs_diff": worst}
            except Exception as e:  # noqa: BLE001 - recorded, not hidden
                mxfp4_check = {"transformers_mxfp4_load_failed": repr(e)[:400]}
            logits_hub, greedy_hub = logits, greedy
        else:
            logits_hub, greedy_hub = run_reference(os.path.join(d, "hub"), ids)
        same = torch.equal(logits, logits_hub) and greedy == greedy_hub
        logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
        ref = {"name": name, "family": family, "ids": ids, "greedy": greedy, "vocab_size": COMMON["vocab_size"],
               "n_ids": len(ids), "transformers": transformers.__version__, "torch": torch.__version__,
               "hub_layout_matches_saved": same, "max_abs_hub_diff": float((logits - logits_hub).abs().max()),
               "saved_tensor_names": sorted(saved)[:40], "hub_tensor_names": sorted(hub)[:40],
               "logits_abs_max": float(logits.abs().max()), "reference_dtype": "float64",
               "saved_tensor_shapes": {k: list(v.shape) for k, v in sorted(saved.items()) if ".layers.0." in k},
               "hub_tensor_shapes": {k: [str(v.dtype)] + list(v.shape) for k, v in sorted(hub.items())
                                     if ".layers.0." in k}}
        if mxfp4_check is not None:
            ref["mxfp4_check"] = mxfp4_check
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
        print(name, "greedy", greedy, "hub same:", same, "max|logit|", ref["logits_abs_max"], flush=True)
    with tarfile.open(os.path.join(OUT, "models.tar.gz"), "w:gz") as t:
        t.add(root, arcname="models")


if __name__ == "__main__":
    main()
