#!/usr/bin/python3
"""Writes quant_vectors.gguf: random blocks of every ggml type Seedling decodes, with gguf-py's dequantization.

    /usr/bin/python3 tests/data/gguf/make_quant_vectors.py /work/ik-src/gguf-py \\
        [--ggml-lib /work/ik-cpu/ggml/src/libggml.so]

Needs numpy and a llama.cpp-family tree's gguf-py (`gguf.quants.dequantize`, the numpy reference of ggml's
dequantization, and GGUFWriter). For each type T of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 the file holds two tensors of the same shape [cols, rows]:

- `T.blocks`, of type T: rows x cols elements of random blocks. The bytes are random, but every float16 scale field
  is a random finite float16 (so every value is finite), and the first blocks are edge cases: all bytes zero; all
  0xFF (the largest codes and sub-block scales) with scales +1 and -1; the smallest subnormal and the largest
  float16 scales; a zero d beside nonzero mins; all codes zero; and (MXFP4) the exponents 0, 1, 2, 127 and 252
  (the largest whose every value is finite). The float types hold random finite values, zeros, subnormals and the
  extremes.
- `T.values`, F32: gguf-py's `dequantize` of those bytes (numpy float32).

The key `seedling.oracle.T` says what computed `T.values`: "gguf-py" wherever the tree's gguf-py dequantizes T.
ik_llama.cpp's gguf-py has no MXFP4; there the values come from ggml's own `dequantize_row_mxfp4` in the
`--ggml-lib` build of the same tree (mainline gguf-py's MXFP4 computes the same exact products). With --ggml-lib,
every other type is also decoded by ggml's C `dequantize_row_*` and the key `seedling.ggml_c_equal.T` records
whether it gave gguf-py's bits (informational; true for every type today).

Seeded, so a rerun writes the same file. tests/unit/engine/ggml_codec_test.cpp reads it.
"""
import argparse
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# (type, blocks per row, rows); each type's first blocks are the edge cases below.
LAYOUT = [
    ("F32", 256, 8), ("F16", 256, 8), ("BF16", 256, 8),
    ("Q8_0", 8, 8), ("Q4_0", 8, 8), ("Q4_1", 8, 8), ("Q5_0", 8, 8), ("Q5_1", 8, 8),
    ("Q2_K", 2, 12), ("Q3_K", 2, 12), ("Q4_K", 2, 12), ("Q5_K", 2, 12), ("Q6_K", 2, 12),
    ("IQ4_NL", 8, 8), ("IQ4_XS", 2, 12), ("MXFP4", 8, 8),
]

# Byte offsets of each block's float16 fields (ggml-common.h's block structs).
F16_FIELDS = {
    "Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q2_K": [80, 82], "Q3_K": [108],
    "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_NL": [0], "IQ4_XS": [0],
}

C_FUNCTIONS = {
    "F16": "ggml_fp16_to_fp32_row", "BF16": "ggml_bf16_to_fp32_row", "Q8_0": "dequantize_row_q8_0",
    "Q4_0": "dequantize_row_q4_0", "Q4_1": "dequantize_row_q4_1", "Q5_0": "dequantize_row_q5_0",
    "Q5_1": "dequantize_row_q5_1", "Q2_K": "dequantize_row_q2_K", "Q3_K": "dequantize_row_q3_K",
    "Q4_K": "dequantize_row_q4_K", "Q5_K": "dequantize_row_q5_K", "Q6_K": "dequantize_row_q6_K",
    "IQ4_NL": "dequantize_row_iq4_nl", "IQ4_XS": "dequantize_row_iq4_xs", "MXFP4": "dequantize_row_mxfp4",
}


def finite_f16_bits(rng, n):
    """n random float16 bit patterns, none infinite or NaN."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    while True:
        bad = (h & 0x7C00) == 0x7C00
        if not bad.any():
            return h
        h[bad] = rng.integers(0, 1 << 16, size=int(bad.sum()), dtype=np.uint32).astype(np.uint16)


def set_f16(block, offsets, values):
    for off, v in zip(offsets, values):
        block[off:off + 2] = np.array([v], dtype=np.uint16).view(np.uint8)


def quant_blocks(rng, name, n_blocks, block_bytes):
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint32).astype(np.uint8)
    if name == "MXFP4":
        # Random exponents where values stay in a range a float32 dot product cannot overflow, then the edges.
        blocks[:, 0] = rng.integers(100, 155, size=n_blocks).astype(np.uint8)
        for i, e in enumerate((0, 1, 2, 127, 252)):
            blocks[i, 0] = e
        blocks[5, 1:] = 0xFF
        blocks[6, 1:] = 0x77  # the largest positive code everywhere
        blocks[6, 0] = 252
        return blocks
    fields = F16_FIELDS[name]
    for b in range(n_blocks):
        set_f16(blocks[b], fields, finite_f16_bits(rng, len(fields)))
    edges = [
        (0x00, [0x0000] * len(fields)),    # all zero: zero scales, zero codes
        (0xFF, [0x3C00] * len(fields)),    # the largest codes and sub-block scales, scales +1
        (0xFF, [0xBC00] * len(fields)),    # ... and -1
        (None, [0x0001] * len(fields)),    # the smallest subnormal scales
        (None, [0x7BFF, 0xFBFF][:len(fields)]),  # the largest float16 scales, both signs
        (None, [0x0000] + [0x3555] * (len(fields) - 1)),  # d zero, the min not
        ("codes0", None),                  # every code byte zero (random scales)
    ]
    for i, (fill, f16s) in enumerate(edges):
        if fill == "codes0":
            keep = {o + k for o in fields for k in (0, 1)}
            for j in range(block_bytes):
                if j not in keep:
                    blocks[i, j] = 0
            continue
        if fill is not None:
            blocks[i, :] = fill
        set_f16(blocks[i], fields, f16s)
    return blocks


def float_values(rng, name, n):
    if name == "F32":
        v = (rng.standard_normal(n) * np.exp2(rng.integers(-60, 61, size=n))).astype(np.float32)
        edge = np.array([0.0, -0.0, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 1.0],
                        dtype=np.float32)
        v[:edge.size] = edge
        return v.view(np.uint8)
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    if name == "F16":
        bits = finite_f16_bits(rng, n)
        edge = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00]
    else:  # BF16: exponent 255 (inf, NaN) excluded
        bad = (bits & 0x7F80) == 0x7F80
        bits[bad] &= 0xBFFF
        edge = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80]
    bits[:len(edge)] = edge
    return bits.view(np.uint8)


class GgmlInitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def init_ggml(lib):
    """ggml_init fills the float16 table every float16 scale is read through; a context is made and freed."""
    lib.ggml_init.argtypes = [GgmlInitParams]
    lib.ggml_init.restype = ctypes.c_void_p
    lib.ggml_free.argtypes = [ctypes.c_void_p]
    lib.ggml_free(lib.ggml_init(GgmlInitParams(1 << 20, None, True)))


def ggml_c_values(lib, name, raw, n):
    fn = getattr(lib, C_FUNCTIONS[name])
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    raw = np.ascontiguousarray(raw)
    out = np.zeros(n, dtype=np.float32)
    fn(raw.ctypes.data, out.ctypes.data, n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf_py", help="a gguf-py folder (the one holding gguf/)")
    ap.add_argument("--ggml-lib", help="libggml.so of the same tree: MXFP4's values where gguf-py has none")
    ap.add_argument("--out", default=os.path.join(HERE, "quant_vectors.gguf"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.gguf_py))
    import gguf  # noqa: E402
    from gguf import quants  # noqa: E402

    lib = ctypes.CDLL(args.ggml_lib) if args.ggml_lib else None
    if lib is not None:
        init_ggml(lib)
    rng = np.random.default_rng(20261202)
    w = gguf.GGUFWriter(args.out, arch="seedling-quant-vectors")
    w.add_string("seedling.about", "random blocks of each ggml type (T.blocks) and their dequantization (T.values); "
                 "tests/data/gguf/make_quant_vectors.py")
    for name, blocks_per_row, rows in LAYOUT:
        qtype = gguf.GGMLQuantizationType[name]
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        cols = blocks_per_row * block_elems
        n_blocks = blocks_per_row * rows
        if block_elems == 1:
            raw = float_values(rng, name, rows * cols).reshape(rows, cols * block_bytes)
        else:
            raw = quant_blocks(rng, name, n_blocks, block_bytes).reshape(rows, blocks_per_row * block_bytes)
        has_py = qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) or \
            qtype in quants._type_traits
        if has_py:
            values = np.asarray(quants.dequantize(raw, qtype), dtype=np.float32).reshape(rows, cols)
            oracle = "gguf-py"
        elif lib is not None:
            values = ggml_c_values(lib, name, raw, rows * cols).reshape(rows, cols)
            oracle = f"ggml {C_FUNCTIONS[name]} (--ggml-lib)"
        else:
            sys.exit(f"{name}: this gguf-py cannot dequantize it; pass --ggml-lib")
        if not np.isfinite(values).all():
            sys.exit(f"{name}: a value is not finite")
        w.add_string(f"seedling.oracle.{name}", oracle)
        if lib is not None and has_py and name in C_FUNCTIONS:
            c = ggml_c_values(lib, name, raw, rows * cols).reshape(rows, cols)
            same = bool((c.view(np.uint32) == values.view(np.uint32)).all())
            w.add_bool(f"seedling.ggml_c_equal.{name}", same)
            print(f"{name:7s} ggml C == gguf-py: {same}")
        w.add_tensor(f"{name}.blocks", raw, raw_dtype=qtype)
        w.add_tensor(f"{name}.values", values)
        print(f"{name:7s} {rows} rows x {cols} ({n_blocks} blocks of {block_bytes} bytes), values by {oracle}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
