// cuda/ggml_pieces.h - ggml's quant blocks (core/codec_layout.h's BlockQ8_0 ... BlockIq4Xs) as the CUDA kernels read
// them, in pieces: a piece is 8 consecutive elements j0 .. j0 + 7 of one block (j0 a multiple of 8), which always lie
// in one sub-block (of 16 or 32), so a piece has one scale d and one offset m:
//
//   value_i = d * q_i          (q8_0, q4_0, q5_0, iq4_nl; q3_k, q6_k, iq4_xs with d = d_block * scale)
//   value_i = d * q_i + m      (q5_1: m its float16 m; q2_k, q4_k, q5_k: d = d_block * scale, m = -(dmin * min))
//
// with q_i the element's integer code (codec/ggml_quants.h's *_code; q2_k's, q4_k's and q5_k's unsigned field) as an
// exact float, d and m the very floats ggml_quants.h computes (d_block * float(scale) rounded once), and each value
// the float operations ggml_quants.h does, in its order (values(): d * q rounded, then + m rounded), so it is gguf-py's
// value bit for bit. mxfp4_ggml is not read here: its rows take mxfp4's VRAM form (mxfp4_layout.h) at upload.
//
// fetch() loads what a piece needs into at most 8 words (a lane's loads before it decodes any, as the other codecs'
// kernels do), each as wide as the block's alignment allows: blocks are stored back to back, so a block starts at a
// multiple of its size from its row's start, and rows and matrices start 16-byte aligned in VRAM (cudaMalloc, packed
// blob parts, staged rows); q4_k's and q5_k's 144- and 176-byte blocks are then 16-byte aligned, iq4_xs's and q5_1's
// 8, q2_k's 4, the others only 2 (kAlign). decode() unpacks them into a Piece. Host and device share these functions
// (SEEDLING_HD), so the CPU tests hold every piece of random blocks to ggml_quants.h without a GPU
// (tests/unit/cuda/ggml_pieces_test.cpp); on the device the float16 fields widen by __half2float, on the host by
// f16_to_f32 (both exact).
//
// The kernels: lane_dot.cuh's ggml_group_dot (a lane a piece; the sum factored as d * sum(q x) + m * sum(x), as the
// affine codecs' is), gemm.cu (values() rounded to TF32, or for the 32-element types with float16 d and m, d q + m in
// one f16 fma, as the affine codecs), row_ops.cu's embed (values()).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/host_device.h"
#include "cuda/codec_ids.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

namespace seedling::cuda::ggml_dev {

using codec_ids::CodecId;

// The ggml codecs read in pieces (mxfp4_ggml is read as mxfp4: see above).
SEEDLING_HD constexpr bool is_ggml_piece(CodecId c) {
  return c >= CodecId::Q8_0 && c <= CodecId::IQ4_XS;
}
// Elements and bytes of a block, and the alignment its loads need (see the header comment).
SEEDLING_HD constexpr int block_elems(CodecId c) {
  return c == CodecId::Q2_K || c == CodecId::Q3_K || c == CodecId::Q4_K || c == CodecId::Q5_K || c == CodecId::Q6_K ||
                 c == CodecId::IQ4_XS
             ? 256
             : 32;
}
SEEDLING_HD constexpr int block_bytes(CodecId c) {
  switch (c) {
    case CodecId::Q8_0:
      return 34;
    case CodecId::Q4_0:
    case CodecId::IQ4_NL:
      return 18;
    case CodecId::Q5_0:
      return 22;
    case CodecId::Q5_1:
      return 24;
    case CodecId::Q2_K:
      return 84;
    case CodecId::Q3_K:
      return 110;
    case CodecId::Q4_K:
      return 144;
    case CodecId::Q5_K:
      return 176;
    case CodecId::Q6_K:
      return 210;
    case CodecId::IQ4_XS:
      return 136;
    default:
      return 0;
  }
}
SEEDLING_HD constexpr int kAlign(CodecId c) {
  return c == CodecId::Q4_K || c == CodecId::Q5_K     ? 16
         : c == CodecId::Q5_1 || c == CodecId::IQ4_XS ? 8
         : c == CodecId::Q2_K                         ? 4
                                                      : 2;
}
// Whether value_i adds an offset m (else m is 0 and never added).
SEEDLING_HD constexpr bool has_offset(CodecId c) {
  return c == CodecId::Q5_1 || c == CodecId::Q2_K || c == CodecId::Q4_K || c == CodecId::Q5_K;
}

struct Piece {
  float q[8];  // the codes, exact
  float d = 0.0f, m = 0.0f;
};

// Exact float operations, unfused: one rounding each, as ggml_quants.h's (built with -ffp-contract=off).
SEEDLING_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SEEDLING_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
// A code (|q| < 2^22) as a float, exactly: on the device 1.5 * 2^23 + q is an integer add to its bits (the float's
// unit there is 1) and one exact float subtraction, instead of an int-to-float conversion (a quarter of the rate).
SEEDLING_HD float code_value(int q) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(__uint_as_float(0x4B400000u + uint32_t(q)), 12582912.0f);
#else
  return float(q);
#endif
}
SEEDLING_HD float f16_value(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(uint16_t(h & 0xffffu)));
#else
  return f16_to_f32(uint16_t(h & 0xffffu));
#endif
}

// Loads of 2, 4, 8 and 16 bytes at p, which is aligned to the size (see kAlign).
struct alignas(8) Words2 {
  uint32_t w[2];
};
struct alignas(16) Words4 {
  uint32_t w[4];
};
template <typename T>
SEEDLING_HD T load(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
#endif
}
SEEDLING_HD uint32_t load2x16(const uint8_t* p) {  // 4 bytes at a 2-byte aligned p
  return uint32_t(load<uint16_t>(p)) | uint32_t(load<uint16_t>(p + 2)) << 16;
}
// 8 bytes at p (aligned to `align`) into w[0], w[1], byte b of the run in byte b % 4 of w[b / 4].
template <int kAlignOf>
SEEDLING_HD void load8(const uint8_t* p, uint32_t* w) {
  if constexpr (kAlignOf >= 8) {
    const Words2 v = load<Words2>(p);
    w[0] = v.w[0];
    w[1] = v.w[1];
  } else if constexpr (kAlignOf == 4) {
    w[0] = load<uint32_t>(p);
    w[1] = load<uint32_t>(p + 4);
  } else {
    w[0] = load2x16(p);
    w[1] = load2x16(p + 4);
  }
}

// Byte b (0..7) of the two words w[0], w[1].
SEEDLING_HD uint32_t byte_of(const uint32_t* w, int b) {
  return (w[b / 4] >> (8 * (b % 4))) & 0xffu;
}

// IQ4_NL's (and IQ4_XS's) 16 levels, codec/ggml_quants.h's kIq4nlValues (runtime.cpp asserts they are the same),
// and the levels plus 128 as the bytes of two 64-bit words: a level is a shift and a mask of one of them, so the
// device reads no table from memory.
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr uint64_t iq4_levels_word(int first) {
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) t |= uint64_t(kIq4Levels[first + i] + 128) << (8 * i);
  return t;
}
inline constexpr uint64_t kIq4LevelsLo = iq4_levels_word(0), kIq4LevelsHi = iq4_levels_word(8);
SEEDLING_HD int iq4_level(uint32_t nibble) {
  const uint64_t t = (nibble & 8u) != 0 ? kIq4LevelsHi : kIq4LevelsLo;
  return int((t >> (8 * (nibble & 7u))) & 0xffu) - 128;
}

// The words of the piece at element j0 of the block at blk into raw[0..7] (the words a type does not use are left
// alone).
template <CodecId C>
SEEDLING_HD void fetch(const uint8_t* blk, int j0, uint32_t* raw) {
  static_assert(is_ggml_piece(C), "a ggml codec read in pieces");
  if constexpr (C == CodecId::Q8_0) {  // d, 32 int8 codes
    raw[0] = load<uint16_t>(blk);
    load8<2>(blk + 2 + j0, raw + 1);
  } else if constexpr (C == CodecId::Q4_0 || C == CodecId::IQ4_NL) {  // d, 16 nibble bytes
    raw[0] = load<uint16_t>(blk);
    load8<2>(blk + 2 + j0 % 16, raw + 1);
  } else if constexpr (C == CodecId::Q5_0) {  // d, qh (4), 16 nibble bytes
    raw[0] = load<uint16_t>(blk);
    load8<2>(blk + 6 + j0 % 16, raw + 1);
    raw[3] = load2x16(blk + 2);
  } else if constexpr (C == CodecId::Q5_1) {  // d, m, qh (4), 16 nibble bytes
    raw[0] = load<uint32_t>(blk);
    load8<8>(blk + 8 + j0 % 16, raw + 1);
    raw[3] = load<uint32_t>(blk + 4);
  } else if constexpr (C == CodecId::Q2_K) {  // scales (16), qs (64), d, dmin
    raw[0] = load<uint32_t>(blk + 80);
    load8<4>(blk + 16 + (j0 / 128) * 32 + j0 % 32, raw + 1);
    raw[3] = blk[j0 / 16];
  } else if constexpr (C == CodecId::Q3_K) {  // hmask (32), qs (64), scales (12), d
    const int g = j0 / 16;
    raw[0] = load<uint16_t>(blk + 108);
    load8<2>(blk + 32 + (j0 / 128) * 32 + j0 % 32, raw + 1);
    load8<2>(blk + j0 % 32, raw + 3);
    raw[5] = uint32_t(blk[96 + g % 8]) | uint32_t(blk[104 + g % 4]) << 8;
  } else if constexpr (C == CodecId::Q4_K || C == CodecId::Q5_K) {  // d, dmin, scales (12)[, qh (32)], qs (128)
    const Words4 h = load<Words4>(blk);
    raw[0] = h.w[0], raw[1] = h.w[1], raw[2] = h.w[2], raw[3] = h.w[3];
    load8<16>(blk + (C == CodecId::Q4_K ? 16 : 48) + (j0 / 64) * 32 + j0 % 32, raw + 4);
    if constexpr (C == CodecId::Q5_K) load8<16>(blk + 16 + j0 % 32, raw + 6);
  } else if constexpr (C == CodecId::Q6_K) {  // ql (128), qh (64), scales (16), d
    const int half = j0 / 128, r0 = j0 % 128;
    raw[0] = load<uint16_t>(blk + 208) | uint32_t(blk[192 + j0 / 16]) << 16;
    load8<2>(blk + half * 64 + r0 % 64, raw + 1);
    load8<2>(blk + 128 + half * 32 + r0 % 32, raw + 3);
  } else {  // IQ4_XS: d, scales_h, scales_l (4), qs (128: 16 a sub-block of 32)
    const Words2 h = load<Words2>(blk);
    raw[0] = h.w[0], raw[1] = h.w[1];
    load8<8>(blk + 8 + 16 * (j0 / 32) + j0 % 16, raw + 2);
  }
}

// Q4_K's and Q5_K's 6-bit scale and min of sub-block s from the 12 scale bytes in words w0, w1, w2 (ggml_quants.h's
// k_scale_min). No array is indexed by s, so a lane-dependent s keeps every word in registers on the device.
SEEDLING_HD void k_scale_min_words(uint32_t w0, uint32_t w1, uint32_t w2, int s, int& scale, int& min) {
  const int k = 8 * (s & 3);
  const int a = int((w0 >> k) & 0xffu), b = int((w1 >> k) & 0xffu), c = int((w2 >> k) & 0xffu);
  if (s < 4) {
    scale = a & 0x3F;
    min = b & 0x3F;
  } else {
    scale = (c & 0x0F) | ((a >> 2) & 0x30);
    min = (c >> 4) | ((b >> 2) & 0x30);
  }
}
SEEDLING_HD void k_scale_min(const uint32_t* sc, int s, int& scale, int& min) {
  k_scale_min_words(sc[0], sc[1], sc[2], s, scale, min);
}

// The integer code of element j of a 32-element nibble type from its nibble (and for q5_0/q5_1 bit j of qh).
template <CodecId C>
SEEDLING_HD int nibble_code(int nib, uint32_t qh, int j) {
  if constexpr (C == CodecId::Q4_0) {
    return nib - 8;
  } else if constexpr (C == CodecId::IQ4_NL) {
    return iq4_level(uint32_t(nib));
  } else {  // the fifth bit: bit j of qh
    const int five = nib | int((qh >> j) & 1u) << 4;
    return C == CodecId::Q5_0 ? five - 16 : five;
  }
}

// The piece fetch() loaded for element j0.
template <CodecId C>
SEEDLING_HD Piece decode(const uint32_t* raw, int j0) {
  Piece p;
  int q[8];
  if constexpr (C == CodecId::Q8_0) {
    p.d = f16_value(raw[0]);
    for (int i = 0; i < 8; ++i) q[i] = int(int8_t(uint8_t(byte_of(raw + 1, i))));
  } else if constexpr (C == CodecId::Q4_0 || C == CodecId::IQ4_NL || C == CodecId::Q5_0 || C == CodecId::Q5_1) {
    const int shift = j0 >= 16 ? 4 : 0;  // elements 16..31 are the high nibbles
    p.d = f16_value(raw[0]);
    for (int i = 0; i < 8; ++i) q[i] = nibble_code<C>(int((byte_of(raw + 1, i) >> shift) & 0x0Fu), raw[3], j0 + i);
    if constexpr (C == CodecId::Q5_1) p.m = f16_value(raw[0] >> 16);
  } else if constexpr (C == CodecId::Q2_K) {
    const int shift = 2 * ((j0 % 128) / 32);
    const float d = f16_value(raw[0]), dmin = f16_value(raw[0] >> 16);
    p.d = mul_rn(d, code_value(int(raw[3] & 0x0Fu)));
    p.m = -mul_rn(dmin, code_value(int(raw[3] >> 4)));
    for (int i = 0; i < 8; ++i) q[i] = int((byte_of(raw + 1, i) >> shift) & 3u);
  } else if constexpr (C == CodecId::Q3_K) {
    const int g = j0 / 16, shift = 2 * ((j0 % 128) / 32), hbit = j0 / 32;
    const int low = int(g < 8 ? raw[5] & 0x0Fu : (raw[5] >> 4) & 0x0Fu);
    const int high = int((raw[5] >> (8 + 2 * (g / 4))) & 3u);
    p.d = mul_rn(f16_value(raw[0]), code_value((low | high << 4) - 32));
    for (int i = 0; i < 8; ++i) {
      const int h = int((byte_of(raw + 3, i) >> hbit) & 1u);
      q[i] = int((byte_of(raw + 1, i) >> shift) & 3u) - (h == 0 ? 4 : 0);
    }
  } else if constexpr (C == CodecId::Q4_K || C == CodecId::Q5_K) {
    int scale = 0, min = 0;
    k_scale_min(raw + 1, j0 / 32, scale, min);
    p.d = mul_rn(f16_value(raw[0]), code_value(scale));
    p.m = -mul_rn(f16_value(raw[0] >> 16), code_value(min));
    const int shift = 4 * ((j0 / 32) % 2);
    for (int i = 0; i < 8; ++i) {
      q[i] = int((byte_of(raw + 4, i) >> shift) & 0x0Fu);
      if constexpr (C == CodecId::Q5_K) q[i] |= int((byte_of(raw + 6, i) >> (j0 / 32)) & 1u) << 4;
    }
  } else if constexpr (C == CodecId::Q6_K) {
    const int r0 = j0 % 128, lshift = 4 * (r0 / 64), hshift = 2 * (r0 / 32);
    p.d = mul_rn(f16_value(raw[0]), code_value(int(int8_t(uint8_t(raw[0] >> 16)))));
    for (int i = 0; i < 8; ++i) {
      const int low = int((byte_of(raw + 1, i) >> lshift) & 0x0Fu), high = int((byte_of(raw + 3, i) >> hshift) & 3u);
      q[i] = (low | high << 4) - 32;
    }
  } else {  // IQ4_XS
    const int s = j0 / 32, shift = j0 % 32 >= 16 ? 4 : 0;
    const int low = int((byte_of(raw + 1, s / 2) >> (4 * (s % 2))) & 0x0Fu);
    const int high = int((raw[0] >> (16 + 2 * s)) & 3u);
    p.d = mul_rn(f16_value(raw[0]), code_value((low | high << 4) - 32));
    for (int i = 0; i < 8; ++i) q[i] = iq4_level((byte_of(raw + 2, i) >> shift) & 0x0Fu);
  }
  for (int i = 0; i < 8; ++i) p.q[i] = code_value(q[i]);
  return p;
}

// Q6_K read in runs (lane_dot.cuh's q6k_group_dot_shaped): 8 lanes share a block; lane t takes half n = t / 4 of the
// block and positions l0 = 8 (t % 4) .. l0 + 7 of it, which hold 8 elements of each of 4 groups g: elements
// 128 n + 32 g + l0 .. + 7, group g's codes from ql's low (g = 0, 1) or high (g = 2, 3) nibbles of bytes
// 64 n + 32 (g % 2) + l .. and qh's bits 2g, 2g + 1 of bytes 32 n + l; its scale is scales[8 n + l0 / 16 + 2 g].
// q6k_run_fetch loads the lane's bytes (rows are only 2-byte aligned: 210-byte blocks) into raw[0..8]: ql's two
// 8-byte runs, qh's one, the 8 scale bytes of its half, d.
SEEDLING_HD void q6k_run_fetch(const uint8_t* blk, int t, uint32_t* raw) {
  const int n = t / 4, l0 = 8 * (t % 4);
  load8<2>(blk + 64 * n + l0, raw);
  load8<2>(blk + 64 * n + 32 + l0, raw + 2);
  load8<2>(blk + 128 + 32 * n + l0, raw + 4);
  load8<2>(blk + 192 + 8 * n, raw + 6);
  raw[8] = load<uint16_t>(blk + 208);
}
// Group g (0..3) of the lane's fetched words as a Piece: its 8 codes, d = d_block * scale.
SEEDLING_HD Piece q6k_run_decode(const uint32_t* raw, int t, int g) {
  Piece p;
  const int l0 = 8 * (t % 4), nib = 4 * (g / 2);
  const uint32_t* ql = raw + 2 * (g % 2);
  p.d = mul_rn(f16_value(raw[8]), code_value(int(int8_t(uint8_t(byte_of(raw + 6, l0 / 16 + 2 * g))))));
  for (int i = 0; i < 8; ++i) {
    const int low = int((byte_of(ql, i) >> nib) & 0x0Fu), high = int((byte_of(raw + 4, i) >> (2 * g)) & 3u);
    p.q[i] = code_value((low | high << 4) - 32);
  }
  return p;
}

// Pair pieces of the 32-element nibble types (q4_0, iq4_nl, q5_0, q5_1), whose 16 code bytes hold element j in the
// low nibble of byte j and element 16 + j in the high one, as q4_g32's codes (codec.h): pair piece w (0..3) is
// elements 4w .. 4w + 3 (q[0..3]) and 16 + 4w .. 16 + 4w + 3 (q[4..7]), both nibbles of code bytes 4w .. 4w + 3, so a
// piece loads 4 code bytes where a piece of 8 consecutive elements loads 8 and uses half of each. gemm.cu's tiles
// place a piece's values as two runs of 4, lane_dot.cuh's ggml_group_dot reads the two runs of x. pair_fetch loads
// them as fetch() does, pair_decode unpacks them.
SEEDLING_HD constexpr bool has_pair_pieces(CodecId c) {
  return c == CodecId::Q4_0 || c == CodecId::IQ4_NL || c == CodecId::Q5_0 || c == CodecId::Q5_1;
}
template <CodecId C>
SEEDLING_HD void pair_fetch(const uint8_t* blk, int w, uint32_t* raw) {
  static_assert(has_pair_pieces(C), "a 32-element nibble type");
  if constexpr (C == CodecId::Q5_1) {  // d, m, qh (4), 16 nibble bytes
    raw[0] = load<uint32_t>(blk);
    raw[1] = load<uint32_t>(blk + 8 + 4 * w);
    raw[3] = load<uint32_t>(blk + 4);
  } else {
    raw[0] = load<uint16_t>(blk);
    raw[1] = load2x16(blk + (C == CodecId::Q5_0 ? 6 : 2) + 4 * w);
    if constexpr (C == CodecId::Q5_0) raw[3] = load2x16(blk + 2);
  }
}
template <CodecId C>
SEEDLING_HD Piece pair_decode(const uint32_t* raw, int w) {
  Piece p;
  p.d = f16_value(raw[0]);
  if constexpr (C == CodecId::Q5_1) p.m = f16_value(raw[0] >> 16);
  for (int i = 0; i < 4; ++i) {
    const uint32_t b = byte_of(raw + 1, i);
    p.q[i] = code_value(nibble_code<C>(int(b & 0x0Fu), raw[3], 4 * w + i));
    p.q[4 + i] = code_value(nibble_code<C>(int(b >> 4), raw[3], 16 + 4 * w + i));
  }
  return p;
}

// The piece's values, as ggml_quants.h computes them: d * q rounded, then + m rounded where the type has an offset.
template <CodecId C>
SEEDLING_HD void values(const Piece& p, float (&v)[8]) {
  for (int i = 0; i < 8; ++i) v[i] = has_offset(C) ? add_rn(mul_rn(p.d, p.q[i]), p.m) : mul_rn(p.d, p.q[i]);
}

}  // namespace seedling::cuda::ggml_dev
