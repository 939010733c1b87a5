// ops/ggml_decode-inl.h - ggml's quant blocks (codec/ggml_quants.h) widened to float vectors, for the kernels of
// ops/matmul_fast.cpp (Highway: included once per SIMD target, inside its namespace, as Highway's -inl headers are).
//
// GgmlRow<T> reads a stored row front to back, L weights at a time (L = the float vector's lanes, at most 16 and
// dividing 16, so a chunk never straddles a sub-block of 16). At each block's first chunk it computes the block's
// sub-block scales and mins with the reference's own expressions (codec/ggml_quants.h); each chunk then unpacks
// its codes in int32 lanes and applies the same float32 operations in the same order as the reference, so every
// weight is the reference's bit for bit (ggml_codec_test.cpp checks this on every SIMD target). The Plain variant
// reads each weight through the reference itself: slower, the same bits.

// Per-target include guard (Highway's convention: toggled by foreach_target.h).
#if defined(SEEDLING_OPS_GGML_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEEDLING_OPS_GGML_DECODE_INL_H_
#undef SEEDLING_OPS_GGML_DECODE_INL_H_
#else
#define SEEDLING_OPS_GGML_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include "codec/ggml_quants.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace ggml_simd {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;

// A block's per-sub-block factors as the reference computes them: the scale d (times the sub-block's scale), and
// for the types with one, the min or offset m.
struct BlockScales {
  float d[16];
  float m[16];
};

template <Codec T>
HWY_INLINE void Scales(const uint8_t* b, BlockScales& s) {
  using namespace ggml;
  if constexpr (T == Codec::Q5_1) {
    s.d[0] = f16_at(b);
    s.m[0] = f16_at(b + offsetof(BlockQ5_1, m));
  } else if constexpr (T == Codec::MXFP4_GGML) {
    s.d[0] = e8m0_half(b[0]);
  } else if constexpr (T == Codec::Q2_K) {
    const float d = f16_at(b + offsetof(BlockQ2_K, d)), dmin = f16_at(b + offsetof(BlockQ2_K, dmin));
    for (int i = 0; i < 16; ++i) {
      const uint8_t sc = b[offsetof(BlockQ2_K, scales) + size_t(i)];
      s.d[i] = d * float(sc & 0x0F);
      s.m[i] = dmin * float(sc >> 4);
    }
  } else if constexpr (T == Codec::Q3_K) {
    const float d = f16_at(b + offsetof(BlockQ3_K, d));
    for (int i = 0; i < 16; ++i) s.d[i] = d * float(q3_k_scale(b + offsetof(BlockQ3_K, scales), i));
  } else if constexpr (T == Codec::Q4_K || T == Codec::Q5_K) {
    static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));
    const float d = f16_at(b), dmin = f16_at(b + offsetof(BlockQ4_K, dmin));
    for (int i = 0; i < 8; ++i) {
      int scale, min;
      k_scale_min(b + offsetof(BlockQ4_K, scales), i, scale, min);
      s.d[i] = d * float(scale);
      s.m[i] = dmin * float(min);
    }
  } else if constexpr (T == Codec::Q6_K) {
    const float d = f16_at(b + offsetof(BlockQ6_K, d));
    for (int i = 0; i < 16; ++i) s.d[i] = d * float(int8_t(b[offsetof(BlockQ6_K, scales) + size_t(i)]));
  } else if constexpr (T == Codec::IQ4_XS) {
    const float d = f16_at(b);
    for (int i = 0; i < 8; ++i) s.d[i] = d * float(iq4_xs_scale(b, i));
  } else {  // Q8_0, Q4_0, Q5_0, IQ4_NL: d first
    s.d[0] = f16_at(b);
  }
}

// L bytes from p in int32 lanes.
HWY_INLINE VI Bytes(DI di, const uint8_t* p) {
  return hn::PromoteTo(di, hn::LoadU(hn::Rebind<uint8_t, DI>(), p));
}
// The 4-bit codes of elements j..j+L-1 of a 32-element nibble run (ggml::nibble32).
HWY_INLINE VI Nibbles32(DI di, const uint8_t* qs, int j) {
  const VI bytes = Bytes(di, qs + (j & 15));
  return j < 16 ? hn::And(bytes, hn::Set(di, 0x0F)) : hn::ShiftRight<4>(bytes);
}
// (bytes >> shift) & mask, the shift the same in every lane.
HWY_INLINE VI Field(DI di, const uint8_t* p, int shift, int mask) {
  return hn::And(hn::ShiftRightSame(Bytes(di, p), shift), hn::Set(di, mask));
}
// table[q] for q in [0, 16): one lookup per L entries of the table, each kept where q falls in its part.
HWY_INLINE VI Lookup16(DI di, const int32_t* table, VI q) {
  const int L = int(hn::Lanes(di));
  const auto index = hn::IndicesFromVec(di, hn::And(q, hn::Set(di, L - 1)));
  const VI part_of_q = hn::And(q, hn::Set(di, ~(L - 1)));
  VI r = hn::Zero(di);
  for (int p = 0; p < 16; p += L) {
    r = hn::IfThenElse(hn::Eq(part_of_q, hn::Set(di, p)), hn::TableLookupLanes(hn::LoadU(di, table + p), index), r);
  }
  return r;
}

struct Tables {
  int32_t iq4nl[16], mxfp4[16], bit[32];
  constexpr Tables() : iq4nl(), mxfp4(), bit() {
    for (int i = 0; i < 16; ++i) {
      iq4nl[i] = ggml::kIq4nlValues[i];
      mxfp4[i] = ggml::kMxfp4Doubled[i];
    }
    for (int i = 0; i < 32; ++i) bit[i] = int32_t(uint32_t(1) << i);
  }
};
inline constexpr Tables kTables{};

// Weights j..j+L-1 of block b, given its scales.
template <Codec T>
HWY_INLINE VF Chunk(DF df, const uint8_t* b, const BlockScales& s, int j) {
  const DI di;
  if constexpr (T == Codec::Q8_0) {
    const VI q = hn::PromoteTo(di, hn::LoadU(hn::Rebind<int8_t, DI>(), reinterpret_cast<const int8_t*>(b + 2 + j)));
    return hn::Mul(hn::ConvertTo(df, q), hn::Set(df, s.d[0]));
  } else if constexpr (T == Codec::Q4_0) {
    const VI q = hn::Sub(Nibbles32(di, b + offsetof(BlockQ4_0, qs), j), hn::Set(di, 8));
    return hn::Mul(hn::Set(df, s.d[0]), hn::ConvertTo(df, q));
  } else if constexpr (T == Codec::Q5_0 || T == Codec::Q5_1) {
    constexpr size_t qh = T == Codec::Q5_0 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh);
    constexpr size_t qs = T == Codec::Q5_0 ? offsetof(BlockQ5_0, qs) : offsetof(BlockQ5_1, qs);
    uint32_t h;
    std::memcpy(&h, b + qh, 4);
    const auto set = hn::Ne(hn::And(hn::Set(di, int32_t(h)), hn::LoadU(di, kTables.bit + j)), hn::Zero(di));
    const VI q = hn::Or(Nibbles32(di, b + qs, j), hn::IfThenElseZero(set, hn::Set(di, 16)));
    if constexpr (T == Codec::Q5_0) {
      return hn::Mul(hn::Set(df, s.d[0]), hn::ConvertTo(df, hn::Sub(q, hn::Set(di, 16))));
    } else {
      return hn::Add(hn::Mul(hn::Set(df, s.d[0]), hn::ConvertTo(df, q)), hn::Set(df, s.m[0]));
    }
  } else if constexpr (T == Codec::Q2_K || T == Codec::Q3_K) {
    constexpr size_t qs = T == Codec::Q2_K ? offsetof(BlockQ2_K, qs) : offsetof(BlockQ3_K, qs);
    VI q = Field(di, b + qs + size_t((j / 128) * 32 + j % 32), 2 * ((j % 128) / 32), 3);
    const int sub = j / 16;
    if constexpr (T == Codec::Q2_K) {
      return hn::Sub(hn::Mul(hn::Set(df, s.d[sub]), hn::ConvertTo(df, q)), hn::Set(df, s.m[sub]));
    } else {
      const VI high = Field(di, b + offsetof(BlockQ3_K, hmask) + size_t(j % 32), j / 32, 1);
      q = hn::Sub(q, hn::ShiftLeft<2>(hn::Xor(high, hn::Set(di, 1))));  // minus 4 where the hmask bit is clear
      return hn::Mul(hn::Set(df, s.d[sub]), hn::ConvertTo(df, q));
    }
  } else if constexpr (T == Codec::Q4_K || T == Codec::Q5_K) {
    constexpr size_t qs = T == Codec::Q4_K ? offsetof(BlockQ4_K, qs) : offsetof(BlockQ5_K, qs);
    VI q = Field(di, b + qs + size_t((j / 64) * 32 + j % 32), 4 * ((j / 32) % 2), 0x0F);
    if constexpr (T == Codec::Q5_K) {
      q = hn::Or(q, hn::ShiftLeft<4>(Field(di, b + offsetof(BlockQ5_K, qh) + size_t(j % 32), j / 32, 1)));
    }
    const int sub = j / 32;
    return hn::Sub(hn::Mul(hn::Set(df, s.d[sub]), hn::ConvertTo(df, q)), hn::Set(df, s.m[sub]));
  } else if constexpr (T == Codec::Q6_K) {
    const int half = j / 128, r = j % 128;
    const VI low = Field(di, b + offsetof(BlockQ6_K, ql) + size_t(half * 64 + r % 64), 4 * (r / 64), 0x0F);
    const VI high = Field(di, b + offsetof(BlockQ6_K, qh) + size_t(half * 32 + r % 32), 2 * (r / 32), 3);
    const VI q = hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(di, 32));
    return hn::Mul(hn::Set(df, s.d[j / 16]), hn::ConvertTo(df, q));
  } else if constexpr (T == Codec::IQ4_NL) {
    const VI v = Lookup16(di, kTables.iq4nl, Nibbles32(di, b + offsetof(BlockIq4Nl, qs), j));
    return hn::Mul(hn::Set(df, s.d[0]), hn::ConvertTo(df, v));
  } else if constexpr (T == Codec::IQ4_XS) {
    const int sub = j / 32;
    const VI q = Nibbles32(di, b + offsetof(BlockIq4Xs, qs) + size_t(16 * sub), j % 32);
    return hn::Mul(hn::Set(df, s.d[sub]), hn::ConvertTo(df, Lookup16(di, kTables.iq4nl, q)));
  } else {
    static_assert(T == Codec::MXFP4_GGML);
    const VI v = Lookup16(di, kTables.mxfp4, Nibbles32(di, b + offsetof(BlockMxfp4Ggml, qs), j));
    return hn::Mul(hn::Set(df, s.d[0]), hn::ConvertTo(df, v));
  }
}

}  // namespace ggml_simd

// One stored row of ggml codec T read front to back, L weights at a time (k = 0, L, 2L, ...), each weight the
// reference's; kPlain reads each through codec/ggml_quants.h itself.
template <Codec T, bool kPlain>
struct GgmlRow {
  static constexpr Codec kCodec = T;
  static constexpr int64_t kGroup = codec_group(T);
  const uint8_t* row = nullptr;
  const uint8_t* block = nullptr;
  ggml_simd::BlockScales scales{};

  HWY_INLINE ggml_simd::VF Load(ggml_simd::DF df, int64_t k) {
    const int j = int(k % kGroup);
    if (j == 0) {
      block = row + size_t(k / kGroup) * codec_block_bytes(T);
      if constexpr (!kPlain) ggml_simd::Scales<T>(block, scales);
    }
    if constexpr (kPlain) {
      HWY_ALIGN float w[16];
      for (size_t l = 0; l < hn::Lanes(df); ++l) w[l] = ggml::ggml_value(T, block, j + int(l));
      return hn::Load(df, w);
    } else {
      return ggml_simd::Chunk<T>(df, block, scales, j);
    }
  }
};

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SEEDLING_OPS_GGML_DECODE_INL_H_
