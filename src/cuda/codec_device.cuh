// cuda/codec_device.cuh - the device side of codec.h's widening, shared by every CUDA translation unit that reads
// stored weights (lane_dot.cuh, gemm.cu): a codec's unit, its row size, and the exact widening of a unit to float.
//
// Invariant: load_unit gives the very floats codec_value (codec/codec.h) gives: affine values are d * q then + m in
// float, unfused; f16/bf16 widen exactly; FP8 values are the exact e4m3 value times d, one float multiply. Kernels may
// round these floats further (gemm.cu rounds to TF32) but only after this widening, so every kernel starts from the
// same weights as the CPU reference. The seed codecs (p3, p4, s3) have no units or row size: a matrix is one slice
// blob, a row is found by row_at (a SeedRow: the blob and the row's first block) and its blocks decode with
// seed_device.cuh, bit for bit decode_seed_matrix's weights; only the kernels that dispatch with dispatch_codec<true>
// read them (lane_dot.cuh's CUDA-core products, gemm.cu's mma kernel, seeds.cu). The ggml codecs (q8_0 .. iq4_xs) are
// read in pieces of 8 elements (ggml_pieces.h: fetch, decode, and values, codec_value's floats bit for bit);
// mxfp4_ggml's rows are put in mxfp4's VRAM form at upload, after which mxfp4's kernels read them (dispatch_codec gives
// them mxfp4's).
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/codec_ids.h"
#include "cuda/ggml_pieces.h"
#include "cuda/kernels.h"
#include "cuda/mxfp4_layout.h"
#include "cuda/seed_device.cuh"

namespace seedling::cuda {

using namespace codec_ids;  // the codec numbers (codec_ids.h mirrors core/codec_layout.h)
using Id = CodecId;

__device__ __forceinline__ float f16_bits(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf16_bits(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}

// A codec's unit: G consecutive elements of a row that one lane widens at once; for the ggml codecs (this primary
// template) a block, of which a lane reads one piece of 8 (ggml_pieces.h).
template <CodecId C>
struct Unit {
  static_assert(ggml_dev::is_ggml_piece(C), "a codec without units");
  static constexpr int G = ggml_dev::block_elems(C), bytes = ggml_dev::block_bytes(C);
};
template <>
struct Unit<Id::F32> {
  static constexpr int G = 4, bytes = 16;
};
template <>
struct Unit<Id::F16> {
  static constexpr int G = 8, bytes = 16;
};
template <>
struct Unit<Id::BF16> {
  static constexpr int G = 8, bytes = 16;
};
template <>
struct Unit<Id::Q8_G32> {
  static constexpr int G = 32, bytes = kQ8G32Bytes;
};
template <>
struct Unit<Id::Q8_G64> {
  static constexpr int G = 64, bytes = kQ8G64Bytes;
};
template <>
struct Unit<Id::Q4_G32> {
  static constexpr int G = 32, bytes = kQ4G32Bytes;
};
template <>
struct Unit<Id::Q4_G64> {
  static constexpr int G = 64, bytes = kQ4G64Bytes;
};
template <>
struct Unit<Id::MXFP4> {
  static constexpr int G = 32, bytes = kMxfp4Bytes;
};
template <>
struct Unit<Id::FP8_G32> {
  static constexpr int G = 32, bytes = kFp8G32Bytes;
};

// MXFP4's values are widened where they are multiplied (lane_dot.cuh's mxfp4_group_dot), not by load_unit.
// An e8m0 scale byte as the float 2^(e - 127), exactly: e << 23 for e > 0, the subnormal 2^-127 (0x00400000, which
// every e << 23 with e > 0 exceeds) for e = 0; e = 255 is refused at load.
__device__ __forceinline__ float e8m0_scale(uint32_t e) {
  return __uint_as_float(max(e << 23, 0x00400000u));
}
// Scale byte J of the word s (four consecutive scales of mxfp4_layout.h) as e8m0_scale gives it, the byte shifted
// straight into the float's exponent field.
template <int J>
__device__ __forceinline__ float e8m0_scale_byte(uint32_t s) {
  const uint32_t bits = J < 3 ? (s << (23 - 8 * J)) & 0x7F800000u : (s >> 1) & 0x7F800000u;
  return __uint_as_float(max(bits, 0x00400000u));
}

// A lane's codes of two blocks (w: block A's in the low 16 bits, code j in nibble j; block B's in the high 16 bits) as
// their values times 2^-14, exactly (codec_ids.h's fp4x8_f16_bits, then fp16 -> float, which is exact). The caller
// scales the sum of these times x by kFp4Unscale.
__device__ __forceinline__ void fp4x8_times_2m14(uint32_t w, float (&qa)[4], float (&qb)[4]) {
  uint32_t h[4] = {};
  fp4x8_f16_bits(w, h);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    __half2 p;
    memcpy(&p, &h[j], sizeof(p));
    const float2 f = __half22float2(p);
    qa[j] = f.x;
    qb[j] = f.y;
  }
}

// Four FP8 e4m3 codes (byte j of w: element j) as their values times 2^-8, exactly (codec_ids.h's e4m3x2_f16_bits, then
// fp16 -> float, which is exact). Times kE4m3Unscale (exact) they are codec.h's kE4m3Values.
__device__ __forceinline__ void e4m3x4_times_2m8(uint32_t w, float (&q)[4]) {
  const uint32_t lo = e4m3x2_f16_bits<false>(w), hi = e4m3x2_f16_bits<true>(w);
  __half2 a, b;
  memcpy(&a, &lo, sizeof(a));
  memcpy(&b, &hi, sizeof(b));
  const float2 fa = __half22float2(a), fb = __half22float2(b);
  q[0] = fa.x, q[1] = fa.y, q[2] = fb.x, q[3] = fb.y;
}
// An FP8 weight as codec_value gives it: its code's exact value (q: times 2^-8, as e4m3x4_times_2m8 gives it) times
// the group's scale d, one float multiply.
__device__ __forceinline__ float fp8_value(float q, float d) {
  return __fmul_rn(__fmul_rn(q, kE4m3Unscale), d);
}
// The four FP8 weights of code word w (byte j: element j) of a group with scale d, into out[0..3].
__device__ __forceinline__ void widen_fp8_word(uint32_t w, float d, float* out) {
  float q[4];
  e4m3x4_times_2m8(w, q);
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = fp8_value(q[j], d);
}

// Widens one 32-bit code word of an affine unit (d, m: the unit's scale and offset), unfused as codec_value:
// 8-bit codes give its 4 bytes' elements into lo[0..3]; 4-bit codes give the low nibbles' elements into lo[0..3]
// and the high nibbles' (the elements G / 2 further on) into hi[0..3].
template <CodecId C>
__device__ __forceinline__ void widen_word(uint32_t q, float d, float m, float* lo, float* hi) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const uint32_t byte = (q >> (8 * b)) & 0xffu;
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
      lo[b] = __fadd_rn(__fmul_rn(d, float(byte)), m);
    } else {
      lo[b] = __fadd_rn(__fmul_rn(d, float(byte & 0x0fu)), m);
      hi[b] = __fadd_rn(__fmul_rn(d, float(byte >> 4)), m);
    }
  }
}

// An affine unit's scale d and offset m, from its first word (two f16).
__device__ __forceinline__ void unit_scale(uint32_t dm, float& d, float& m) {
  d = f16_bits(uint16_t(dm & 0xffffu));
  m = f16_bits(uint16_t(dm >> 16));
}

// Widens unit u of a row into w[G], exactly as codec_value (codec.h): affine values are d * q then + m, in float,
// unfused (__fmul_rn/__fadd_rn keep nvcc from contracting them). Float units may run past the row's end: only
// elements below `valid` are read.
template <CodecId C>
__device__ __forceinline__ void load_unit(const uint8_t* row, int64_t u, int valid, float* w) {
  static_assert(C != Id::MXFP4, "MXFP4 is widened in lane_dot.cuh's mxfp4_group_dot");
  static_assert(!ggml_dev::is_ggml_piece(C), "the ggml codecs widen in pieces (ggml_pieces.h)");
  constexpr int G = Unit<C>::G;
  if constexpr (C == Id::F32) {
    const float* p = reinterpret_cast<const float*>(row) + u * G;
#pragma unroll
    for (int j = 0; j < G; ++j) w[j] = j < valid ? p[j] : 0.0f;
  } else if constexpr (C == Id::F16 || C == Id::BF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * G;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const uint16_t h = j < valid ? p[j] : uint16_t(0);
      w[j] = C == Id::BF16 ? bf16_bits(h) : f16_bits(h);
    }
  } else if constexpr (C == Id::FP8_G32) {  // kE4m3Values[code] * d: an exact widening, then one float multiply
    const uint32_t* p = reinterpret_cast<const uint32_t*>(row + u * Unit<C>::bytes);
    const float d = __uint_as_float(p[0]);
#pragma unroll
    for (int wd = 0; wd < G / 4; ++wd) widen_fp8_word(p[1 + wd], d, w + 4 * wd);
  } else {
    // Blocks are 36, 68, 20 or 36 bytes: every block starts 4-byte aligned, so it is read as 32-bit words.
    const uint32_t* p = reinterpret_cast<const uint32_t*>(row + u * Unit<C>::bytes);
    float d, m;
    unit_scale(p[0], d, m);
    if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
#pragma unroll
      for (int wd = 0; wd < G / 4; ++wd) widen_word<C>(p[1 + wd], d, m, w + wd * 4, nullptr);
    } else {
#pragma unroll
      for (int wd = 0; wd < G / 8; ++wd) widen_word<C>(p[1 + wd], d, m, w + wd * 4, w + G / 2 + wd * 4);
    }
  }
}

// Element k of a row, exactly as codec_value (codec.h): one element found from its block alone, for kernels that
// read a matrix down its columns (mla.cu's absorbed query). The float, affine, FP8 and ggml codecs (the ggml ones
// decode the element's piece of 8, ggml_pieces.h).
template <CodecId C>
__device__ __forceinline__ float load_element(const uint8_t* row, int64_t k) {
  if constexpr (ggml_dev::is_ggml_piece(C)) {
    constexpr int G = Unit<C>::G;
    const int j = int(k % G), j0 = j & ~7;
    uint32_t raw[8] = {};
    ggml_dev::fetch<C>(row + size_t(k / G) * Unit<C>::bytes, j0, raw);
    float v[8];
    ggml_dev::values<C>(ggml_dev::decode<C>(raw, j0), v);
    return v[j - j0];
  } else if constexpr (C == Id::F32) {
    return reinterpret_cast<const float*>(row)[k];
  } else if constexpr (C == Id::F16 || C == Id::BF16) {
    const uint16_t h = reinterpret_cast<const uint16_t*>(row)[k];
    return C == Id::BF16 ? bf16_bits(h) : f16_bits(h);
  } else {
    static_assert(C == Id::FP8_G32 || C == Id::Q8_G32 || C == Id::Q8_G64 || C == Id::Q4_G32 || C == Id::Q4_G64,
                  "load_element reads the float, affine and FP8 codecs");
    constexpr int G = Unit<C>::G;
    const uint8_t* blk = row + size_t(k / G) * Unit<C>::bytes;
    const int j = int(k % G);
    if constexpr (C == Id::FP8_G32) {
      const float d = __uint_as_float(*reinterpret_cast<const uint32_t*>(blk));
      return fp8_value(f16_bits(uint16_t(e4m3_f16_bits(blk[4 + j]))), d);
    } else {
      float d, m;
      unit_scale(*reinterpret_cast<const uint32_t*>(blk), d, m);
      uint32_t q = 0;
      if constexpr (C == Id::Q8_G32 || C == Id::Q8_G64) {
        q = blk[4 + j];
      } else {
        q = j < G / 2 ? blk[4 + j] & 0x0fu : blk[4 + j - G / 2] >> 4;
      }
      return __fadd_rn(__fmul_rn(d, float(q)), m);
    }
  }
}

__host__ __device__ constexpr bool is_affine(CodecId c) {
  return c == Id::Q8_G32 || c == Id::Q8_G64 || c == Id::Q4_G32 || c == Id::Q4_G64;
}
__host__ __device__ constexpr bool is_float(CodecId c) {
  return c == Id::F32 || c == Id::F16 || c == Id::BF16;
}
__host__ __device__ constexpr bool is_seed(CodecId c) {
  return c == Id::P3 || c == Id::P4 || c == Id::S3;
}
// The ggml codecs read in pieces (mxfp4_ggml is read as mxfp4).
__host__ __device__ constexpr bool is_ggml(CodecId c) {
  return ggml_dev::is_ggml_piece(c);
}
__host__ __device__ constexpr seeddev::Geom seed_geom(CodecId c) {
  return c == Id::P3 ? seeddev::kP3 : c == Id::P4 ? seeddev::kP4 : seeddev::kS3;
}

// Bytes of one row in VRAM (as stored, but MXFP4's in mxfp4_layout.h's layout); 0 for the seed codecs, whose rows are
// not contiguous (row_at finds them).
template <CodecId C>
__host__ __device__ __forceinline__ size_t row_bytes_of(int64_t cols) {
  if constexpr (is_seed(C)) {
    return 0;
  } else {
    constexpr int G = Unit<C>::G;
    if constexpr (C == Id::F32) return size_t(cols) * 4;
    if constexpr (C == Id::F16 || C == Id::BF16) return size_t(cols) * 2;
    if constexpr (C == Id::MXFP4) return mxfp4::row_bytes(cols);  // the device layout (mxfp4_layout.h)
    return size_t((cols + G - 1) / G) * Unit<C>::bytes;
  }
}

// Row r of a seed slice: the slice's blob (its exp_bias), its block count, and the row's first block.
struct SeedRow {
  const uint8_t* blob;
  int64_t n_blocks;
  int64_t first;
};
// What a kernel holds for one weight row: its first byte, or for a seed matrix a SeedRow.
template <CodecId C>
using WRow = std::conditional_t<is_seed(C), SeedRow, const uint8_t*>;

// Row r of a rows x cols matrix stored at `m` in codec C.
template <CodecId C>
__host__ __device__ __forceinline__ WRow<C> row_at(const uint8_t* m, int64_t rows, int64_t cols, int64_t r) {
  if constexpr (is_seed(C)) {
    const int64_t per_row = (cols + seed_geom(C).C - 1) / seed_geom(C).C;
    return SeedRow{m, rows * per_row, r * per_row};
  } else {
    return m + size_t(r) * row_bytes_of<C>(cols);
  }
}

// A seed matrix's fields are read as int32 and uint16: its blob must start 4-byte aligned (cudaMalloc's is). A ggml
// matrix's blocks are read with loads as wide as their alignment (ggml_pieces.h's kAlign, up to 16 bytes): it must
// start that aligned (cudaMalloc's does).
inline void check_weight_alignment(Codec c, const void* data) {
  const Id id = Id(uint8_t(c));
  const uintptr_t at = reinterpret_cast<uintptr_t>(data);
  check(!is_seed(id) || at % 4 == 0 ? cudaSuccess : cudaErrorMisalignedAddress,
        "a seed matrix (its blob must start 4-byte aligned)");
  check(!is_ggml(id) || at % uintptr_t(ggml_dev::kAlign(id)) == 0 ? cudaSuccess : cudaErrorMisalignedAddress,
        "a ggml matrix (it must start aligned to 16 bytes for q4_k and q5_k, 8 for q5_1 and iq4_xs, 4 for q2_k, 2 "
        "for the others)");
}

// lfsr.h's stream tables in device memory (read through the L1 cache: each lane looks up its own seed).
__device__ const seed::LfsrStreamTables kDeviceStreamTables = seed::make_lfsr_stream_tables();

// Calls f with the codec as a compile-time constant; the seed codecs only with Seeds and MXFP4 only with Mxfp4
// (kernels that read them: the CUDA-core products do, the tensor-core GEMMs and embed do not).
// mxfp4_ggml calls f with MXFP4: its VRAM form is mxfp4's (device_layout.h).
template <bool Seeds = false, bool Mxfp4 = false, typename F>
void dispatch_codec(Codec c, F&& f) {
  if constexpr (Mxfp4) {
    if (Id(uint8_t(c)) == Id::MXFP4 || Id(uint8_t(c)) == Id::MXFP4_GGML) return f.template operator()<Id::MXFP4>();
  }
  if constexpr (Seeds) {
    switch (Id(uint8_t(c))) {
      case Id::P3:
        return f.template operator()<Id::P3>();
      case Id::P4:
        return f.template operator()<Id::P4>();
      case Id::S3:
        return f.template operator()<Id::S3>();
      default:
        break;
    }
  }
  switch (Id(uint8_t(c))) {
    case Id::F32:
      return f.template operator()<Id::F32>();
    case Id::F16:
      return f.template operator()<Id::F16>();
    case Id::BF16:
      return f.template operator()<Id::BF16>();
    case Id::Q8_G32:
      return f.template operator()<Id::Q8_G32>();
    case Id::Q8_G64:
      return f.template operator()<Id::Q8_G64>();
    case Id::Q4_G32:
      return f.template operator()<Id::Q4_G32>();
    case Id::Q4_G64:
      return f.template operator()<Id::Q4_G64>();
    case Id::FP8_G32:
      return f.template operator()<Id::FP8_G32>();
    case Id::Q8_0:
      return f.template operator()<Id::Q8_0>();
    case Id::Q4_0:
      return f.template operator()<Id::Q4_0>();
    case Id::Q5_0:
      return f.template operator()<Id::Q5_0>();
    case Id::Q5_1:
      return f.template operator()<Id::Q5_1>();
    case Id::Q2_K:
      return f.template operator()<Id::Q2_K>();
    case Id::Q3_K:
      return f.template operator()<Id::Q3_K>();
    case Id::Q4_K:
      return f.template operator()<Id::Q4_K>();
    case Id::Q5_K:
      return f.template operator()<Id::Q5_K>();
    case Id::Q6_K:
      return f.template operator()<Id::Q6_K>();
    case Id::IQ4_NL:
      return f.template operator()<Id::IQ4_NL>();
    case Id::IQ4_XS:
      return f.template operator()<Id::IQ4_XS>();
    default:
      break;
  }
  check(cudaErrorInvalidValue,
        is_seed(Id(uint8_t(c))) ? "a kernel for a seed codec (p3, p4, s3) here: the matmul, matvec, expert kernels and "
                                  "tensor-core GEMMs read them, embed does not"
        : Id(uint8_t(c)) == Id::MXFP4 || Id(uint8_t(c)) == Id::MXFP4_GGML
            ? "a kernel for mxfp4 or mxfp4_ggml here: the matmul, matvec and expert kernels read them, the tensor-core "
              "GEMMs and embed do not"
            : "a kernel for this codec (fp8_g32 has none yet)");
}

}  // namespace seedling::cuda
