#!/usr/bin/env python3
"""transformers' float64 logits of a qwen3moe GGUF's gguf-py-dequantized weights: the reference issue 25 holds
Seedling's logits of a llama.cpp-quantized file to (tests/unit/engine/gguf_model_test.cpp).

    python3 tools/gguf_f64_reference.py FILE.gguf OUT.f32 --ids 1,5,77 --gguf-py DIR   # GPU machine (torch, transformers)

Every tensor is dequantized by gguf-py (gguf.quants.dequantize, llama.cpp's numpy reference) to float32, put under
its Hugging Face name (llama.cpp's qwen3moe layout: q and k rows as the converter keeps them, NeoX RoPE; the expert
stacks split per expert or joined as the installed transformers stores them), saved as a float32 safetensors
folder with a config from the file's keys, and that folder loaded fresh in float64 with eager attention and eager
experts. OUT gets the logits of `--ids` as one forward, float32 [n_ids x vocab] (the C++ tests' read_f32).
"""
import argparse
import json
import os
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_file")
    ap.add_argument("out")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--gguf-py", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    r = gguf.GGUFReader(a.gguf_file)
    arch = r.fields["general.architecture"].contents()
    if arch != "qwen3moe":
        raise SystemExit("%s: architecture %r, this script reads qwen3moe" % (a.gguf_file, arch))
    key = lambda k: r.fields[arch + "." + k].contents()  # noqa: E731
    w = {t.name: np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
         for t in r.tensors}
    layers, heads = int(key("block_count")), int(key("attention.head_count"))
    cfg = Qwen3MoeConfig(
        vocab_size=int(w["token_embd.weight"].shape[0]), hidden_size=int(key("embedding_length")),
        intermediate_size=int(key("feed_forward_length")), moe_intermediate_size=int(key("expert_feed_forward_length")),
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=int(key("attention.head_count_kv")), head_dim=int(key("attention.key_length")),
        num_experts=int(key("expert_count")), num_experts_per_tok=int(key("expert_used_count")),
        rms_norm_eps=float(key("attention.layer_norm_rms_epsilon")), rope_theta=float(key("rope.freq_base")),
        max_position_embeddings=int(key("context_length")), norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], tie_word_embeddings="output.weight" not in w, attention_bias=False)
    theta = float(key("rope.freq_base"))
    if isinstance(getattr(cfg, "rope_parameters", None), dict):  # transformers 5 keeps theta here
        cfg.rope_parameters["rope_theta"] = theta
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
                 "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                 "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm", "ffn_gate_inp": "mlp.gate"}
    for l in range(layers):
        for g, h in per_layer.items():
            names["blk.%d.%s.weight" % (l, g)] = "model.layers.%d.%s.weight" % (l, h)
    model = Qwen3MoeForCausalLM(cfg).to(torch.float32)
    sd = model.state_dict()
    new = {}
    for g, h in names.items():
        if g not in w:
            raise SystemExit("%s: no tensor %s" % (a.gguf_file, g))
        if tuple(sd[h].shape) != w[g].shape:
            raise SystemExit("%s -> %s: shape %s, the model's %s" % (g, h, w[g].shape, tuple(sd[h].shape)))
        new[h] = torch.from_numpy(w[g])
    for l in range(layers):
        gate, up, down = (w["blk.%d.ffn_%s_exps.weight" % (l, p)] for p in ("gate", "up", "down"))  # [E, I, H], [E, H, I]
        pre = "model.layers.%d.mlp.experts." % l
        if pre + "gate_up_proj" in sd:  # joined stacks (transformers 5)
            gu = np.concatenate([gate, up], axis=1)
            if tuple(sd[pre + "gate_up_proj"].shape) != gu.shape:
                gu = gu.transpose(0, 2, 1)
            dn = down if tuple(sd[pre + "down_proj"].shape) == down.shape else down.transpose(0, 2, 1)
            new[pre + "gate_up_proj"], new[pre + "down_proj"] = torch.from_numpy(np.ascontiguousarray(gu)), \
                torch.from_numpy(np.ascontiguousarray(dn))
        else:
            for e in range(gate.shape[0]):
                for p, v in (("gate_proj", gate[e]), ("up_proj", up[e]), ("down_proj", down[e])):
                    new["%s%d.%s.weight" % (pre, e, p)] = torch.from_numpy(np.ascontiguousarray(v))
    missing = [k for k in sd if k not in new and not k.endswith("inv_freq")]
    if missing:
        raise SystemExit("no GGUF tensor for %s" % missing[:5])
    for k, v in new.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            raise SystemExit("%s: shape %s, the model's %s" % (k, tuple(v.shape), tuple(sd[k].shape)))
    model.load_state_dict(new, strict=False)
    ids = [int(x) for x in a.ids.split(",")]
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager")
        if hasattr(ref, "set_experts_implementation"):
            ref.set_experts_implementation("eager")
        ref.eval()
        with torch.no_grad():
            logits = ref(torch.tensor([ids])).logits[0]
    logits.to(torch.float32).numpy().astype("<f4").tofile(a.out)
    print(json.dumps({"file": os.path.basename(a.gguf_file), "ids": ids, "vocab": int(logits.shape[1]),
                      "max_abs_logit": float(logits.abs().max()),
                      "rope": getattr(ref.config, "rope_parameters", None) or getattr(ref.config, "rope_theta", None)}))


if __name__ == "__main__":
    main()
