"""What tools/gpt_oss_bench_model.py, tools/packed_to_gguf.py, tools/make_gguf_goldens.py and
tests/data/gguf/make_files.py share: bf16 bytes to and from float32, the GGUF header of a MoE transformer without a
tokenizer (llama-bench feeds random ids), a random qwen3_moe folder. numpy only."""
import json
import os
import struct

import numpy as np


def bf16_to_f32(data):
    """uint8 bytes of bf16 values (any shape, last axis bytes) as float32, exactly."""
    data = np.ascontiguousarray(data)
    return (data.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(*data.shape[:-1], -1)


def header_keys(g, w, cfg, file_type, n_layers=None, kv_heads=None, moe=None):
    """The keys llama.cpp reads for a model of these tools, from a Hugging Face config; no tokenizer (llama-bench
    feeds random ids). n_layers and kv_heads default to the config's. moe = (expert width, experts) adds the
    feed-forward, expert, head-dim and rope keys (rope: theta and yarn, either dialect); without it a family writes
    those of its own."""
    w.add_block_count(cfg["num_hidden_layers"] if n_layers is None else n_layers)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if moe:
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_expert_feed_forward_length(moe[0])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"] if kv_heads is None else kv_heads)
    if moe:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if moe:
        w.add_expert_count(moe[1])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        w.add_rope_freq_base(cfg.get("rope_theta", rope.get("rope_theta")))
        if rope.get("rope_type") == "yarn":
            w.add_rope_scaling_type(g.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rope["factor"])
            w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_tokenizer_model("none")
    w.add_add_bos_token(False)
    w.add_file_type(file_type)


def moe_header(g, w, cfg, expert_width, n_experts, file_type):
    """header_keys for a MoE model whose config has every key."""
    header_keys(g, w, cfg, file_type, moe=(expert_width, n_experts))


def write(w, path):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print("wrote %s (%.2f GB)" % (path, os.path.getsize(path) / 1e9))


def bf16_bytes(x):
    """float32 -> bf16 little-endian bytes, round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return u.tobytes()


def write_safetensors(path, tensors):
    """{name: (shape, bf16 bytes)} as a safetensors file, names sorted."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        shape, data = tensors[name]
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_qwen3_moe(folder, cfg, seed):
    """A qwen3_moe folder of `cfg` (config.json) with bf16 weights from numpy's default_rng(seed): matrices
    N(0, 1/fan_in), norms 1 + N(0, 0.01), every layer routed experts."""
    os.makedirs(folder)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=2)
    rng = np.random.default_rng(seed)
    h, hd, w, v = cfg["hidden_size"], cfg["head_dim"], cfg["moe_intermediate_size"], cfg["vocab_size"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    t = {}

    def mat(name, rows, cols):
        t[name] = ((rows, cols), bf16_bytes(rng.normal(0, cols ** -0.5, (rows, cols))))

    def vec(name, n):
        t[name] = ((n,), bf16_bytes(1 + 0.1 * rng.normal(size=n)))

    mat("model.embed_tokens.weight", v, h)
    mat("lm_head.weight", v, h)
    vec("model.norm.weight", h)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        vec(p + "input_layernorm.weight", h)
        vec(p + "post_attention_layernorm.weight", h)
        mat(p + "self_attn.q_proj.weight", q, h)
        mat(p + "self_attn.k_proj.weight", kv, h)
        mat(p + "self_attn.v_proj.weight", kv, h)
        mat(p + "self_attn.o_proj.weight", h, q)
        vec(p + "self_attn.q_norm.weight", hd)
        vec(p + "self_attn.k_norm.weight", hd)
        mat(p + "mlp.gate.weight", cfg["num_experts"], h)
        for e in range(cfg["num_experts"]):
            x = p + "mlp.experts.%d." % e
            mat(x + "gate_proj.weight", w, h)
            mat(x + "up_proj.weight", w, h)
            mat(x + "down_proj.weight", h, w)
    write_safetensors(os.path.join(folder, "model.safetensors"), t)
