#!/usr/bin/env python3
"""Golden data for the hybrid (Gated DeltaNet) and latent-attention (MLA) families: tiny random checkpoints and
transformers' float64 logits, as tools/make_model_goldens.py makes them for the Llama-MoE families (its perturbation,
sharding and reference run are reused; read its docstring first).

Runs on the GPU machine (torch + transformers 5.x, no network; no fla / causal_conv1d, so transformers runs its own
torch chunked and recurrent gated-delta-rule code, which is the reference). Models:
  qwen3_next_a     4 layers (3 Gated DeltaNet, 1 gated full attention), a dense layer, shared expert; 320 positions
                   so the chunked form (chunks of 64) crosses five chunk boundaries.
  qwen3_5_moe_a    the released multimodal layout: Qwen3_5MoeForConditionalGeneration with a tiny vision tower,
                   tensors under model.language_model.*; the text model's logits from input ids alone. transformers
                   5.17 saves its experts one tensor per expert and projection; the committed hub/ copy holds them
                   fused instead (experts.gate_up_proj (E, 2I, H) = gate rows then up rows, experts.down_proj
                   (E, H, I)), made from hf/ by byte concatenation (tests/data/models/README.md).
  deepseek_v3_a    MLA with q_lora_rank, YaRN with mscale != mscale_all_dim, a dense first layer, sigmoid routing
                   in 4 groups (top 2 groups) with a non-zero correction bias, one shared expert.
  deepseek_v3_b    MLA without q_lora_rank (q_proj), default RoPE, no groups, every layer MoE.
  deepseek_v3_fp8  deepseek_v3_a's weights rounded to FP8 e4m3 with one float32 scale per 32 x 32 block (scales
                   are powers of two so that the dequantized weights are exact in bf16): hf/ holds them dequantized
                   (the reference), hub/ as DeepSeek releases them (F8_E4M3 `weight` + F32 `weight_scale_inv`,
                   quantization_config fp8 with weight_block_size), including partial edge blocks.

Usage: python3 tools/make_hybrid_mla_goldens.py OUT_DIR [NAME ...]   (writes OUT_DIR/models.tar.gz)
Per model, models/NAME/: hf/, hub/, logits.f32 ([n_ids x vocab] float32 LE), reference.json.
"""
import json
import math
import os
import sys
import tarfile

import torch
import transformers
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_goldens as base  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "out"
V = base.COMMON["vocab_size"]

LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=4)
MODELS = {
    "qwen3_next_a": ("qwen3_next", 320, dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                                            num_key_value_heads=2, head_dim=32, partial_rotary_factor=0.25,
                                            intermediate_size=96, moe_intermediate_size=32,
                                            shared_expert_intermediate_size=48, num_experts=8, num_experts_per_tok=2,
                                            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
                                            layer_types=["linear_attention", "linear_attention",
                                                         "linear_attention", "full_attention"],
                                            tie_word_embeddings=False, rope_theta=10000.0, **LINEAR)),
    "qwen3_5_moe_a": ("qwen3_5_moe", 80, dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                                             num_key_value_heads=2, head_dim=32, moe_intermediate_size=32,
                                             shared_expert_intermediate_size=48, num_experts=8, num_experts_per_tok=2,
                                             layer_types=["linear_attention", "full_attention",
                                                          "linear_attention", "full_attention"],
                                             tie_word_embeddings=False, rope_theta=10000000.0, **LINEAR)),
    "deepseek_v3_a": ("deepseek_v3", 24, dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                             num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=32,
                                             qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                                             intermediate_size=96, moe_intermediate_size=32, n_routed_experts=8,
                                             num_experts_per_tok=3, n_group=4, topk_group=2, n_shared_experts=1,
                                             first_k_dense_replace=1, norm_topk_prob=True, routed_scaling_factor=2.5,
                                             rope_interleave=True, tie_word_embeddings=False, rope_theta=10000.0,
                                             rope_yarn=dict(factor=4.0, beta_fast=32.0, beta_slow=1.0, mscale=1.0,
                                                            mscale_all_dim=0.8,
                                                            original_max_position_embeddings=16))),
    "deepseek_v3_b": ("deepseek_v3", 24, dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=2,
                                             num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=24,
                                             qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=12,
                                             intermediate_size=64, moe_intermediate_size=24, n_routed_experts=6,
                                             num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=2,
                                             first_k_dense_replace=0, norm_topk_prob=False,
                                             routed_scaling_factor=1.0, rope_interleave=True,
                                             tie_word_embeddings=False, rope_theta=10000.0)),
}
FP8_OF = {"deepseek_v3_fp8": "deepseek_v3_a"}
FP8_BLOCK = 32
ZERO_CENTRED_NORMS = ("Qwen3NextRMSNorm", "Qwen3_5MoeRMSNorm")


def make_config(family, kw):
    if family != "qwen3_5_moe":
        return base.make_config(family, kw)
    kw = dict(kw)
    theta = kw.pop("rope_theta")
    text = dict(base.COMMON, **kw)
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": 0.25,
                               "mrope_interleaved": True, "mrope_section": [2, 1, 1]}
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=4, temporal_patch_size=2,
                  spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16)
    return transformers.AutoConfig.for_model("qwen3_5_moe", text_config=text, vision_config=vision,
                                             tie_word_embeddings=False)


def model_class(family):
    if family == "qwen3_5_moe":
        return transformers.Qwen3_5MoeForConditionalGeneration
    return transformers.AutoModelForCausalLM


def perturb(model, gen):
    base.perturb(model, gen)
    with torch.no_grad():
        for mname, m in model.named_modules():
            if type(m).__name__ in ZERO_CENTRED_NORMS:  # (1 + w) x / rms: the stored weight sits around 0
                m.weight.copy_(0.2 * torch.randn(m.weight.shape, generator=gen))
        for name, p in model.named_parameters():
            if name.endswith("A_log"):  # A = exp(A_log) in [1, 16], as transformers initialises it
                p.copy_(torch.log(1.0 + 15.0 * torch.rand(p.shape, generator=gen)))
            elif name.endswith("dt_bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("conv1d.weight"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))


def fp8_round(w):
    """w (out, in) float -> (e4m3 tensor, float32 scale_inv (ceil(out/B), ceil(in/B)), dequantized float64).
    The scale of a block is the power of two 2^ceil(log2(amax / 448)), so e4m3 x scale is exact in bf16."""
    out_f, in_f = w.shape
    bo, bi = math.ceil(out_f / FP8_BLOCK), math.ceil(in_f / FP8_BLOCK)
    x = w.double()
    scale = torch.empty(bo, bi, dtype=torch.float64)
    q = torch.empty(out_f, in_f, dtype=torch.float8_e4m3fn)
    deq = torch.empty_like(x)
    for i in range(bo):
        for j in range(bi):
            blk = x[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK]
            amax = float(blk.abs().max().clamp(min=1e-30))
            s = 2.0 ** math.ceil(math.log2(amax / 448.0))
            qb = (blk / s).float().to(torch.float8_e4m3fn)
            q[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK] = qb
            deq[i * FP8_BLOCK:(i + 1) * FP8_BLOCK, j * FP8_BLOCK:(j + 1) * FP8_BLOCK] = qb.double() * s
            scale[i, j] = s
    assert torch.equal(deq.to(torch.bfloat16).double(), deq), "an FP8 value x scale is not exact in bf16"
    return q, scale.float(), deq


def is_fp8_linear(name, t):
    """DeepSeek's release: every Linear of the layers in FP8 except the router (mlp.gate); embeddings, norms, the
    head and the correction bias stay bf16/f32."""
    return (t.dim() == 2 and name.endswith(".weight") and ".layers." in name and "norm" not in name
            and not name.endswith("mlp.gate.weight"))


def run_reference(cls, folder, ids):
    model = cls.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").cuda().eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    x = torch.tensor([ids], device="cuda")
    with torch.no_grad():
        logits = model(input_ids=x).logits[0].float().cpu()
        gen = model.generate(input_ids=x, max_new_tokens=base.N_NEW, do_sample=False, min_new_tokens=base.N_NEW,
                             eos_token_id=None, pad_token_id=0)
    return logits, gen[0, len(ids):].tolist()


def split_fused_experts(sd, cfg):
    """qwen3_5_moe saves its experts fused (experts, 2 I, H) and (experts, H, I); the per-expert layout beside it."""
    out = {}
    I = cfg.text_config.moe_intermediate_size
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            p = k[:-len("gate_up_proj")]
            for e in range(v.shape[0]):
                out[f"{p}{e}.gate_proj.weight"] = v[e, :I].contiguous()
                out[f"{p}{e}.up_proj.weight"] = v[e, I:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            p = k[:-len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{p}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v
    return out


def copy_configs(src, dst):
    for f in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, f)):
            with open(os.path.join(src, f)) as a, open(os.path.join(dst, f), "w") as b:
                b.write(a.read())


def make(name, root):
    base_name = FP8_OF.get(name, name)
    family, n_ids, kw = MODELS[base_name]
    idx = list(MODELS).index(base_name)
    gen = torch.Generator().manual_seed(2000 + idx)
    cfg = make_config(family, kw)
    cls = model_class(family)
    model = (cls._from_config(cfg, dtype=torch.float32) if family == "qwen3_5_moe"
             else cls.from_config(cfg, dtype=torch.float32))
    perturb(model, gen)
    model = model.to(torch.bfloat16)
    d = os.path.join(root, name)
    fp8 = {}
    if name in FP8_OF:
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if is_fp8_linear(pname, p):
                    q, s, deq = fp8_round(p.float())
                    p.copy_(deq.to(p.dtype))
                    fp8[pname] = (q, s)
    model.save_pretrained(os.path.join(d, "hf"))
    ids = torch.randint(3, V, (n_ids,), generator=gen).tolist()
    logits, greedy = run_reference(cls, os.path.join(d, "hf"), ids)
    saved = {}
    for f in sorted(os.listdir(os.path.join(d, "hf"))):
        if f.endswith(".safetensors"):
            saved.update(load_file(os.path.join(d, "hf", f)))
    hub = split_fused_experts(saved, cfg) if family == "qwen3_5_moe" else dict(saved)
    for pname, (q, s) in fp8.items():
        if pname not in hub:
            sys.exit(f"{name}: saved tensor {pname} not found")
        hub[pname] = q.contiguous()
        hub[pname + "_scale_inv"] = s.contiguous()
    base.save_sharded(hub, os.path.join(d, "hub"))
    copy_configs(os.path.join(d, "hf"), os.path.join(d, "hub"))
    check = {}
    if fp8:
        with open(os.path.join(d, "hub", "config.json")) as f:
            c = json.load(f)
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
        with open(os.path.join(d, "hub", "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        try:  # transformers' own FP8 reader, dequantizing, as a check of this script's packing
            qm = cls.from_pretrained(os.path.join(d, "hub"), dtype=torch.bfloat16,
                                     quantization_config=transformers.FineGrainedFP8Config(dequantize=True))
            sd = qm.state_dict()
            worst = max(float((sd[k].float().cpu() - v.float().cpu()).abs().max())
                        for k, v in model.state_dict().items() if k in sd)
            check = {"transformers_dequantized_max_abs_diff": worst}
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            check = {"transformers_fp8_load_failed": repr(e)[:400]}
        logits_hub, greedy_hub = logits, greedy
    elif family == "qwen3_5_moe":
        logits_hub, greedy_hub = logits, greedy
        check = {"hub_not_read_by_transformers": "per-expert qwen3_5_moe tensors; checked by Seedling"}
    else:
        logits_hub, greedy_hub = run_reference(cls, os.path.join(d, "hub"), ids)
    same = torch.equal(logits, logits_hub) and greedy == greedy_hub
    logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))
    ref = {"name": name, "family": family, "ids": ids, "greedy": greedy, "vocab_size": V, "n_ids": len(ids),
           "transformers": transformers.__version__, "torch": torch.__version__, "reference_dtype": "float64",
           "hub_layout_matches_saved": same, "max_abs_hub_diff": float((logits - logits_hub).abs().max()),
           "logits_abs_max": float(logits.abs().max()), "check": check,
           "saved_tensor_shapes": {k: [str(v.dtype)] + list(v.shape) for k, v in sorted(saved.items())
                                   if ".layers.0." in k or ".layers.1." in k or "layers" not in k},
           "hub_tensor_shapes": {k: [str(v.dtype)] + list(v.shape) for k, v in sorted(hub.items())
                                 if ".layers.0." in k or ".layers.1." in k}}
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(name, "greedy", greedy, "hub same:", same, "max|logit|", ref["logits_abs_max"], check, flush=True)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    root = os.path.join(OUT, "models")
    os.makedirs(root, exist_ok=True)
    names = list(MODELS) + list(FP8_OF)
    wanted = sys.argv[2:] or names
    failed = []
    for name in wanted:
        if name not in names:
            sys.exit(f"unknown model {name} (known: {', '.join(names)})")
        try:
            make(name, root)
        except Exception as e:  # noqa: BLE001 - one family's failure must not hide the others'
            import traceback
            traceback.print_exc()
            failed.append(name)
    with tarfile.open(os.path.join(OUT, "models.tar.gz"), "w:gz") as t:
        t.add(root, arcname="models")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
