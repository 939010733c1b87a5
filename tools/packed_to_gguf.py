#!/usr/bin/env python3
"""A Seedling packed qwen3_moe, deepseek_v3 or qwen3_5_moe folder as a GGUF with the same bits, for side-by-side
runs with the llama.cpp family.

    packed_to_gguf.py PACKED OUT.gguf --gguf-py DIR      (numpy and a llama.cpp-family tree's gguf-py; no torch)

Seedling's q4_g32 block ({f16 d; f16 m; u8 q[16]}, element i in the low nibble of q[i] and i + 16 in its high,
value d * q + m; docs/formats/packed.md) is ggml's Q4_1 byte for byte, so every q4_g32 matrix (experts and dense)
is copied as Q4_1 without touching a bit; bf16 matrices (routers, DeepSeek's kv_b_proj, or anything packed as
stored) stay BF16, norms and biases become F32 (exactly: bf16 widened). Any other codec is refused: no other
Seedling codec has a ggml twin of the same bits. There is no tokenizer in the GGUF (tokenizer.ggml.model "none"):
llama-bench feeds random ids.

qwen3_moe: llama.cpp's qwen3moe layout (token_embd, blk.N.attn_q/k/v/output, attn_q_norm/attn_k_norm, attn_norm,
ffn_norm, ffn_gate_inp, ffn_gate_exps/ffn_up_exps/ffn_down_exps stacked over the experts, output_norm, output). The
Hugging Face q/k rows are kept in order (qwen3 uses NeoX-style RoPE, so llama.cpp's converter does not permute them).

deepseek_v3 (and kimi_k2): the deepseek2 layout as ik_llama.cpp's convert_hf_to_gguf.py writes it (attn_q_a,
attn_q_a_norm, attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b, attn_output; ffn_gate/up/down in the first
`first_k_dense_replace` layers; then ffn_gate_inp, exp_probs_b.bias, the stacked experts and ffn_*_shexp), with
head_count_kv = the query heads (ik's MLA convention), key length qk_nope + qk_rope, value length v_head_dim, and the
YaRN keys. attn_k_b / attn_v_b are left out: ik derives them from attn_kv_b when it loads.

qwen3_5_moe (the text model, as `seedling synth --preset qwen3.5-35b-a3b` writes it): llama.cpp's qwen35moe layout.
Full-attention layers as qwen3moe's (attn_q twice as wide: query and output gate); Gated DeltaNet layers as
attn_qkv, attn_gate (z), ssm_beta (b), ssm_alpha (a), ssm_conv1d (channels x kernel), ssm_dt.bias, ssm_a = -exp(A_log)
and ssm_norm, ssm_out; the shared expert with ffn_gate_inp_shexp; the zero-centred (1 + w) norms stored as 1 + w, as
llama.cpp's converter stores them; the ssm.* and full_attention_interval keys; rope sections from `mrope_section`,
else all the rotary pairs in the first.
"""
import argparse
import json
import os
import sys

import numpy as np

Q4_1_BLOCK = 20  # bytes of 32 elements


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("packed")
    ap.add_argument("out")
    ap.add_argument("--gguf-py", required=True, help="gguf-py folder of a llama.cpp-family tree")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf as g
    from gguf_bench_common import bf16_to_f32, header_keys, moe_header, write

    man = json.load(open(os.path.join(a.packed, "manifest.json")))
    assert man.get("format") == "seedling-packed", "%s: not a packed folder" % a.packed
    cfg = man["config"]
    res = np.memmap(os.path.join(a.packed, man["resident"]["file"]), dtype=np.uint8, mode="r")
    tensors = man["resident"]["tensors"]
    BF16, Q4_1 = g.GGMLQuantizationType.BF16, g.GGMLQuantizationType.Q4_1

    def raw(spec, base):
        return base[spec["offset"]:spec["offset"] + spec["bytes"]]

    def matrix(name):
        """(bytes as rows x row_bytes, ggml type) of a resident matrix."""
        t = tensors[name]
        rows, cols = t["shape"]
        data = raw(t, res)
        if t["codec"] == "q4_g32":
            assert cols % 32 == 0, "%s: %d columns, Q4_1 needs a multiple of 32" % (name, cols)
            return np.ascontiguousarray(data.reshape(rows, cols // 32 * Q4_1_BLOCK)), Q4_1
        if t["codec"] == "bf16":
            return np.ascontiguousarray(data.reshape(rows, cols * 2)), BF16
        raise SystemExit("%s: codec %s has no ggml type of the same bits (pack with --experts q4_g32 --dense "
                         "q4_g32)" % (name, t["codec"]))

    def vector_f32(name):
        t = tensors[name]
        assert t["codec"] == "bf16", "%s: codec %s, expected bf16" % (name, t["codec"])
        return bf16_to_f32(raw(t, res)).reshape(-1)

    experts = {e["layer"]: e for e in man["experts"]}

    def add_matrix(gguf_name, hf_name):
        data, kind = matrix(hf_name)
        w.add_tensor(gguf_name, data, raw_dtype=kind)

    def add_experts(i, b):
        """Layer i's routed experts, stacked over the experts as blk.i.ffn_{gate,up,down}_exps."""
        lay = experts[i]
        blobs = np.memmap(os.path.join(a.packed, lay["file"]), dtype=np.uint8, mode="r")
        for part, gg in (("gate", "ffn_gate_exps"), ("up", "ffn_up_exps"), ("down", "ffn_down_exps")):
            spec = lay[part]
            assert spec["codec"] == "q4_g32", "layer %d %s: codec %s, expected q4_g32" % (i, part, spec["codec"])
            rows, cols = spec["shape"]
            stacked = np.stack([blobs[bl["offset"] + spec["offset"]:bl["offset"] + spec["offset"] + spec["bytes"]]
                                for bl in lay["blobs"]])
            w.add_tensor(b + gg + ".weight", stacked.reshape(len(lay["blobs"]), rows, cols // 32 * Q4_1_BLOCK),
                         raw_dtype=Q4_1)

    def common_keys(w, cfg, kv_heads):
        """The keys every family here writes alike."""
        header_keys(g, w, cfg, g.LlamaFileType.MOSTLY_Q4_1, n_layers=n_layers, kv_heads=kv_heads)

    def add_head():
        add_matrix("token_embd.weight", "model.embed_tokens.weight")
        w.add_tensor("output_norm.weight", vector_f32("model.norm.weight"))
        add_matrix("output.weight", "lm_head.weight" if "lm_head.weight" in tensors else "model.embed_tokens.weight")

    n_layers = cfg.get("text_config", cfg)["num_hidden_layers"]
    if cfg["model_type"] == "qwen3_moe":
        sparse = cfg.get("decoder_sparse_step", 1)
        dense_layers = set(cfg.get("mlp_only_layers") or [])
        for i in range(n_layers):
            assert i not in dense_layers and (i + 1) % sparse == 0, "layer %d is dense: not supported here" % i
        w = g.GGUFWriter(a.out, arch="qwen3moe")
        # qwen3_moe configs name the expert count num_experts (transformers) or num_local_experts (the demo)
        n_experts = cfg.get("num_experts", cfg.get("num_local_experts"))
        moe_header(g, w, cfg, cfg["moe_intermediate_size"], n_experts, g.LlamaFileType.MOSTLY_Q4_1)
        add_head()
        for i in range(n_layers):
            p, b = "model.layers.%d." % i, "blk.%d." % i
            w.add_tensor(b + "attn_norm.weight", vector_f32(p + "input_layernorm.weight"))
            w.add_tensor(b + "ffn_norm.weight", vector_f32(p + "post_attention_layernorm.weight"))
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                           ("o_proj", "attn_output")):
                add_matrix(b + gg + ".weight", p + "self_attn.%s.weight" % hf)
            w.add_tensor(b + "attn_q_norm.weight", vector_f32(p + "self_attn.q_norm.weight"))
            w.add_tensor(b + "attn_k_norm.weight", vector_f32(p + "self_attn.k_norm.weight"))
            add_matrix(b + "ffn_gate_inp.weight", p + "mlp.gate.weight")
            add_experts(i, b)
    elif cfg["model_type"] in ("deepseek_v3", "kimi_k2"):
        assert cfg.get("q_lora_rank"), "q_lora_rank is null: only the q_a/q_b form is converted here"
        dense = cfg.get("first_k_dense_replace", 0)
        w = g.GGUFWriter(a.out, arch="deepseek2")
        common_keys(w, cfg, cfg["num_attention_heads"])  # ik's MLA: as many KV heads as query heads
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_rope_freq_base(cfg["rope_theta"])
        w.add_leading_dense_block_count(dense)
        w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_kv_lora_rank(cfg["kv_lora_rank"])
        w.add_key_length(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
        w.add_value_length(cfg["v_head_dim"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_count(cfg["n_routed_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        scoring = cfg.get("scoring_func", "sigmoid")  # transformers' DeepseekV3 config has no key: always sigmoid
        assert scoring == "sigmoid", "scoring_func %r: only sigmoid is converted" % scoring
        w.add_expert_gating_func(g.ExpertGatingFuncType.SIGMOID)
        w.add_expert_group_count(cfg.get("n_group", 1))
        w.add_expert_group_used_count(cfg.get("topk_group", 1))
        w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
        rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}  # transformers 5 writes rope_parameters
        if rope.get("type", rope.get("rope_type")) == "yarn":
            w.add_rope_scaling_type(g.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rope["factor"])
            w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])
        add_head()
        for i in range(n_layers):
            p, b = "model.layers.%d." % i, "blk.%d." % i
            sa = p + "self_attn."
            w.add_tensor(b + "attn_norm.weight", vector_f32(p + "input_layernorm.weight"))
            w.add_tensor(b + "ffn_norm.weight", vector_f32(p + "post_attention_layernorm.weight"))
            for hf, gg in (("q_a_proj", "attn_q_a"), ("q_b_proj", "attn_q_b"), ("kv_a_proj_with_mqa", "attn_kv_a_mqa"),
                           ("kv_b_proj", "attn_kv_b"), ("o_proj", "attn_output")):
                add_matrix(b + gg + ".weight", sa + hf + ".weight")
            w.add_tensor(b + "attn_q_a_norm.weight", vector_f32(sa + "q_a_layernorm.weight"))
            w.add_tensor(b + "attn_kv_a_norm.weight", vector_f32(sa + "kv_a_layernorm.weight"))
            if i < dense:
                for hf, gg in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
                    add_matrix(b + gg + ".weight", p + "mlp.%s.weight" % hf)
                continue
            add_matrix(b + "ffn_gate_inp.weight", p + "mlp.gate.weight")
            w.add_tensor(b + "exp_probs_b.bias", vector_f32(p + "mlp.gate.e_score_correction_bias"))
            add_experts(i, b)
            for hf, gg in (("gate_proj", "ffn_gate_shexp"), ("up_proj", "ffn_up_shexp"),
                           ("down_proj", "ffn_down_shexp")):
                add_matrix(b + gg + ".weight", p + "mlp.shared_experts.%s.weight" % hf)
    elif cfg["model_type"] in ("qwen3_5_moe", "qwen3_5_moe_text"):
        # A released (multimodal) folder keeps the text model under model.language_model.* and its keys in
        # text_config; the vision tower is not converted.
        lm = "model.language_model." if "text_config" in cfg else "model."
        cfg = cfg.get("text_config", cfg)
        kinds = cfg["layer_types"]
        interval = kinds.index("full_attention") + 1
        for i, kind in enumerate(kinds):
            want = "full_attention" if (i + 1) % interval == 0 else "linear_attention"
            assert kind == want, "layer %d is %s: only a full layer every %d layers converts" % (i, kind, interval)
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        rotary = int(cfg["head_dim"] * cfg.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0)))
        sections = list(rope.get("mrope_section") or [rotary // 2])
        w = g.GGUFWriter(a.out, arch="qwen35moe")
        common_keys(w, cfg, cfg["num_key_value_heads"])
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
        w.add_rope_freq_base(cfg.get("rope_theta", rope.get("rope_theta")))
        w.add_rope_dimension_count(rotary)
        w.add_rope_dimension_sections(sections + [0] * (4 - len(sections)))
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
        assert cfg["linear_key_head_dim"] == cfg["linear_value_head_dim"], "ik keeps one state size for keys and values"
        w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
        w.add_ssm_state_size(cfg["linear_key_head_dim"])
        w.add_uint32("qwen35moe.ssm.group_count", cfg["linear_num_key_heads"])  # this gguf-py lacks the key
        w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
        w.add_ssm_inner_size(cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"])
        w.add_uint32("qwen35moe.full_attention_interval", interval)

        def norm_plus_one(name):
            """A zero-centred (1 + w) RMSNorm's weight as llama.cpp stores it: 1 + w."""
            return vector_f32(name) + np.float32(1.0)

        add_matrix("token_embd.weight", lm + "embed_tokens.weight")
        w.add_tensor("output_norm.weight", norm_plus_one(lm + "norm.weight"))
        add_matrix("output.weight", "lm_head.weight" if "lm_head.weight" in tensors else lm + "embed_tokens.weight")
        for i in range(n_layers):
            p, b = lm + "layers.%d." % i, "blk.%d." % i
            w.add_tensor(b + "attn_norm.weight", norm_plus_one(p + "input_layernorm.weight"))
            w.add_tensor(b + "post_attention_norm.weight", norm_plus_one(p + "post_attention_layernorm.weight"))
            if kinds[i] == "full_attention":
                sa = p + "self_attn."
                for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                               ("o_proj", "attn_output")):
                    add_matrix(b + gg + ".weight", sa + hf + ".weight")
                w.add_tensor(b + "attn_q_norm.weight", norm_plus_one(sa + "q_norm.weight"))
                w.add_tensor(b + "attn_k_norm.weight", norm_plus_one(sa + "k_norm.weight"))
            else:  # Gated DeltaNet: the projections as stored; the conv as (channels, kernel); A as -exp(A_log)
                la = p + "linear_attn."
                for hf, gg in (("in_proj_qkv", "attn_qkv"), ("in_proj_z", "attn_gate"), ("in_proj_b", "ssm_beta"),
                               ("in_proj_a", "ssm_alpha"), ("out_proj", "ssm_out")):
                    add_matrix(b + gg + ".weight", la + hf + ".weight")
                conv = tensors[la + "conv1d.weight"]["shape"]
                w.add_tensor(b + "ssm_conv1d.weight", vector_f32(la + "conv1d.weight").reshape(conv[0], conv[-1]))
                w.add_tensor(b + "ssm_dt.bias", vector_f32(la + "dt_bias"))
                w.add_tensor(b + "ssm_a", -np.exp(vector_f32(la + "A_log")))
                w.add_tensor(b + "ssm_norm.weight", vector_f32(la + "norm.weight"))
            add_matrix(b + "ffn_gate_inp.weight", p + "mlp.gate.weight")
            add_experts(i, b)
            w.add_tensor(b + "ffn_gate_inp_shexp.weight", vector_f32(p + "mlp.shared_expert_gate.weight"))
            for hf, gg in (("gate_proj", "ffn_gate_shexp"), ("up_proj", "ffn_up_shexp"),
                           ("down_proj", "ffn_down_shexp")):
                add_matrix(b + gg + ".weight", p + "mlp.shared_expert.%s.weight" % hf)
    else:
        raise SystemExit("%s: model_type %r; only qwen3_moe, deepseek_v3 (kimi_k2) and qwen3_5_moe are converted" % (
            a.packed, cfg["model_type"]))
    write(w, a.out)


if __name__ == "__main__":
    main()
