"""A qwen3moe GGUF of random K-quant blocks in Q4_K_M's per-tensor types, written straight from numpy: a kernel
speed model when llama-quantize is too slow to wait for (it is not the llama-quantize file issue 25's side-by-sides
use; its blocks are random bytes with small float16 scales, not a quantization of anything).

    python3 tools/random_kquant_gguf.py OUT.gguf --gguf-py IK/gguf-py [--layers 8] [--vocab 151936] [--seed 0]

Qwen3-30B-A3B's shape (hidden 2048, 32 q / 4 kv heads of 128, 128 experts top-8 of width 768). Types as ik's
llama-quantize Q4_K_M gave that shape on 2026-12-06: token_embd, attn_q and the experts' gate and up Q4_K, attn_k and
attn_v Q8_0, attn_output Q5_K, the experts' down Q4_K on even layers and Q6_K on odd ones, output Q6_K, the router
bf16, norms F32. numpy only."""
import argparse
import sys

import numpy as np

H, HEADS, KV_HEADS, HD, EXPERTS, TOP_K, WIDTH = 2048, 32, 4, 128, 128, 8, 768
BLOCK = {"Q8_0": (32, 34), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}


def f16_field(rng, n, lo, hi):
    """n float16 values uniform in [lo, hi), as (n, 2) bytes."""
    return rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def blocks(rng, kind, n):
    """n random blocks of a type, (n, block bytes): random codes and scales, small positive float16 d (and dmin), so
    that weights stay near N(0, 1/2048) in size."""
    b = rng.integers(0, 256, (n, BLOCK[kind][1]), dtype=np.uint8)
    if kind == "Q8_0":
        b[:, 0:2] = f16_field(rng, n, 1e-4, 3e-4)
    elif kind in ("Q4_K", "Q5_K"):
        b[:, 0:2] = f16_field(rng, n, 2e-5, 6e-5)
        b[:, 2:4] = f16_field(rng, n, 5e-5, 1e-4)
    else:  # Q6_K: d is the last two bytes; the 16 int8 scales before it kept within +-32
        b[:, 192:208] = (rng.integers(-32, 32, (n, 16)) & 0xFF).astype(np.uint8)
        b[:, 208:210] = f16_field(rng, n, 2e-5, 6e-5)
    return b


def matrix(rng, kind, rows, cols, count=None):
    per, size = BLOCK[kind]
    assert cols % per == 0, "%d columns are not whole %s blocks" % (cols, kind)
    n = (count or 1) * rows * (cols // per)
    data = blocks(rng, kind, n).reshape(-1, rows, cols // per * size)
    return data if count else data[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--gguf-py", required=True, help="gguf-py folder of a llama.cpp-family tree")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf as g
    from gguf_bench_common import moe_header, write

    rng = np.random.default_rng(a.seed)
    T = g.GGMLQuantizationType
    cfg = {"num_hidden_layers": a.layers, "max_position_embeddings": 40960, "hidden_size": H,
           "intermediate_size": 6144, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HD,
           "rms_norm_eps": 1e-6, "num_experts_per_tok": TOP_K, "rope_theta": 1e6, "vocab_size": a.vocab}
    w = g.GGUFWriter(a.out, arch="qwen3moe")
    moe_header(g, w, cfg, WIDTH, EXPERTS, g.LlamaFileType.MOSTLY_Q4_K_M)

    def norm(name, n):
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    def add(name, kind, rows, cols, count=None):
        w.add_tensor(name, matrix(rng, kind, rows, cols, count), raw_dtype=getattr(T, kind))

    add("token_embd.weight", "Q4_K", a.vocab, H)
    norm("output_norm.weight", H)
    add("output.weight", "Q6_K", a.vocab, H)
    for i in range(a.layers):
        b = "blk.%d." % i
        norm(b + "attn_norm.weight", H)
        norm(b + "ffn_norm.weight", H)
        add(b + "attn_q.weight", "Q4_K", HEADS * HD, H)
        add(b + "attn_k.weight", "Q8_0", KV_HEADS * HD, H)
        add(b + "attn_v.weight", "Q8_0", KV_HEADS * HD, H)
        add(b + "attn_output.weight", "Q5_K", H, HEADS * HD)
        norm(b + "attn_q_norm.weight", HD)
        norm(b + "attn_k_norm.weight", HD)
        router = rng.normal(0, H ** -0.5, (EXPERTS, H)).astype(np.float32)
        w.add_tensor(b + "ffn_gate_inp.weight", (router.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
                     .reshape(EXPERTS, 2 * H), raw_dtype=T.BF16)
        add(b + "ffn_gate_exps.weight", "Q4_K", WIDTH, H, EXPERTS)
        add(b + "ffn_up_exps.weight", "Q4_K", WIDTH, H, EXPERTS)
        add(b + "ffn_down_exps.weight", "Q4_K" if i % 2 == 0 else "Q6_K", H, WIDTH, EXPERTS)
    write(w, a.out)


if __name__ == "__main__":
    main()
