"""What tools/gpt_oss_bench_model.py and tools/packed_to_gguf.py share: bf16 bytes widened to float32, and the
GGUF header of a MoE transformer without a tokenizer (llama-bench feeds random ids). numpy only."""
import os

import numpy as np


def bf16_to_f32(data):
    """uint8 bytes of bf16 values (any shape, last axis bytes) as float32, exactly."""
    data = np.ascontiguousarray(data)
    return (data.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(*data.shape[:-1], -1)


def moe_header(g, w, cfg, expert_width, n_experts, file_type):
    """The keys llama.cpp reads for a MoE model from a Hugging Face config (rope: theta and yarn, either dialect)."""
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_expert_feed_forward_length(expert_width)
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(n_experts)
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


def write(w, path):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print("wrote %s (%.2f GB)" % (path, os.path.getsize(path) / 1e9))
