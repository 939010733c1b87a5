#!/usr/bin/env python3
"""Writes the GGUF files in this folder (tests/unit/core/gguf_test.cpp reads them; small ones seed the fuzz corpus).

    /usr/bin/python3 tests/data/gguf/make_files.py build/seedling /work/ik-src/gguf-py [LLAMA_QUANTIZE]

Needs numpy and a llama.cpp-family tree's gguf-py (GGUFWriter, an independent writer of the format). Writes:

- every_type.gguf: gguf-py's GGUFWriter, one key of every metadata type and an array of each (strings included),
  tokenizer-shaped keys, and tensors of several ggml types (F32, F16, BF16, Q8_0, Q4_K, MXFP4, I32) whose bytes are
  0, 1, 2, ... (mod 251), so a reader can check it found each tensor's bytes where they are.
- qwen3moe_q4_1/ and qwen3moe_q4_1.gguf: a tiny random qwen3_moe folder (2 layers, hidden 64, 4 experts of width 32,
  vocab 64) packed by `seedling pack --experts q4_g32 --dense q4_g32` (the packed folder, kept), then
  tools/packed_to_gguf.py: every Q4_1 tensor of the GGUF holds the packed folder's bytes.
- gpt_oss_mxfp4.gguf: tools/gpt_oss_bench_model.py gguf of tests/data/models/gpt_oss_mxfp4/hub (MXFP4, BF16, F32).
- qwen35moe_q4_1.gguf: the released tiny qwen3_5_moe checkpoint (tests/data/models/qwen3_5_moe_a/hf, multimodal)
  packed with `--experts q4_g32 --dense bf16` (its shared expert is 48 wide: no whole Q4_1 blocks), then
  tools/packed_to_gguf.py: llama.cpp's qwen35moe layout (norms as 1 + w, ssm_a = -exp(A_log)); the pack is not kept
  (the tests make it again from the checkpoint).
- deepseek2_q4_0.gguf (only with a third argument, a llama.cpp-family llama-quantize): the tiny deepseek_v3_a
  checkpoint (tests/data/models/deepseek_v3_a/hf: MLA with q_lora_rank, YaRN, group routing, a dense first layer)
  packed q4_g32, tools/packed_to_gguf.py (llama.cpp's deepseek2 layout; attn_kv_b bf16), then `llama-quantize
  --allow-requantize --pure --output-tensor-type q4_0 --token-embedding-type q4_0 ... Q4_0`: every matrix Q4_0,
  attn_kv_b included (the MLA kernels read it as stored; tools/cuda_tests.sh holds CUDA to the CPU on it).
- tests/fuzz/corpus/fuzz_gguf/: the seeds of the GGUF fuzz target (fuzz_seeds below; qwen3moe_keys_gpt2 reaches the
  mapping onto a family and the tokenizer).
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gguf_bench_common import random_qwen3_moe  # noqa: E402


def counting_bytes(n):
    return (np.arange(n, dtype=np.int64) % 251).astype(np.uint8)


def every_type(g, path):
    w = g.GGUFWriter(path, arch="testarch")
    T = g.GGUFValueType
    w.add_name("every type")
    for key, val, vtype in (("test.u8", 200, T.UINT8), ("test.i8", -100, T.INT8), ("test.u16", 60000, T.UINT16),
                            ("test.i16", -30000, T.INT16), ("test.u32", 4000000000, T.UINT32),
                            ("test.i32", -2000000000, T.INT32), ("test.u64", 2**63 + 5, T.UINT64),
                            ("test.i64", -(2**62), T.INT64), ("test.f32", 0.25, T.FLOAT32),
                            ("test.f64", -1e300, T.FLOAT64), ("test.bool", True, T.BOOL),
                            ("test.string", "h\u00e9llo", T.STRING)):
        w.add_key_value(key, val, vtype)
    for key, val, sub in (("test.arr.u8", [1, 2, 255], T.UINT8), ("test.arr.i8", [-1, 0, 1], T.INT8),
                          ("test.arr.u16", [65535], T.UINT16), ("test.arr.i16", [-32768, 7], T.INT16),
                          ("test.arr.u32", [1, 2, 3, 4], T.UINT32), ("test.arr.i32", [-5, 5], T.INT32),
                          ("test.arr.u64", [2**64 - 1], T.UINT64), ("test.arr.i64", [-(2**63), 2**63 - 1], T.INT64),
                          ("test.arr.f32", [0.5, -2.0], T.FLOAT32), ("test.arr.f64", [1e-300, 3.0], T.FLOAT64),
                          ("test.arr.bool", [True, False, True], T.BOOL),
                          ("test.arr.string", ["a", "", "long string \u4e2d"], T.STRING)):
        w.add_key_value(key, val, T.ARRAY, sub)
    w.add_block_count(1)
    w.add_embedding_length(64)
    w.add_expert_count(4)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["<s>", "</s>", "a", "b", "ab"])
    w.add_token_types([3, 3, 1, 1, 1])
    w.add_token_scores([0.0, 0.0, -1.0, -2.0, -3.0])
    w.add_token_merges(["a b"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    Q = g.GGMLQuantizationType
    for name, shape, qtype in (("f32", (3, 2), Q.F32), ("f16", (4,), Q.F16), ("bf16", (2, 2, 2), Q.BF16),
                               ("q8_0", (2, 64), Q.Q8_0), ("q4_k", (1, 256), Q.Q4_K), ("mxfp4", (3, 32), Q.MXFP4),
                               ("i32", (1, 1, 1, 5), Q.I32)):
        # gguf-py takes numpy shapes (ne0 last); quantized tensors as bytes, rows of whole blocks.
        block, size = g.GGML_QUANT_SIZES[qtype]
        row_bytes = shape[-1] // block * size
        data = counting_bytes(int(np.prod(shape[:-1])) * row_bytes).reshape(*shape[:-1], row_bytes)
        w.add_tensor("t." + name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


def fuzz_seeds(g, folder):
    """Small files for tests/fuzz/corpus/fuzz_gguf/: every_type.gguf, a version 2 file aligned to 64, and the
    packed-to-GGUF files (qwen3moe, qwen35moe) cut after their first tensor (the rest of their tensors run past the
    end)."""
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "every_type.gguf"), os.path.join(folder, "every_type"))
    path = os.path.join(folder, "aligned64_v2")
    w = g.GGUFWriter(path, arch="qwen3moe")
    w.add_custom_alignment(64)
    w.add_block_count(1)
    Q = g.GGMLQuantizationType
    w.add_tensor("a", np.arange(4, dtype=np.float32))
    w.add_tensor("b", counting_bytes(40).reshape(2, 20), raw_dtype=Q.Q4_1)
    w.add_tensor("c", counting_bytes(144).reshape(1, 144), raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    data = bytearray(open(path, "rb").read())
    data[4:8] = struct.pack("<I", 2)  # version 2 has version 3's layout (3 allowed big-endian files)
    open(path, "wb").write(bytes(data))
    mapping_seed(g, os.path.join(folder, "qwen3moe_keys_gpt2"))
    for name in ("qwen3moe_q4_1", "qwen35moe_q4_1"):  # each cut after its first tensor: the mapping, then a short file
        src = os.path.join(HERE, name + ".gguf")
        r = g.GGUFReader(src)
        first = r.tensors[0]
        open(os.path.join(folder, name + "_cut"), "wb").write(open(src, "rb").read()[:first.data_offset + first.n_bytes])


def mapping_seed(g, path):
    """The metadata of a small qwen3moe (every key model/gguf_config.cpp reads, YaRN RoPE) and a gpt2 tokenizer
    (tokens, types, merges, pre-tokenizer qwen2, BOS added, a chat template), no tensors: a seed that reaches the
    mapping and the tokenizer of the fuzz target."""
    w = g.GGUFWriter(path, arch="qwen3moe")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(64)
    w.add_expert_feed_forward_length(32)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_key_length(32)
    w.add_value_length(32)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(4)
    w.add_expert_used_count(2)
    w.add_rope_freq_base(10000.0)
    w.add_rope_scaling_type(g.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(128)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(["<s>", "</s>", "a", "b", "ab", "\u0120", "\u0120a"])
    w.add_token_types([3, 3, 1, 1, 1, 1, 1])
    w.add_token_merges(["a b", "\u0120 a"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def tiny_qwen3_moe(folder):
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
        "bos_token_id": 1, "eos_token_id": 2, "decoder_sparse_step": 1, "mlp_only_layers": [], "head_dim": 32,
        "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 64, "moe_intermediate_size": 32,
        "max_position_embeddings": 256, "norm_topk_prob": True, "num_attention_heads": 2, "num_key_value_heads": 1,
        "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "vocab_size": 64, "dtype": "bfloat16",
    }
    random_qwen3_moe(folder, cfg, 25)


def run(*args):
    print("+", " ".join(args))
    subprocess.run(args, check=True)


def main():
    seedling, gguf_py = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    sys.path.insert(0, gguf_py)
    import gguf as g

    every_type(g, os.path.join(HERE, "every_type.gguf"))
    packed = os.path.join(HERE, "qwen3moe_q4_1")
    # A fixed scratch path: the manifest records where the folder was packed from.
    tmp = os.path.join(tempfile.gettempdir(), "seedling-gguf-tiny-qwen3moe")
    shutil.rmtree(tmp, ignore_errors=True)
    tiny_qwen3_moe(os.path.join(tmp, "hf"))
    shutil.rmtree(packed, ignore_errors=True)
    run(seedling, "pack", "-m", os.path.join(tmp, "hf"), "-o", packed, "--experts", "q4_g32", "--dense", "q4_g32")
    shutil.rmtree(tmp)
    tools = os.path.join(ROOT, "tools")
    run(sys.executable, os.path.join(tools, "packed_to_gguf.py"), packed, os.path.join(HERE, "qwen3moe_q4_1.gguf"),
        "--gguf-py", gguf_py)
    run(sys.executable, os.path.join(tools, "gpt_oss_bench_model.py"), "gguf",
        os.path.join(ROOT, "tests/data/models/gpt_oss_mxfp4/hub"), os.path.join(HERE, "gpt_oss_mxfp4.gguf"),
        "--gguf-py", gguf_py)
    qwen35moe_q4_1(seedling, gguf_py)
    if len(sys.argv) > 3:
        deepseek2_q4_0(seedling, gguf_py, os.path.abspath(sys.argv[3]))
    fuzz_seeds(g, os.path.join(ROOT, "tests/fuzz/corpus/fuzz_gguf"))


def qwen35moe_q4_1(seedling, gguf_py):
    tmp = os.path.join(tempfile.gettempdir(), "seedling-gguf-qwen35moe")
    shutil.rmtree(tmp, ignore_errors=True)
    run(seedling, "pack", "-m", os.path.join(ROOT, "tests/data/models/qwen3_5_moe_a/hf"), "-o", tmp, "--experts",
        "q4_g32", "--dense", "bf16")
    run(sys.executable, os.path.join(ROOT, "tools", "packed_to_gguf.py"), tmp, os.path.join(HERE, "qwen35moe_q4_1.gguf"),
        "--gguf-py", gguf_py)
    shutil.rmtree(tmp)


def deepseek2_q4_0(seedling, gguf_py, quantize):
    tmp = os.path.join(tempfile.gettempdir(), "seedling-gguf-deepseek2")
    shutil.rmtree(tmp, ignore_errors=True)
    run(seedling, "pack", "-m", os.path.join(ROOT, "tests/data/models/deepseek_v3_a/hf"), "-o", tmp, "--experts",
        "q4_g32", "--dense", "q4_g32")
    q4_1 = os.path.join(tmp, "q4_1.gguf")
    run(sys.executable, os.path.join(ROOT, "tools", "packed_to_gguf.py"), tmp, q4_1, "--gguf-py", gguf_py)
    run(quantize, "--allow-requantize", "--pure", "--output-tensor-type", "q4_0", "--token-embedding-type", "q4_0", q4_1,
        os.path.join(HERE, "deepseek2_q4_0.gguf"), "Q4_0")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
