#!/usr/bin/env python3
"""A gpt-oss-shaped benchmark model in two containers with the same weights: a Hugging Face folder (MXFP4 experts as
released, bf16 everything else) for Seedling, and a GGUF for the llama.cpp family.

    gpt_oss_bench_model.py make HF_DIR [--layers 24 --hidden 2880 ...]   random weights, gpt-oss-20b's shape by default
    gpt_oss_bench_model.py gguf HF_DIR OUT.gguf --gguf-py DIR             the same weights as a GGUF (arch gpt-oss)

`make` needs torch and safetensors (the GPU machine has both; no network); `gguf` needs numpy alone. Weights are random but sized like a
trained model's so that activations stay finite through every layer: matrices ~ N(0, 1/fan_in), MXFP4 codes uniform
over the 16 values with block exponents around 2^-7 (rms about 1/sqrt(2880)), norms around 1.

`gguf` reads any gpt_oss folder with MXFP4 experts (`*_blocks` + `*_scales`, as openai/gpt-oss-* are released) and
writes llama.cpp's layout: gate and up split from the interleaved `gate_up_proj` rows (even rows gate, odd up), each
MXFP4 block re-packed from the released nibble order (byte i holds elements 2i, 2i+1) into ggml's block_mxfp4 (the
exponent byte, then byte j holding elements j and j + 16); the exponent and the codes are kept, so no value changes.
Matrices stay BF16, norms, biases and sinks become F32, as convert_hf_to_gguf.py does. There is no tokenizer
(tokenizer.ggml.model "none"): llama-bench feeds random ids. ik_llama.cpp's convert_hf_to_gguf.py (8337e4c) has no
gpt-oss converter, which is why this one exists; it is a benchmark tool, not a user-facing converter.
"""
import argparse
import json
import os
import sys


def shape_args(p):
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2880)
    p.add_argument("--heads", type=int, default=64)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--experts", type=int, default=32)
    p.add_argument("--top-k", type=int, default=4)
    p.add_argument("--expert-width", type=int, default=2880)
    p.add_argument("--vocab", type=int, default=201088)
    p.add_argument("--sliding-window", type=int, default=128)
    p.add_argument("--seed", type=int, default=1)


def make(a):
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(a.seed)
    h, n_layers, e, w = a.hidden, a.layers, a.experts, a.expert_width
    q_dim, kv_dim = a.heads * a.head_dim, a.kv_heads * a.head_dim
    assert h % 32 == 0 and w % 32 == 0, "MXFP4 rows need multiples of 32"
    os.makedirs(a.hf_dir, exist_ok=True)

    def normal(*shape, std):
        return (torch.randn(*shape, dtype=torch.float32) * std).to(torch.bfloat16)

    def around_one(n):
        return (1.0 + 0.1 * torch.randn(n)).to(torch.bfloat16)

    def mxfp4(rows, cols):
        blocks = torch.randint(0, 256, (e, rows, cols // 32, 16), dtype=torch.uint8)
        scales = torch.randint(119, 122, (e, rows, cols // 32), dtype=torch.uint8)  # 2^-8 .. 2^-6
        return blocks, scales

    weight_map = {}

    def shard(name, tensors):
        save_file(tensors, os.path.join(a.hf_dir, name), metadata={"format": "pt"})
        weight_map.update({k: name for k in tensors})

    n_shards = n_layers + 1
    shard_name = lambda i: "model-%05d-of-%05d.safetensors" % (i + 1, n_shards)
    shard(shard_name(0), {"model.embed_tokens.weight": normal(a.vocab, h, std=1.0),
                          "model.norm.weight": around_one(h),
                          "lm_head.weight": normal(a.vocab, h, std=h ** -0.5)})
    for i in range(n_layers):
        p = "model.layers.%d." % i
        gu_blocks, gu_scales = mxfp4(2 * w, h)
        dn_blocks, dn_scales = mxfp4(h, w)
        shard(shard_name(i + 1), {
            p + "input_layernorm.weight": around_one(h),
            p + "post_attention_layernorm.weight": around_one(h),
            p + "self_attn.q_proj.weight": normal(q_dim, h, std=h ** -0.5),
            p + "self_attn.q_proj.bias": normal(q_dim, std=0.02),
            p + "self_attn.k_proj.weight": normal(kv_dim, h, std=h ** -0.5),
            p + "self_attn.k_proj.bias": normal(kv_dim, std=0.02),
            p + "self_attn.v_proj.weight": normal(kv_dim, h, std=h ** -0.5),
            p + "self_attn.v_proj.bias": normal(kv_dim, std=0.02),
            p + "self_attn.o_proj.weight": normal(h, q_dim, std=q_dim ** -0.5),
            p + "self_attn.o_proj.bias": normal(h, std=0.02),
            p + "self_attn.sinks": normal(a.heads, std=1.0),
            p + "mlp.router.weight": normal(e, h, std=h ** -0.5),
            p + "mlp.router.bias": normal(e, std=0.02),
            p + "mlp.experts.gate_up_proj_blocks": gu_blocks,
            p + "mlp.experts.gate_up_proj_scales": gu_scales,
            p + "mlp.experts.gate_up_proj_bias": normal(e, 2 * w, std=0.02),
            p + "mlp.experts.down_proj_blocks": dn_blocks,
            p + "mlp.experts.down_proj_scales": dn_scales,
            p + "mlp.experts.down_proj_bias": normal(e, h, std=0.02),
        })
        print("layer %d of %d written" % (i + 1, n_layers), flush=True)
    with open(os.path.join(a.hf_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    config = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True,
        "attention_dropout": 0.0, "bos_token_id": 199998, "eos_token_id": 200002, "pad_token_id": 199999,
        "dtype": "bfloat16", "head_dim": a.head_dim, "hidden_act": "silu", "hidden_size": h,
        "intermediate_size": w, "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                                                for i in range(n_layers)],
        "max_position_embeddings": 131072, "num_attention_heads": a.heads, "num_experts_per_tok": a.top_k,
        "num_hidden_layers": n_layers, "num_key_value_heads": a.kv_heads, "num_local_experts": e,
        "rms_norm_eps": 1e-5, "rope_theta": 150000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False},
        "sliding_window": a.sliding_window, "swiglu_limit": 7.0, "tie_word_embeddings": False,
        "vocab_size": a.vocab,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
    }
    with open(os.path.join(a.hf_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    print("wrote %s" % a.hf_dir)


def ggml_mxfp4(blocks, scales):
    """Released MXFP4 ([..., n_blocks, 16] codes, byte i = elements 2i | 2i+1 << 4; [..., n_blocks] exponents) as
    ggml block_mxfp4 rows ([..., n_blocks * 17]: exponent, then byte j = elements j | j+16 << 4)."""
    import numpy as np

    lo, hi = blocks & 0x0F, blocks >> 4
    elements = np.stack((lo, hi), axis=-1).reshape(*blocks.shape[:-1], 32)
    qs = elements[..., :16] | (elements[..., 16:] << 4)
    out = np.concatenate((scales[..., None], qs.astype(np.uint8)), axis=-1)
    return np.ascontiguousarray(out.reshape(*blocks.shape[:-2], blocks.shape[-2] * 17))


def read_safetensors(folder):
    """name -> (dtype, shape, bytes as a uint8 numpy view) over every shard of FOLDER, memory-mapped."""
    import numpy as np

    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    tensors = {}
    for name in files:
        raw = np.memmap(os.path.join(folder, name), dtype=np.uint8, mode="r")
        n = int(raw[:8].view("<u8")[0])
        header = json.loads(bytes(raw[8:8 + n]))
        for k, v in header.items():
            if k != "__metadata__":
                lo, hi = v["data_offsets"]
                tensors[k] = (v["dtype"], tuple(v["shape"]), raw[8 + n + lo:8 + n + hi])
    return tensors


def gguf(a):
    import numpy as np

    sys.path.insert(0, a.gguf_py)
    import gguf as g
    from gguf_bench_common import bf16_to_f32, moe_header, write

    cfg = json.load(open(os.path.join(a.hf_dir, "config.json")))
    assert cfg["model_type"] == "gpt_oss", "%s: model_type %r, expected gpt_oss" % (a.hf_dir, cfg["model_type"])
    assert (cfg.get("quantization_config") or {}).get("quant_method") == "mxfp4", "only MXFP4 experts are converted"
    tensors = read_safetensors(a.hf_dir)

    def get(k, dtype):
        have, shape, data = tensors[k]
        assert have == dtype, "%s: %s, expected %s" % (k, have, dtype)
        return data.reshape(*shape[:-1], shape[-1] * 2) if dtype == "BF16" else data.reshape(shape)  # bf16: bytes

    def bf16_bytes(k):
        return np.ascontiguousarray(get(k, "BF16"))

    def f32(k):
        return bf16_to_f32(get(k, "BF16"))

    w = g.GGUFWriter(a.out, arch="gpt-oss")
    n_layers = cfg["num_hidden_layers"]
    moe_header(g, w, cfg, cfg["intermediate_size"], cfg["num_local_experts"], g.LlamaFileType.MOSTLY_MXFP4)
    w.add_sliding_window(cfg["sliding_window"])

    bf16, mx = g.GGMLQuantizationType.BF16, g.GGMLQuantizationType.MXFP4
    w.add_tensor("token_embd.weight", bf16_bytes("model.embed_tokens.weight"), raw_dtype=bf16)
    w.add_tensor("output_norm.weight", f32("model.norm.weight"))
    w.add_tensor("output.weight", bf16_bytes("lm_head.weight"), raw_dtype=bf16)
    for i in range(n_layers):
        p, b = "model.layers.%d." % i, "blk.%d." % i
        w.add_tensor(b + "attn_norm.weight", f32(p + "input_layernorm.weight"))
        w.add_tensor(b + "post_attention_norm.weight", f32(p + "post_attention_layernorm.weight"))
        for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
            w.add_tensor(b + gg + ".weight", bf16_bytes(p + "self_attn.%s.weight" % hf), raw_dtype=bf16)
            w.add_tensor(b + gg + ".bias", f32(p + "self_attn.%s.bias" % hf))
        w.add_tensor(b + "attn_sinks.weight", f32(p + "self_attn.sinks"))
        w.add_tensor(b + "ffn_gate_inp.weight", bf16_bytes(p + "mlp.router.weight"), raw_dtype=bf16)
        w.add_tensor(b + "ffn_gate_inp.bias", f32(p + "mlp.router.bias"))
        gu_blocks = get(p + "mlp.experts.gate_up_proj_blocks", "U8")
        gu_scales = get(p + "mlp.experts.gate_up_proj_scales", "U8")
        gu_bias = f32(p + "mlp.experts.gate_up_proj_bias")
        w.add_tensor(b + "ffn_gate_exps.weight", ggml_mxfp4(gu_blocks[:, 0::2], gu_scales[:, 0::2]), raw_dtype=mx)
        w.add_tensor(b + "ffn_up_exps.weight", ggml_mxfp4(gu_blocks[:, 1::2], gu_scales[:, 1::2]), raw_dtype=mx)
        w.add_tensor(b + "ffn_gate_exps.bias", np.ascontiguousarray(gu_bias[:, 0::2]))
        w.add_tensor(b + "ffn_up_exps.bias", np.ascontiguousarray(gu_bias[:, 1::2]))
        w.add_tensor(b + "ffn_down_exps.weight", ggml_mxfp4(get(p + "mlp.experts.down_proj_blocks", "U8"),
                                                           get(p + "mlp.experts.down_proj_scales", "U8")),
                     raw_dtype=mx)
        w.add_tensor(b + "ffn_down_exps.bias", f32(p + "mlp.experts.down_proj_bias"))
    write(w, a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="random weights of gpt-oss's shape into a Hugging Face folder")
    m.add_argument("hf_dir")
    shape_args(m)
    c = sub.add_parser("gguf", help="an MXFP4 gpt_oss folder as a GGUF")
    c.add_argument("hf_dir")
    c.add_argument("out")
    c.add_argument("--gguf-py", required=True, help="gguf-py folder of a llama.cpp-family tree")
    a = ap.parse_args()
    (make if a.cmd == "make" else gguf)(a)


if __name__ == "__main__":
    main()
