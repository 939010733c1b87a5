// The int8-activation kernels of ops/matmul.h (quantize_int8_rows, matmul_int8): Highway SIMD with runtime
// dispatch, integer dot products of a block's codes with its quantized activations (AVX-512 VNNI vpdpbusd where
// the CPU has it; else pmaddubsw on x86 for q4, widening int16 multiply-adds elsewhere).
//
// The bits are matmul_int8's definition whatever the target: a block's integer sum is exact in any order, so lanes
// may hold any of its partial sums; those of TN outputs are then reduced into one vector whose lane j is output j's
// sum, and the float steps (scale, d, m, the sum over blocks in order) run lane by lane, one output a lane, as the
// scalar definition does them. Targets without fixed 128-bit blocks (SVE, RVV, scalar) run ref::matmul_int8.
// Batches of kInt8GemmRows rows or more (prefill) take the GEMM form below (GemmRangeT): a tile of outputs
// repacked once so that every lane holds one output from the first multiply on, then every row against it; its
// integer sums are the same exact sums and its float steps the same, so it gives the decode kernel's bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_int8.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/int8_sum-inl.h"  // Reduce4, StoreTileRows
#include "ops/matmul.h"

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Blocks of at most 64 floats, vectors of at most 16 lanes (so a vector never straddles a block).
void QuantizeRows(const float* x, int64_t m, int64_t cols, int64_t group, int8_t* q, float* scale, float* sum) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t L = int64_t(hn::Lanes(df)), blocks = (cols + group - 1) / group;
  HWY_ALIGN float pad[64];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t n = std::min(group, cols - b * group), index = i * blocks + b;
      const float* xb = x + i * cols + b * group;
      if (n < group) {  // the row's last block, short: zeros past its end give q = 0 there
        std::fill(pad, pad + group, 0.0f);
        std::memcpy(pad, xb, size_t(n) * sizeof(float));
        xb = pad;
      }
      auto vmax = hn::Zero(df);
      for (int64_t k = 0; k < group; k += L) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + k)));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
      const auto inv = hn::Set(df, amax > 0.0f ? 127.0f / amax : 0.0f);
      auto vsum = hn::Zero(di);
      for (int64_t k = 0; k < group; k += L) {
        const auto v = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + k), inv));
        vsum = hn::Add(vsum, v);
        hn::StoreU(hn::DemoteTo(d8, v), d8, q + index * group + k);
      }
      scale[index] = amax / 127.0f;
      sum[index] = float(hn::GetLane(hn::SumOfLanes(di, vsum)));
    }
  }
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR

template <Codec T>
constexpr int64_t kGroup = T == Codec::Q8_G32 || T == Codec::Q4_G32 ? 32 : 64;
template <Codec T>
constexpr bool kQ4 = T == Codec::Q4_G32 || T == Codec::Q4_G64;
template <Codec T>
constexpr size_t kBlockBytes = kQ4<T> ? 4 + kGroup<T> / 2 : 4 + kGroup<T>;

// Codes of a block's elements [e, e + Lanes(d8)) as unsigned bytes; q points at the block's codes. A 4-bit block
// stores element e in the low nibble of byte e and element e + G/2 in the high one, so a vector of G lanes is the
// G/2 bytes' low nibbles then their high nibbles, and a shorter vector lies within one half.
template <Codec T, class D8>
HWY_INLINE hn::Vec<D8> LoadCodes(D8 d8, const uint8_t* q, int64_t e) {
  constexpr int64_t G = kGroup<T>;
  if constexpr (!kQ4<T>) {
    return hn::LoadU(d8, q + e);
  } else if constexpr (hn::MaxLanes(D8()) == size_t(G)) {
    const hn::Half<D8> dh;
    const auto v = hn::LoadU(dh, q);
    return hn::Combine(d8, hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, uint8_t{0x0F})));
  } else {
    const auto v = hn::LoadU(d8, q + (e < G / 2 ? e : e - G / 2));
    return e < G / 2 ? hn::And(v, hn::Set(d8, uint8_t{0x0F})) : hn::ShiftRight<4>(v);
  }
}

// acc plus partial sums of w * x over the lanes of D8 (w unsigned codes, x signed int8 in the same byte lanes;
// which int32 lane holds which products varies by target). kSmall: every code is at most 15 (q4).
template <bool kSmall, class D8, class D32>
HWY_INLINE hn::Vec<D32> Dot(D8 d8, D32 d32, hn::Vec<D32> acc, hn::Vec<D8> w, hn::Vec<D8> x) {
#if HWY_TARGET == HWY_AVX3_DL
  // vpdpbusd: unsigned bytes times signed bytes, four products to each int32 lane, no saturation. Written in asm
  // with the EVEX form named: Highway 1.0 compiles this target for AVX-VNNI, but its CPU test requires AVX512-VNNI.
  auto a = acc.raw;
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(a) : "v"(w.raw), "v"(x.raw));
  return hn::Vec<D32>{a};
#else
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  if constexpr (kSmall && hn::MaxLanes(D8()) >= 32) {
    // pmaddubsw: codes 0..15 times int8 gives pairs within +-3810, far from int16 saturation; pmaddwd widens.
    const hn::Repartition<int16_t, D8> d16;
    if constexpr (hn::MaxLanes(D8()) == 64) {
      return hn::Add(acc,
                     hn::Vec<D32>{_mm512_madd_epi16(_mm512_maddubs_epi16(w.raw, x.raw), hn::Set(d16, int16_t{1}).raw)});
    } else {
      return hn::Add(acc,
                     hn::Vec<D32>{_mm256_madd_epi16(_mm256_maddubs_epi16(w.raw, x.raw), hn::Set(d16, int16_t{1}).raw)});
    }
  }
#endif
  // Widening: each half of the bytes to int16, then int16 pairs multiplied and added into int32 lanes.
  const hn::Repartition<int16_t, D8> d16;
  const hn::Half<D8> dh;
  const hn::RebindToSigned<D8> ds;
  const hn::Half<decltype(ds)> dsh;
  const auto xs = hn::BitCast(ds, x);
  auto odd = hn::Zero(d32);
  acc = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LowerHalf(dh, w)),
                                      hn::PromoteTo(d16, hn::LowerHalf(dsh, xs)), acc, odd);
  acc = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::UpperHalf(dh, w)),
                                      hn::PromoteTo(d16, hn::UpperHalf(dsh, xs)), acc, odd);
  return hn::Add(acc, odd);
#endif
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// TileRows for q4_g64 on AVX-512 (64 codes a vector, 16 outputs a tile): two outputs' 32 code bytes share one
// vector, their low nibbles (elements 0-31) in one and high nibbles (32-63) in another, against x's elements 0-31
// and 32-63 each repeated in both halves; the halves then hold each output's partial sums. Output pairs (k, k + 4)
// and (8 + k, 12 + k) make the two Reduce4s and one exchange of 128-bit blocks leave output j's exact sum in lane j,
// as TileRows's reductions do, so the float steps and the bits are TileRows's. A quarter fewer instructions for the
// codes (no combine, one nibble split for two outputs) and half the reductions of TileRows's vectors.
template <size_t TM, class D8>
HWY_INLINE void ReducePairs(D8 d8, const Int8Rows& xq, int64_t i0, int64_t b, const uint8_t* const* rows, size_t at,
                            hn::Vec<hn::Repartition<int32_t, D8>> (&reduced)[TM]) {
  const hn::Repartition<int32_t, D8> d32;
  const hn::Half<D8> dh;
  hn::Vec<hn::Repartition<int32_t, D8>> half[2][TM];
  for (size_t g = 0; g < 2; ++g) {
    hn::Vec<D8> lo[4], hi[4];
    for (size_t k = 0; k < 4; ++k) {
      const size_t a = 8 * g + k;  // outputs a and a + 4 of the tile
      const auto v = hn::Combine(d8, hn::LoadU(dh, rows[a + 4] + at + 4), hn::LoadU(dh, rows[a] + at + 4));
      lo[k] = hn::And(v, hn::Set(d8, uint8_t{0x0F}));
      hi[k] = hn::ShiftRight<4>(v);
    }
    for (size_t i = 0; i < TM; ++i) {
      const auto* x = reinterpret_cast<const uint8_t*>(xq.q.data() + ((i0 + int64_t(i)) * xq.blocks + b) * 64);
      const auto xl = hn::LoadU(dh, x), xh = hn::LoadU(dh, x + 32);
      const auto xlo = hn::Combine(d8, xl, xl), xhi = hn::Combine(d8, xh, xh);
      hn::Vec<decltype(d32)> part[4];
      for (size_t k = 0; k < 4; ++k) {
        part[k] = Dot<true>(d8, d32, Dot<true>(d8, d32, hn::Zero(d32), lo[k], xlo), hi[k], xhi);
      }
      half[g][i] = Reduce4(d32, part);  // block 0 + block 1: outputs 8g..8g+3; blocks 2 + 3: outputs 8g+4..8g+7
    }
  }
  for (size_t i = 0; i < TM; ++i) reduced[i] = ReducePairHalves(half[0][i], half[1][i]);
}
#endif

// Rows [i0, i0 + TM) of one tile of TN outputs (TN = int32 lanes), whose weight rows are rows[0..TN) (a short
// tile repeats its last row): each block's codes are loaded once for the TM rows, each row has its own sums.
template <Codec T, size_t TM, class D8>
HWY_INLINE void TileRows(D8 d8, const Int8Rows& xq, int64_t i0, const uint8_t* const* rows,
                         hn::Vec<hn::Repartition<int32_t, D8>> offset, float* y, int64_t ldy, int64_t count,
                         size_t ahead) {
  constexpr int64_t G = kGroup<T>;
  const hn::Repartition<int32_t, D8> d32;
  const hn::Rebind<float, decltype(d32)> df;
  const hn::RebindToUnsigned<decltype(d32)> du32;
  constexpr size_t TN = hn::MaxLanes(decltype(d32)()), B = hn::MaxLanes(D8()), S = size_t(G) / B;
  hn::Vec<decltype(df)> acc[TM];
  for (size_t i = 0; i < TM; ++i) acc[i] = hn::Zero(df);
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const size_t at = size_t(b) * kBlockBytes<T>;
    if (ahead != 0) {
      for (size_t j = 0; j < TN; ++j) __builtin_prefetch(rows[j] + at + ahead, 0, 1);
    }
    hn::Vec<decltype(d32)> dot[TM];
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (T == Codec::Q4_G64 && B == 64) {
      ReducePairs<TM>(d8, xq, i0, b, rows, at, dot);
    } else
#endif
    {
      hn::Vec<decltype(d32)> reduced[TM][TN / 4];
      for (size_t g = 0; g < TN / 4; ++g) {
        hn::Vec<D8> codes[4][S];
        for (size_t j = 0; j < 4; ++j)
          for (size_t e = 0; e < S; ++e) codes[j][e] = LoadCodes<T>(d8, rows[4 * g + j] + at + 4, int64_t(e * B));
        for (size_t i = 0; i < TM; ++i) {
          const auto* x = reinterpret_cast<const uint8_t*>(xq.q.data() + ((i0 + int64_t(i)) * xq.blocks + b) * G);
          hn::Vec<decltype(d32)> part[4];
          for (size_t j = 0; j < 4; ++j) {
            part[j] = hn::Zero(d32);
            for (size_t e = 0; e < S; ++e)
              part[j] = Dot<kQ4<T>>(d8, d32, part[j], codes[j][e], hn::LoadU(d8, x + e * B));
          }
          reduced[i][g] = Reduce4(d32, part);
        }
      }
      for (size_t i = 0; i < TM; ++i) dot[i] = ReduceBlocks(d32, reduced[i]);
    }
    const auto dm = hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(rows[0] + at), offset);
    const auto d = F16ToF32(d32, dm);
    const auto mn = F16ToF32(d32, hn::BitCast(d32, hn::ShiftRight<16>(hn::BitCast(du32, dm))));
    for (size_t i = 0; i < TM; ++i) {
      const size_t index = size_t((i0 + int64_t(i)) * xq.blocks + b);
      const auto s = hn::Add(hn::Mul(d, hn::ConvertTo(df, dot[i])), hn::Mul(mn, hn::Set(df, xq.sum[index])));
      acc[i] = hn::Add(acc[i], hn::Mul(hn::Set(df, xq.scale[index]), s));
    }
  }
  HWY_ALIGN float out[TN];
  for (size_t i = 0; i < TM; ++i) {
    hn::Store(acc[i], df, out);
    std::copy(out, out + count, y + (i0 + int64_t(i)) * ldy);
  }
}

// Outputs [n0, n1) of every row, in tiles of TN outputs by 4 rows (1 row for the last few).
template <Codec T>
void Int8RangeT(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  const hn::CappedTag<uint8_t, size_t(kGroup<T>)> d8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  constexpr size_t TN = hn::MaxLanes(decltype(d32)());
  const size_t row_bytes = codec_row_bytes(T, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  HWY_ALIGN int32_t offsets[TN];
  // The range's first tile, into L2 (prefetcht1): the prefetch below runs one tile ahead of the rows in use and never
  // asks for the first. An expert's range is a piece of 64 rows (ops/expert_products.h) that starts a new stream, and
  // each began with its first tile's lines missing: 4-layer q4_g64 decode on Zen 4, expert products 6.92 -> 6.10 ms a
  // token on 1 thread, decode +5% (1 thread) and +4% (2); the dense products (the same kernel, long ranges) unchanged.
  if (n0 < n1) {
    const size_t first = size_t(std::min(int64_t(TN), n1 - n0)) * row_bytes;
    for (size_t at = 0; at < first; at += 64) __builtin_prefetch(base + size_t(n0) * row_bytes + at, 0, 2);
  }
  for (int64_t n = n0; n < n1; n += int64_t(TN)) {
    const int64_t count = std::min(int64_t(TN), n1 - n);
    const uint8_t* rows[TN];
    for (size_t j = 0; j < TN; ++j) {
      const int64_t r = std::min(int64_t(j), count - 1);
      rows[j] = base + size_t(n + r) * row_bytes;
      offsets[j] = int32_t(size_t(r) * row_bytes);
    }
    const auto offset = hn::Load(d32, offsets);
    int64_t i = 0;
    // The next tile's rows, block by block as this tile reads its own (a tile's rows are consecutive in memory, so
    // this is the same stream one tile ahead); only on the first pass over the tile. Into L2, not L1 (prefetcht2):
    // a tile ahead is 16 rows' worth of lines, and fetched into L1 they pushed out the lines in use (1 thread,
    // 37 MB q4_g64 matvec 8.0-8.8 -> 9.3-11.2 GB/s; 16-layer decode +11-30% on 1 and 2 threads, 2026-12-06).
    const size_t ahead = n + 2 * int64_t(TN) <= n1 ? TN * row_bytes : 0;
    for (; i + 4 <= xq.rows; i += 4) TileRows<T, 4>(d8, xq, i, rows, offset, y + n, w.rows, count, i == 0 ? ahead : 0);
    for (; i < xq.rows; ++i) TileRows<T, 1>(d8, xq, i, rows, offset, y + n, w.rows, count, i == 0 ? ahead : 0);
  }
}

// ---- The GEMM form, for many rows (prefill): a tile of outputs repacked once, then every row against it ----
//
// A tile is TN outputs, TN = the int32 lanes of a full vector. Repacked, its block b is G/4 byte vectors, vector v
// holding in bytes 4j..4j+3 four codes of output j (the block's elements kElem<T>(v)..+3), then d and m of the TN
// outputs as float vectors. A row's four activations at those elements, broadcast to every lane, and one lane-local
// dot per vector (int32 lane j = the sum of its own four byte products) give lane j output j's exact integer sum
// with no reduction across lanes; the float steps are TileRows's, lane by lane. Rows run TM at a time (8 with 32
// vector registers, else 4) over the repacked tile, which stays in L1/L2 while the rows stream by.

template <Codec T>
constexpr int64_t kElem(size_t v) {  // first element of a block's vector v in the repacked tile
  return kQ4<T> ? (v % 2 == 0 ? 0 : kGroup<T> / 2) + 4 * int64_t(v / 2) : 4 * int64_t(v);
}

// acc + per int32 lane the sum of that lane's four byte products w * x (w unsigned codes, x signed int8).
// kSmall: every code is at most 15 (q4).
template <bool kSmall, class D8, class D32>
HWY_INLINE hn::Vec<D32> LaneDot(D8 d8, D32 d32, hn::Vec<D32> acc, hn::Vec<D8> w, hn::Vec<D8> x) {
#if HWY_TARGET == HWY_AVX3_DL
  return Dot<kSmall>(d8, d32, acc, w, x);  // vpdpbusd sums each lane's own four products
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  const auto maddubs = [&](hn::Vec<D8> small) {  // codes 0..15: pmaddubsw pairs within +-3810, pmaddwd lane-local
    const hn::Repartition<int16_t, D8> d16;
    if constexpr (hn::MaxLanes(D8()) == 64) {
      return hn::Vec<D32>{_mm512_madd_epi16(_mm512_maddubs_epi16(small.raw, x.raw), hn::Set(d16, int16_t{1}).raw)};
    } else {
      return hn::Vec<D32>{_mm256_madd_epi16(_mm256_maddubs_epi16(small.raw, x.raw), hn::Set(d16, int16_t{1}).raw)};
    }
  };
  if constexpr (kSmall) {
    return hn::Add(acc, maddubs(w));
  } else {  // w = 16 hi + lo, both 0..15: two exact sums
    const auto lo = maddubs(hn::And(w, hn::Set(d8, uint8_t{0x0F})));
    return hn::Add(acc, hn::Add(lo, hn::ShiftLeft<4>(maddubs(hn::ShiftRight<4>(w)))));
  }
#else
  // Even and odd bytes widened in place to int16 (products within +-32,385), then each int32 lane's two int16
  // halves added: every product stays in its own lane.
  const hn::Repartition<int16_t, D8> d16;
  const hn::Repartition<uint16_t, D8> du16;
  const auto wu = hn::BitCast(du16, w);
  const auto xs = hn::BitCast(d16, x);
  const auto even =
      hn::Mul(hn::BitCast(d16, hn::And(wu, hn::Set(du16, uint16_t{0x00FF}))), hn::ShiftRight<8>(hn::ShiftLeft<8>(xs)));
  const auto odd = hn::Mul(hn::BitCast(d16, hn::ShiftRight<8>(wu)), hn::ShiftRight<8>(xs));
  const auto halves = [&](hn::Vec<decltype(d16)> p) {
    const auto q = hn::BitCast(d32, p);
    return hn::Add(hn::ShiftRight<16>(hn::ShiftLeft<16>(q)), hn::ShiftRight<16>(q));
  };
  return hn::Add(acc, hn::Add(halves(even), halves(odd)));
#endif
}

// Block b of the tile whose output j is the weight row at row0 + offset[j], repacked into dst (G/4 + 2 vectors).
template <Codec T, class D8>
HWY_INLINE void RepackBlock(D8 d8, const uint8_t* row0, hn::Vec<hn::Repartition<int32_t, D8>> offset, size_t at,
                            uint8_t* HWY_RESTRICT dst) {
  constexpr int64_t G = kGroup<T>;
  const hn::Repartition<int32_t, D8> d32;
  const hn::RebindToUnsigned<decltype(d32)> du32;
  const hn::Rebind<float, decltype(d32)> df;
  constexpr size_t V = hn::MaxLanes(D8());
  const uint8_t* codes = row0 + at + 4;
  if constexpr (kQ4<T>) {  // dword h: elements 4h.. in its low nibbles, G/2 + 4h.. in its high ones
    const auto mask = hn::Set(du32, 0x0F0F0F0Fu);
    for (size_t h = 0; h < size_t(G) / 8; ++h) {
      const auto v = hn::BitCast(du32, hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(codes + 4 * h), offset));
      hn::Store(hn::BitCast(d8, hn::And(v, mask)), d8, dst + 2 * h * V);
      hn::Store(hn::BitCast(d8, hn::And(hn::ShiftRight<4>(v), mask)), d8, dst + (2 * h + 1) * V);
    }
  } else {
    for (size_t h = 0; h < size_t(G) / 4; ++h)
      hn::Store(hn::BitCast(d8, hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(codes + 4 * h), offset)), d8,
                dst + h * V);
  }
  const auto dm = hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(row0 + at), offset);
  auto* f = reinterpret_cast<float*>(dst + size_t(G) / 4 * V);
  hn::Store(F16ToF32(d32, dm), df, f);
  hn::Store(F16ToF32(d32, hn::BitCast(d32, hn::ShiftRight<16>(hn::BitCast(du32, dm)))), df, f + hn::Lanes(df));
}

// Rows [i0, i0 + TM) against a repacked tile: count outputs into y (row stride ldy).
template <Codec T, size_t TM, class D8>
HWY_INLINE void GemmRows(D8 d8, const Int8Rows& xq, int64_t i0, const uint8_t* HWY_RESTRICT tile, float* y, int64_t ldy,
                         int64_t count) {
  constexpr int64_t G = kGroup<T>;
  constexpr size_t V = hn::MaxLanes(D8()), NV = size_t(G) / 4, kStride = (NV + 2) * V;
  const hn::Repartition<int32_t, D8> d32;
  const hn::Rebind<float, decltype(d32)> df;
  hn::Vec<decltype(df)> acc[TM];
  for (size_t r = 0; r < TM; ++r) acc[r] = hn::Zero(df);
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const uint8_t* src = tile + size_t(b) * kStride;
    const int8_t* x[TM];
    for (size_t r = 0; r < TM; ++r) x[r] = xq.q.data() + ((i0 + int64_t(r)) * xq.blocks + b) * G;
    hn::Vec<decltype(d32)> dot[TM];
    for (size_t r = 0; r < TM; ++r) dot[r] = hn::Zero(d32);
    for (size_t v = 0; v < NV; ++v) {
      const auto w = hn::Load(d8, src + v * V);
      for (size_t r = 0; r < TM; ++r) {
        int32_t four;
        std::memcpy(&four, x[r] + kElem<T>(v), 4);
        dot[r] = LaneDot<kQ4<T>>(d8, d32, dot[r], w, hn::BitCast(d8, hn::Set(d32, four)));
      }
    }
    const auto* f = reinterpret_cast<const float*>(src + NV * V);
    const auto d = hn::Load(df, f), mn = hn::Load(df, f + hn::Lanes(df));
    for (size_t r = 0; r < TM; ++r) {
      const size_t index = size_t((i0 + int64_t(r)) * xq.blocks + b);
      const auto s = hn::Add(hn::Mul(d, hn::ConvertTo(df, dot[r])), hn::Mul(mn, hn::Set(df, xq.sum[index])));
      acc[r] = hn::Add(acc[r], hn::Mul(hn::Set(df, xq.scale[index]), s));
    }
  }
  StoreTileRows<TM>(df, acc, y, i0, ldy, count);
}

// Outputs [n0, n1) of every row: each tile of TN outputs repacked once, then all rows, TM at a time.
template <Codec T>
void GemmRangeT(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  constexpr size_t TN = hn::MaxLanes(decltype(d32)()), V = hn::MaxLanes(decltype(d8)());
  constexpr size_t kStride = (size_t(kGroup<T>) / 4 + 2) * V, kMaxTM = TN >= 16 ? 8 : 4;
  const size_t row_bytes = codec_row_bytes(T, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  uint8_t* const tile = TileBuffer(size_t(xq.blocks) * kStride);
  HWY_ALIGN int32_t offsets[TN];
  for (int64_t n = n0; n < n1; n += int64_t(TN)) {
    const int64_t count = std::min(int64_t(TN), n1 - n);
    for (size_t j = 0; j < TN; ++j) offsets[j] = int32_t(size_t(std::min(int64_t(j), count - 1)) * row_bytes);
    const auto offset = hn::Load(d32, offsets);
    const uint8_t* row0 = base + size_t(n) * row_bytes;
    for (int64_t b = 0; b < xq.blocks; ++b)
      RepackBlock<T>(d8, row0, offset, size_t(b) * kBlockBytes<T>, tile + size_t(b) * kStride);
    int64_t i = 0;
    for (; i + int64_t(kMaxTM) <= xq.rows; i += int64_t(kMaxTM))
      GemmRows<T, kMaxTM>(d8, xq, i, tile, y + n, w.rows, count);
    if constexpr (kMaxTM > 4) {
      if (i + 4 <= xq.rows) GemmRows<T, 4>(d8, xq, i, tile, y + n, w.rows, count), i += 4;
    }
    if (i + 2 <= xq.rows) GemmRows<T, 2>(d8, xq, i, tile, y + n, w.rows, count), i += 2;
    if (i < xq.rows) GemmRows<T, 1>(d8, xq, i, tile, y + n, w.rows, count);
  }
}

template <Codec T>
void RangeT(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1, Int8Kernel kernel) {
  const bool gemm = kernel == Int8Kernel::Gemm || (kernel == Int8Kernel::Auto && xq.rows >= kInt8GemmRows);
  return gemm ? GemmRangeT<T>(xq, w, y, n0, n1) : Int8RangeT<T>(xq, w, y, n0, n1);
}

void Int8Range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1, Int8Kernel kernel) {
  switch (w.codec) {
    case Codec::Q8_G32:
      return RangeT<Codec::Q8_G32>(xq, w, y, n0, n1, kernel);
    case Codec::Q8_G64:
      return RangeT<Codec::Q8_G64>(xq, w, y, n0, n1, kernel);
    case Codec::Q4_G32:
      return RangeT<Codec::Q4_G32>(xq, w, y, n0, n1, kernel);
    case Codec::Q4_G64:
      return RangeT<Codec::Q4_G64>(xq, w, y, n0, n1, kernel);
    default:
      fail("matmul_int8: {} is not an affine codec", codec_name(w.codec));
  }
}
// Outputs per tile: the GEMM's (int32 lanes of a full vector), a multiple of the decode kernel's (those of a
// block's byte vector), so every chunk of the thread split is whole tiles of either.
size_t TileOutputs(Codec) {
  return hn::MaxLanes(hn::Repartition<int32_t, hn::ScalableTag<uint8_t>>());
}
#else
void Int8Range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1, Int8Kernel) {
  fail("matmul_int8: no SIMD kernel on this target");
}
// 0: run the reference.
size_t TileOutputs(Codec) {
  return 0;
}
#endif

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::ops {
HWY_EXPORT(QuantizeRows);
HWY_EXPORT(Int8Range);
HWY_EXPORT(TileOutputs);

namespace {
CpuDot cpu_dot_from_env() {
  const char* v = std::getenv("SEEDLING_CPU_DOT");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "auto") return CpuDot::Auto;
  if (std::string_view(v) == "int8") return CpuDot::Int8;
  if (std::string_view(v) == "float") return CpuDot::Float;
  fail("SEEDLING_CPU_DOT={}: expected auto, float or int8", v);
}
std::atomic<CpuDot>& cpu_dot_slot() {
  static std::atomic<CpuDot> mode{cpu_dot_from_env()};
  return mode;
}
}  // namespace

CpuDot cpu_dot() {
  return cpu_dot_slot().load(std::memory_order_relaxed);
}
void set_cpu_dot(CpuDot mode) {
  cpu_dot_slot().store(mode, std::memory_order_relaxed);
}

bool int8_products(Codec c) {
  // Auto is Int8: every affine and ggml codec's int8 kernel is the faster (matmul.h).
  return cpu_dot() != CpuDot::Float && (codec_is_affine(c) || codec_is_ggml(c));
}

void quantize_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out) {
  SEEDLING_CHECK(group == 32 || group == 64, "quantize_int8_rows: group {} (expected 32 or 64)", group);
  const int64_t blocks = (cols + group - 1) / group;
  out.rows = m, out.cols = cols, out.group = group, out.blocks = blocks;
  out.q.resize(size_t(m * blocks * group));
  out.scale.resize(size_t(m * blocks));
  out.sum.resize(size_t(m * blocks));
  // Rows apart over the threads (a prompt's are thousands; inside a parallel region this runs inline).
  ThreadPool::global().parallel_for(size_t(m), 16, [&](size_t i0, size_t i1) {
    const int64_t at = int64_t(i0) * blocks;
    HWY_DYNAMIC_DISPATCH(QuantizeRows)
    (x + int64_t(i0) * cols, int64_t(i1 - i0), cols, group, out.q.data() + at * group, out.scale.data() + at,
     out.sum.data() + at);
  });
}

size_t int8_tile_outputs(Codec c) {
  return HWY_DYNAMIC_DISPATCH(TileOutputs)(c);
}
void matmul_int8_range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1, Int8Kernel kernel) {
  HWY_DYNAMIC_DISPATCH(Int8Range)(xq, w, y, n0, n1, kernel);
}

void matmul_int8(const float* x, int64_t m, const Matrix& w, float* y) {
  SEEDLING_CHECK(codec_is_affine(w.codec), "matmul_int8: {} is not an affine codec", codec_name(w.codec));
  if (m <= 0 || w.rows <= 0) return;
  const size_t tile = int8_tile_outputs(w.codec);
  if (tile == 0) return ref::matmul_int8(x, m, w, y);
  thread_local Int8Rows mine;  // the caller's, reused; the workers read it by this reference while the caller waits
  Int8Rows& xq = mine;
  quantize_int8_rows(x, m, w.cols, codec_group(w.codec), xq);
  const size_t tiles = (size_t(w.rows) + tile - 1) / tile;
  ThreadPool::global().parallel_for(
      tiles, 1,
      [&](size_t t0, size_t t1) {
        matmul_int8_range(xq, w, y, int64_t(t0 * tile), std::min(int64_t(t1 * tile), w.rows));
      },
      product_chunks_per_thread(m, w.nbytes(), ThreadPool::global().size()));
}

}  // namespace seedling::ops
#endif
