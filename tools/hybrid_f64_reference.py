#!/usr/bin/env python3
"""How far transformers' own "float64" reference of the hybrid goldens is from float64: its Gated DeltaNet
(torch_chunk_gated_delta_rule, l2norm, the decay), its RMSNorms and its router softmax cast to float32 inside the
modeling code whatever the model's dtype. This reruns qwen3_next_a and qwen3_5_moe_a with those casts made float64
(RoPE's angles kept in float32, as every golden has them) and prints, per model, the largest difference between the
committed logits and the all-float64 ones; writes OUT/NAME.f32 ([n_ids x vocab] float32) for the comparison with
Seedling. Runs on the GPU machine (patches the installed transformers there: the machine is discarded after).

Usage: python3 tools/hybrid_f64_reference.py OUT_DIR
"""
import json
import os
import sys

import torch
import transformers

OUT = sys.argv[1]
root = os.path.dirname(transformers.__file__)
for rel in ("models/qwen3_next/modeling_qwen3_next.py", "models/qwen3_5_moe/modeling_qwen3_5_moe.py"):
    path = os.path.join(root, rel)
    lines = open(path).read().split("\n")
    out = []
    for line in lines:
        if "inv_freq" not in line and "position_ids" not in line and "arange" not in line:
            line = (line.replace("torch.float32", "torch.float64").replace(".float()", ".double()")
                    .replace("dtype=torch.float)", "dtype=torch.float64)")
                    .replace("dtype=torch.float,", "dtype=torch.float64,"))
        out.append(line)
    open(path, "w").write("\n".join(out))

os.makedirs(OUT, exist_ok=True)
for name, cls in (("qwen3_next_a", transformers.AutoModelForCausalLM),
                  ("qwen3_5_moe_a", transformers.Qwen3_5MoeForConditionalGeneration)):
    d = os.path.join("tests/data/models", name)
    ref = json.load(open(os.path.join(d, "reference.json")))
    model = cls.from_pretrained(os.path.join(d, "hf"), dtype=torch.float64, attn_implementation="eager").cuda().eval()
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ref["ids"]], device="cuda")).logits[0].cpu()
    committed = torch.frombuffer(bytearray(open(os.path.join(d, "logits.f32"), "rb").read()),
                                 dtype=torch.float32).reshape(logits.shape).double()
    print(f"{name}: committed (float32 inside) vs all-float64: max abs {float((committed - logits).abs().max()):.3g}")
    open(os.path.join(OUT, name + ".f32"), "wb").write(bytes(logits.float().contiguous().untyped_storage()))
