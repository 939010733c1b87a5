#!/usr/bin/env python3
"""GGUF files made by llama.cpp's own tools from Seedling's Hugging Face folders (the GGUF oracles of issue 25).

    python3 tools/make_gguf_goldens.py convert --ik IK_SRC --out OUT      # GPU machine (torch, transformers): ~1 min
    python3 tools/make_gguf_goldens.py quantize --gguf OUT --out DIR [--llama-quantize BIN]   # any machine
    python3 tools/make_gguf_goldens.py dequantize IN.gguf OUT.gguf [--gguf-py DIR]          # numpy only
    python3 tools/make_gguf_goldens.py shrink OUT/kquant_qwen3moe-bf16.gguf OUT/kquant_small-bf16.gguf  # numpy only

`convert` runs llama.cpp's convert_hf_to_gguf.py (from a llama.cpp-family tree, IK_SRC holding it and gguf-py/) on
each folder of JOBS, each in its own process, all at once, to OUT/NAME.gguf (bf16 matrices, f32 norms and routers,
as the converter writes them) and OUT/convert.log. The converter predates some of what these folders are, so this
wrapper tells it, and nothing else changes (every tensor and key is the converter's own):

- the demo's tokenizer is byte-level BPE with Qwen2's split regex, which the converter's pre-tokenizer hash table
  does not know (it knows models by their tokenizer's output on a test string): for it the answer is "qwen2";
- the tiny test checkpoints have no tokenizer: tokenizer.ggml.model is written "none" for them;
- transformers 5 writes num_local_experts where the converter's Qwen classes read num_experts, and rope_parameters
  where it reads rope_theta: the folder is copied with config.json given the names the converter reads;
- this tree's LlamaModel.set_gguf_parameters needs a prefix_dense_intermediate_size no Mixtral has and drops
  num_experts_per_tok: for such a config the base class's parameters plus vocab_size and rope.dimension_count are
  written, as llama.cpp's own LlamaModel does;
- qwen2moe/qwen3moe's tensor lists have no dense FFN, which the tiny checkpoints' mlp_only_layers need: ffn_gate,
  ffn_up, ffn_down are added to those lists (llama.cpp does not run such files; Seedling maps dense layers by the
  tensors present).

`quantize` runs llama-quantize on OUT/demo-bf16.gguf and OUT/kquant_qwen3moe-bf16.gguf (a random qwen3_moe whose
rows are whole K-quant blocks, kquant_folder below; the demo's 192-wide rows are not, and llama-quantize falls back
to other types for them): Q8_0, Q4_K_M, Q6_K and IQ4_XS (the other types of issue 25), F32 (exact: every bf16 value
widened) and Q4_1 --pure (every matrix Q4_1, which Seedling runs as q4_g32), into DIR.
`quantize --models kquant_small --types q4_k_m,q6_k,iq4_xs` quantizes only those.
`shrink` cuts the converter's kquant_qwen3moe-bf16.gguf to its first layer and first 3 experts (router rows and
block_count / expert_count with them; every kept tensor the converter's bytes): kquant_small, whose llama-quantize
files are small enough to commit (0.5-0.8 MB each) and still hold real Q4_K, Q5_K, Q6_K and IQ4_XS blocks.
`dequantize` copies a GGUF with every tensor dequantized to F32 by gguf-py (llama.cpp's numpy reference), the metadata
as it is: Seedling's logits on that copy are what the quantized file's are held to.

tests/data/gguf/llama_cpp/ keeps what the tests read (README.md there says which).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# (output name, folder under the repository, pre-tokenizer for an unknown hash, no tokenizer, vocabulary only)
JOBS = [
    ("demo-bf16", "models/seedling-demo-moe", "qwen2", False, False),
    ("demo-vocab", "models/seedling-demo-moe", "qwen2", False, True),
    ("qwen3_moe_a-bf16", "tests/data/models/qwen3_moe_a/hf", None, True, False),
    ("mixtral_a-bf16", "tests/data/models/mixtral_a/hf", None, True, False),
    ("qwen2_moe_a-bf16", "tests/data/models/qwen2_moe_a/hf", None, True, False),
    ("glm4_moe_a-bf16", "tests/data/models/glm4_moe_a/hf", None, True, False),
    ("kquant_qwen3moe-bf16", None, None, True, False),  # written by kquant_folder (below), then converted
]

QUANTS = [("q8_0", "Q8_0", []), ("q4_k_m", "Q4_K_M", []), ("q6_k", "Q6_K", []), ("iq4_xs", "IQ4_XS", []),
          ("f32", "F32", []), ("q4_1-pure", "Q4_1", ["--pure"])]

# kquant_small has 3 experts, for which ik_llama.cpp's IQ4_XS mixture picks its own IQ5_K (no ggml type) for attn_v:
# Q8_0 there, as the mixture picks for 4 experts or more.
SMALL_EXTRA = {("kquant_small", "iq4_xs"): ["--custom-q", "attn_v=q8_0"]}


def kquant_folder(path):
    """A random qwen3_moe whose rows are whole 256-wide K-quant blocks (hidden 256, head_dim 64, expert width 256, 4
    experts, 2 layers, vocab 256; 2.1M parameters, bf16): llama-quantize writes real Q4_K / Q6_K / IQ4_XS blocks for
    it, where the demo's 192-wide rows fall back to other types. numpy only; seeded."""
    from gguf_bench_common import random_qwen3_moe

    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
           "bos_token_id": 1, "eos_token_id": 2, "decoder_sparse_step": 1, "mlp_only_layers": [], "head_dim": 64,
           "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 256,
           "max_position_embeddings": 512, "norm_topk_prob": True, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False, "vocab_size": 256,
           "torch_dtype": "bfloat16"}
    random_qwen3_moe(path, cfg, 2025)


def fixed_copy(src, dst):
    """The folder with config.json in the names the converter reads."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    cfg = json.load(open(path))
    if cfg.get("model_type") in ("qwen2_moe", "qwen3_moe") and "num_experts" not in cfg and "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")
    rope = cfg.get("rope_parameters") or {}
    if "rope_theta" not in cfg and "rope_theta" in rope:
        cfg["rope_theta"] = rope["rope_theta"]
    json.dump(cfg, open(path, "w"), indent=2)


def convert_one(a):
    """In a process of its own: the converter with the patches the docstring lists, then its main()."""
    sys.path.insert(0, os.path.join(a.ik, "gguf-py"))
    sys.path.insert(0, a.ik)
    import gguf
    import convert_hf_to_gguf as conv

    M = conv.Model
    if a.pre:
        known = M.get_vocab_base_pre

        def pre(self, tokenizer):
            try:
                return known(self, tokenizer)
            except NotImplementedError:
                print("make_gguf_goldens: pre-tokenizer hash unknown to the converter; using %r" % a.pre, flush=True)
                return a.pre

        M.get_vocab_base_pre = pre
    if a.no_vocab:
        def none_vocab(self):
            self.gguf_writer.add_tokenizer_model("none")

        for cls in {M, *M._model_classes.values()}:
            if "set_vocab" in cls.__dict__:
                cls.set_vocab = none_vocab
    llama = conv.LlamaModel.set_gguf_parameters

    def llama_params(self):
        if "prefix_dense_intermediate_size" in self.hparams:
            return llama(self)
        M.set_gguf_parameters(self)
        hp = self.hparams
        self.gguf_writer.add_vocab_size(hp["vocab_size"])
        self.gguf_writer.add_rope_dimension_count(hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"])

    conv.LlamaModel.set_gguf_parameters = llama_params
    for arch in (gguf.MODEL_ARCH.QWEN2MOE, gguf.MODEL_ARCH.QWEN3MOE):
        for t in (gguf.MODEL_TENSOR.FFN_GATE, gguf.MODEL_TENSOR.FFN_UP, gguf.MODEL_TENSOR.FFN_DOWN):
            if t not in gguf.MODEL_TENSORS[arch]:
                gguf.MODEL_TENSORS[arch].append(t)
    sys.argv = ["convert_hf_to_gguf.py", a.folder, "--outfile", a.outfile, "--outtype", "bf16"]
    if a.vocab_only:
        sys.argv.append("--vocab-only")
    conv.main()


def convert(a):
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="gguf-goldens-")
    procs = []
    for name, folder, pre, no_vocab, vocab_only in JOBS:
        dst = os.path.join(work, name)
        if folder is None:
            kquant_folder(dst)
        else:
            fixed_copy(os.path.join(a.repo, folder), dst)
        cmd = [sys.executable, os.path.abspath(__file__), "_one", "--ik", os.path.abspath(a.ik), "--folder", dst,
               "--outfile", os.path.join(os.path.abspath(a.out), name + ".gguf")]
        if pre:
            cmd += ["--pre", pre]
        if no_vocab:
            cmd.append("--no-vocab")
        if vocab_only:
            cmd.append("--vocab-only")
        log = open(os.path.join(work, name + ".log"), "w")
        procs.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    failed = 0
    with open(os.path.join(a.out, "convert.log"), "w") as out:
        for name, p, log in procs:
            rc = p.wait()
            log.close()
            out.write("==== %s: exit %d\n" % (name, rc))
            out.write(open(log.name).read()[-20000:])
            failed += rc != 0
            print("%s: exit %d" % (name, rc), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


def quantize(a):
    os.makedirs(a.out, exist_ok=True)
    for model in a.models.split(","):
        src = os.path.join(a.gguf, model + "-bf16.gguf")
        for suffix, qtype, extra in QUANTS:
            if a.types and suffix not in a.types.split(","):
                continue
            dst = os.path.join(a.out, "%s-%s.gguf" % (model, suffix))
            extra = extra + SMALL_EXTRA.get((model, suffix), [])
            subprocess.run([a.llama_quantize, *extra, src, dst, qtype], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            print("wrote %s (%d bytes)" % (dst, os.path.getsize(dst)))


def dequantize(a):
    """A copy of a GGUF with every tensor gguf-py-dequantized to F32 (gguf.quants.dequantize, llama.cpp's numpy
    reference), its metadata as it is: the float model a quantized file's logits are held to."""
    sys.path.insert(0, a.gguf_py)
    import gguf
    import numpy as np

    r = gguf.GGUFReader(a.src)
    w = gguf.GGUFWriter(a.dst, arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        w.add_tensor(t.name, np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print("wrote %s" % a.dst)


def shrink(a):
    """The first layers (and experts) of a qwen3moe GGUF, every kept tensor's bytes as they are."""
    sys.path.insert(0, a.gguf_py)
    import gguf
    import numpy as np

    layers, experts = 1, 3
    r = gguf.GGUFReader(a.src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(a.dst, arch=arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        value = f.contents()
        if name == arch + ".block_count":
            value = layers
        if name == arch + ".expert_count":
            value = experts
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, value, f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, value, f.types[0])
    for t in r.tensors:
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= layers:
            continue
        data = np.asarray(t.data)
        if t.name.endswith("_exps.weight") or t.name.endswith("ffn_gate_inp.weight"):
            data = data[:experts]  # the outermost dimension: experts (the router's rows)
        # numpy's shape, outermost first; BF16 as its bytes (gguf-py sizes them by raw_dtype)
        w.add_tensor(t.name, np.ascontiguousarray(data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print("wrote %s" % a.dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("--ik", required=True, help="llama.cpp-family tree: convert_hf_to_gguf.py and gguf-py/")
    c.add_argument("--out", required=True)
    c.add_argument("--repo", default=ROOT, help="the Seedling checkout holding the folders (default: this one)")
    q = sub.add_parser("quantize")
    q.add_argument("--gguf", required=True, help="what convert wrote")
    q.add_argument("--out", required=True)
    q.add_argument("--llama-quantize", default="/work/ik-cpu/bin/llama-quantize")
    q.add_argument("--models", default="demo,kquant_qwen3moe", help="comma-separated NAMEs of GGUF/NAME-bf16.gguf")
    q.add_argument("--types", default="", help="comma-separated suffixes of QUANTS (default: all)")
    sh = sub.add_parser("shrink")
    sh.add_argument("src")
    sh.add_argument("dst")
    sh.add_argument("--gguf-py", default="/work/ik-src/gguf-py")
    d = sub.add_parser("dequantize")
    d.add_argument("src")
    d.add_argument("dst")
    d.add_argument("--gguf-py", default="/work/ik-src/gguf-py")
    one = sub.add_parser("_one")
    one.add_argument("--ik", required=True)
    one.add_argument("--folder", required=True)
    one.add_argument("--outfile", required=True)
    one.add_argument("--pre")
    one.add_argument("--no-vocab", action="store_true")
    one.add_argument("--vocab-only", action="store_true")
    a = ap.parse_args()
    {"convert": convert, "quantize": quantize, "dequantize": dequantize, "shrink": shrink, "_one": convert_one}[a.cmd](a)


if __name__ == "__main__":
    main()
