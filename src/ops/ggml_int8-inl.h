// ops/ggml_int8-inl.h - ggml's quant blocks (codec/ggml_quants.h) as int8 code vectors, and the integer dot
// products of ops/matmul_ggml_int8.cpp (Highway: included once per SIMD target, inside its namespace).
//
// Codes<T>(d8, block, e0) is elements [e0, e0 + Lanes(d8)) of one block of codec T in byte lanes, in order: the
// unsigned code plus kOffset<T> (so that code = lane - offset) for the types of small unsigned codes, the signed code
// itself (int8 bits) for the types of signed levels (q8_0, iq4_nl, iq4_xs, mxfp4_ggml: kSigned<T>). Lanes of 16 or
// 32 stay in one 32-element run of the block's layout; 64 lanes are two such halves. Every lane is the reference's
// ggml_code (ggml_int8_test.cpp holds the products to the scalar definition on every target).

// Per-target include guard (Highway's convention: toggled by foreach_target.h).
#if defined(SEEDLING_OPS_GGML_INT8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEEDLING_OPS_GGML_INT8_INL_H_
#undef SEEDLING_OPS_GGML_INT8_INL_H_
#else
#define SEEDLING_OPS_GGML_INT8_INL_H_
#endif

#include <hwy/highway.h>

#include "codec/ggml_quants.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR  // fixed 128-bit blocks: what the kernels need
namespace ggml_int8 {

template <Codec T>
constexpr bool kSigned = T == Codec::Q8_0 || T == Codec::IQ4_NL || T == Codec::IQ4_XS || T == Codec::MXFP4_GGML;
template <Codec T>
constexpr int kOffset = T == Codec::Q4_0   ? 8
                        : T == Codec::Q5_0 ? 16
                        : T == Codec::Q3_K ? 4
                        : T == Codec::Q6_K ? 32
                                           : 0;

// The byte tables: levels of iq4 and mxfp4 (int8 bits), and for Q5_0/Q5_1's qh the byte and bit of element j.
struct ByteTables {
  uint8_t iq4nl[16], mxfp4[16], qh_byte[32], qh_bit[32];
  constexpr ByteTables() : iq4nl(), mxfp4(), qh_byte(), qh_bit() {
    for (int i = 0; i < 16; ++i) {
      iq4nl[i] = uint8_t(ggml::kIq4nlValues[i]);
      mxfp4[i] = uint8_t(ggml::kMxfp4Doubled[i]);
    }
    for (int j = 0; j < 32; ++j) qh_byte[j] = uint8_t(j / 8), qh_bit[j] = uint8_t(1u << (j % 8));
  }
};
inline constexpr ByteTables kBytes{};

// v >> s for s in [0, 8), the same in every lane.
template <class V>
HWY_INLINE V Shr(V v, int s) {
  switch (s) {
    case 0:
      return v;
    case 1:
      return hn::ShiftRight<1>(v);
    case 2:
      return hn::ShiftRight<2>(v);
    case 3:
      return hn::ShiftRight<3>(v);
    case 4:
      return hn::ShiftRight<4>(v);
    case 5:
      return hn::ShiftRight<5>(v);
    case 6:
      return hn::ShiftRight<6>(v);
    default:
      return hn::ShiftRight<7>(v);
  }
}

// (bytes at p >> shift) & mask.
template <class D8>
HWY_INLINE hn::Vec<D8> Field(D8 d8, const uint8_t* p, int shift, int mask) {
  return hn::And(Shr(hn::LoadU(d8, p), shift), hn::Set(d8, uint8_t(mask)));
}

// 64 byte lanes: the 32 bytes at p in both halves, the low half's shifted right by s0 and the high half's by s1, then
// masked (a shift of 16-bit lanes: the bits it brings down from the next byte lie above every mask used here).
template <class D8>
HWY_INLINE hn::Vec<D8> Field2(D8 d8, const uint8_t* p, int s0, int s1, int mask) {
  const hn::Half<D8> dh;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::Half<decltype(d16)> d16h;
  const auto half = hn::LoadU(dh, p);
  const auto shifts = hn::Combine(d16, hn::Set(d16h, uint16_t(s1)), hn::Set(d16h, uint16_t(s0)));
  const auto both = hn::BitCast(d16, hn::Combine(d8, half, half));
  return hn::And(hn::BitCast(d8, hn::Shr(both, shifts)), hn::Set(d8, uint8_t(mask)));
}

// Elements [j, j + Lanes) of a 32-element nibble run (ggml::nibble32): 16 bytes, element i low, i + 16 high.
template <class D8>
HWY_INLINE hn::Vec<D8> Nibbles32(D8 d8, const uint8_t* qs, int j) {
  if constexpr (hn::MaxLanes(D8()) == 32) {
    const hn::Half<D8> dh;
    const auto v = hn::LoadU(dh, qs);
    return hn::Combine(d8, hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, uint8_t{0x0F})));
  } else {
    const auto v = hn::LoadU(d8, qs);
    return j < 16 ? hn::And(v, hn::Set(d8, uint8_t{0x0F})) : hn::ShiftRight<4>(v);
  }
}

// table[q] for q in [0, 16), the 16 bytes of table repeated in every 128-bit block.
template <class D8>
HWY_INLINE hn::Vec<D8> Lookup16(D8 d8, const uint8_t* table, hn::Vec<D8> q) {
  return hn::TableLookupBytes(hn::LoadDup128(d8, table), q);
}

// 16 where bit j + l of the little-endian u32 at qh is set (Q5_0/Q5_1's fifth bit), else 0.
template <class D8>
HWY_INLINE hn::Vec<D8> HighBit16(D8 d8, const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const hn::Repartition<uint32_t, D8> d32;
  const auto bytes = hn::TableLookupBytes(hn::BitCast(d8, hn::Set(d32, h)), hn::LoadU(d8, kBytes.qh_byte + j));
  const auto set = hn::Ne(hn::And(bytes, hn::LoadU(d8, kBytes.qh_bit + j)), hn::Zero(d8));
  return hn::IfThenElseZero(set, hn::Set(d8, uint8_t{16}));
}

// Elements [e0, e0 + Lanes(d8)) of block b of codec T (see the file's comment); e0 a multiple of the lanes.
template <Codec T, class D8>
HWY_INLINE hn::Vec<D8> Codes(D8 d8, const uint8_t* b, int e0) {
  constexpr bool k64 = hn::MaxLanes(D8()) == 64;
  if constexpr (k64 && (T == Codec::Q4_K || T == Codec::Q5_K)) {  // one 32-byte run: low nibbles, then high
    constexpr size_t qs = T == Codec::Q4_K ? offsetof(BlockQ4_K, qs) : offsetof(BlockQ5_K, qs);
    const auto low = Field2(d8, b + qs + (e0 / 64) * 32, 0, 4, 0x0F);
    if constexpr (T == Codec::Q4_K) {
      return low;
    } else {
      return hn::Or(low, hn::ShiftLeft<4>(Field2(d8, b + offsetof(BlockQ5_K, qh), e0 / 32, e0 / 32 + 1, 1)));
    }
  } else if constexpr (k64 && T == Codec::Q6_K) {  // 64 bytes of ql, one shift; qh's 32 bytes moved to bits 4-5
    const int half = e0 / 128, r = e0 % 128;
    const auto low = Field(d8, b + offsetof(BlockQ6_K, ql) + half * 64, 4 * (r / 64), 0x0F);
    // Lanes [0, 32) take qh's bits 2k and 2k + 1, lanes [32, 64) bits 2k + 2 and 2k + 3 (k = r / 32), each pair
    // shifted straight to bits 4-5: left by 4 and 2 for r = 0, right by 0 and 2 for r = 64 (bits a 16-bit shift
    // moves across bytes fall outside the mask). One shift and mask fewer than Field2's: Q6_K int8 matvec -5%,
    // 4-layer Q4_K_M decode +2-4% (2 cores, Zen 4, 2026-12-07).
    const hn::Half<D8> dh;
    const hn::Repartition<uint16_t, D8> d16;
    const hn::Half<decltype(d16)> d16h;
    const auto half_qh = hn::LoadU(dh, b + offsetof(BlockQ6_K, qh) + half * 32);
    const auto both = hn::BitCast(d16, hn::Combine(d8, half_qh, half_qh));
    const auto shifts = hn::Combine(d16, hn::Set(d16h, uint16_t(2)), hn::Set(d16h, uint16_t(r == 0 ? 4 : 0)));
    const auto moved = r == 0 ? hn::Shl(both, shifts) : hn::Shr(both, shifts);
    return hn::Or(low, hn::And(hn::BitCast(d8, moved), hn::Set(d8, uint8_t{0x30})));
  } else if constexpr (hn::MaxLanes(D8()) > 32) {
    const hn::Half<D8> dh;
    return hn::Combine(d8, Codes<T>(dh, b, e0 + 32), Codes<T>(dh, b, e0));
  } else if constexpr (T == Codec::Q8_0) {
    return hn::LoadU(d8, b + offsetof(BlockQ8_0, qs) + e0);
  } else if constexpr (T == Codec::Q4_0) {
    return Nibbles32(d8, b + offsetof(BlockQ4_0, qs), e0);
  } else if constexpr (T == Codec::Q5_0) {
    return hn::Or(Nibbles32(d8, b + offsetof(BlockQ5_0, qs), e0), HighBit16(d8, b + offsetof(BlockQ5_0, qh), e0));
  } else if constexpr (T == Codec::Q5_1) {
    return hn::Or(Nibbles32(d8, b + offsetof(BlockQ5_1, qs), e0), HighBit16(d8, b + offsetof(BlockQ5_1, qh), e0));
  } else if constexpr (T == Codec::IQ4_NL) {
    return Lookup16(d8, kBytes.iq4nl, Nibbles32(d8, b + offsetof(BlockIq4Nl, qs), e0));
  } else if constexpr (T == Codec::MXFP4_GGML) {
    return Lookup16(d8, kBytes.mxfp4, Nibbles32(d8, b + offsetof(BlockMxfp4Ggml, qs), e0));
  } else if constexpr (T == Codec::Q2_K || T == Codec::Q3_K) {
    constexpr size_t qs = T == Codec::Q2_K ? offsetof(BlockQ2_K, qs) : offsetof(BlockQ3_K, qs);
    const auto crumbs = Field(d8, b + qs + (e0 / 128) * 32 + e0 % 32, 2 * ((e0 % 128) / 32), 3);
    if constexpr (T == Codec::Q2_K) {
      return crumbs;
    } else {  // + 4 where the hmask bit is set: the code plus kOffset 4
      return hn::Or(crumbs, hn::ShiftLeft<2>(Field(d8, b + offsetof(BlockQ3_K, hmask) + e0 % 32, e0 / 32, 1)));
    }
  } else if constexpr (T == Codec::Q4_K || T == Codec::Q5_K) {
    constexpr size_t qs = T == Codec::Q4_K ? offsetof(BlockQ4_K, qs) : offsetof(BlockQ5_K, qs);
    const auto low = Field(d8, b + qs + (e0 / 64) * 32 + e0 % 32, 4 * ((e0 / 32) % 2), 0x0F);
    if constexpr (T == Codec::Q4_K) {
      return low;
    } else {
      return hn::Or(low, hn::ShiftLeft<4>(Field(d8, b + offsetof(BlockQ5_K, qh) + e0 % 32, e0 / 32, 1)));
    }
  } else if constexpr (T == Codec::Q6_K) {
    const int half = e0 / 128, r = e0 % 128;
    const auto low = Field(d8, b + offsetof(BlockQ6_K, ql) + half * 64 + r % 64, 4 * (r / 64), 0x0F);
    const auto high = Field(d8, b + offsetof(BlockQ6_K, qh) + half * 32 + r % 32, 2 * (r / 32), 3);
    return hn::Or(low, hn::ShiftLeft<4>(high));
  } else {
    static_assert(T == Codec::IQ4_XS);
    return Lookup16(d8, kBytes.iq4nl, Nibbles32(d8, b + offsetof(BlockIq4Xs, qs) + 16 * (e0 / 32), e0 % 32));
  }
}

// acc plus sum over lanes of a (unsigned, at most 128) times b (int8) times s (int16, one factor per pair of byte
// lanes), each 128-bit block of the result holding sums of that block's lanes only: pmaddubsw then pmaddwd on x86
// (no pair of a * b reaches int16's limit: 2 * 128 * 127 < 32768), the same products in portable lanes elsewhere.
template <class D8>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, D8>> DotScaled(D8 d8, hn::Vec<hn::Repartition<int32_t, D8>> acc,
                                                           hn::Vec<D8> a, hn::Vec<hn::RebindToSigned<D8>> b,
                                                           hn::Vec<hn::Repartition<int16_t, D8>> s) {
  using V32 = hn::Vec<hn::Repartition<int32_t, D8>>;
#if HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || \
    HWY_TARGET == HWY_AVX3_DL
  (void)d8;
  constexpr size_t kWidth = hn::MaxLanes(D8());
  if constexpr (kWidth == 64) {
    return hn::Add(acc, V32{_mm512_madd_epi16(_mm512_maddubs_epi16(a.raw, b.raw), s.raw)});
  } else if constexpr (kWidth == 32) {
    return hn::Add(acc, V32{_mm256_madd_epi16(_mm256_maddubs_epi16(a.raw, b.raw), s.raw)});
  } else {
    static_assert(kWidth == 16);
    return hn::Add(acc, V32{_mm_madd_epi16(_mm_maddubs_epi16(a.raw, b.raw), s.raw)});
  }
#else
  // Lane l of each int16 pair sum is bytes 2l and 2l + 1, as pmaddubsw's; lane l of the int32 result pairs 2l, 2l+1.
  const hn::Repartition<int16_t, D8> d16;
  const hn::Repartition<uint16_t, D8> du16;
  const hn::Repartition<int32_t, D8> d32;
  const auto a_even = hn::BitCast(d16, hn::And(hn::BitCast(du16, a), hn::Set(du16, uint16_t{0xFF})));
  const auto a_odd = hn::BitCast(d16, hn::ShiftRight<8>(hn::BitCast(du16, a)));
  const auto b16 = hn::BitCast(d16, b);
  const auto pairs =
      hn::Add(hn::Mul(a_even, hn::ShiftRight<8>(hn::ShiftLeft<8>(b16))), hn::Mul(a_odd, hn::ShiftRight<8>(b16)));
  const auto p32 = hn::BitCast(d32, pairs), s32 = hn::BitCast(d32, s);
  const auto even = hn::Mul(hn::ShiftRight<16>(hn::ShiftLeft<16>(p32)), hn::ShiftRight<16>(hn::ShiftLeft<16>(s32)));
  return hn::Add(acc, hn::Add(even, hn::Mul(hn::ShiftRight<16>(p32), hn::ShiftRight<16>(s32))));
#endif
}

// acc plus per int32 lane the sum of its four byte products a * b (a unsigned, at most 128; b int8): vpdpbusd where
// the CPU has VNNI (EVEX, as matmul_int8.cpp's Dot), else DotScaled with unit factors. The same exact sums either way.
template <class D8>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, D8>> Dot4(D8 d8, hn::Vec<hn::Repartition<int32_t, D8>> acc, hn::Vec<D8> a,
                                                      hn::Vec<hn::RebindToSigned<D8>> b) {
#if HWY_TARGET == HWY_AVX3_DL
  (void)d8;
  auto raw = acc.raw;
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(raw) : "v"(a.raw), "v"(b.raw));
  return hn::Vec<hn::Repartition<int32_t, D8>>{raw};
#else
  return DotScaled(d8, acc, a, b, hn::Set(hn::Repartition<int16_t, D8>(), int16_t{1}));
#endif
}

// A signed code vector as DotScaled's unsigned operand (|v|, at most 128) and x with v's sign (0 where v is 0).
template <class D8>
HWY_INLINE void SignSplit(D8 d8, hn::Vec<D8> v, hn::Vec<hn::RebindToSigned<D8>>& x, hn::Vec<D8>& abs_v) {
  const hn::RebindToSigned<D8> di8;
  const auto vs = hn::BitCast(di8, v);
  abs_v = hn::BitCast(d8, hn::Abs(vs));
  x = hn::IfThenElse(hn::Lt(vs, hn::Zero(di8)), hn::Neg(x), x);
}

}  // namespace ggml_int8
#endif
}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SEEDLING_OPS_GGML_INT8_INL_H_
