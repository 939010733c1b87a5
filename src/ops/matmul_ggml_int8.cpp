// The int8-activation kernels of ops/ggml_int8.h: Highway SIMD with runtime dispatch. A weight block's codes are
// unpacked into byte vectors once for up to 4 rows of x (ops/ggml_int8-inl.h), multiplied with x's int8 codes by
// pmaddubsw / pmaddwd or vpdpbusd (the K types' sub-block scales applied in the second, so each block leaves one int32
// vector to sum), and the float steps of the definition run per output in block order, as ref::ggml_matmul_int8 does
// them (the 32-element types and the K types' GEMM one output a lane, a tile of outputs at a time).
// The integer sums are exact in any order, so the bits do not depend on the target, the batch or the threads.
// Targets without fixed 128-bit blocks (SVE, RVV, scalar) run ref::ggml_matmul_int8.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_ggml_int8.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/ggml_int8-inl.h"
#include "ops/ggml_int8.h"
#include "ops/int8_sum-inl.h"  // Reduce4, StoreTileRows

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Q8_K-style rows: per 256 values amax, q = round-to-nearest-even(x * (127 / amax)), and the sum of every 16 q.
void QuantizeSuper(const float* x, int64_t m, int64_t cols, int8_t* q, float* scale, float* sum, int32_t* bsum) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t L = int64_t(hn::Lanes(df)), blocks = cols / 256;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + i * cols + b * 256;
      const int64_t index = i * blocks + b;
      auto vmax = hn::Zero(df);
      for (int64_t k = 0; k < 256; k += L) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + k)));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
      const auto inv = hn::Set(df, amax > 0.0f ? 127.0f / amax : 0.0f);
      int32_t total = 0;
      for (int64_t g = 0; g < 16; ++g) {
        auto vsum = hn::Zero(di);
        for (int64_t k = 16 * g; k < 16 * g + 16; k += L) {
          const auto v = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + k), inv));
          vsum = hn::Add(vsum, v);
          hn::StoreU(hn::DemoteTo(d8, v), d8, q + index * 256 + k);
        }
        bsum[index * 16 + g] = hn::GetLane(hn::SumOfLanes(di, vsum));
        total += bsum[index * 16 + g];
      }
      scale[index] = amax / 127.0f;
      sum[index] = float(total);
    }
  }
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
namespace gi = ggml_int8;

// Byte indices taking int16 lane o * NB + t of a 128-bit window into every lane of 128-bit block t (B bytes a
// vector, NB = B / 16 blocks), for each o < 8 / NB: the K types' per-group scales as pmaddwd's factors.
template <size_t B>
struct Pick {
  static constexpr size_t NB = B / 16;
  alignas(64) uint8_t bytes[8 / NB][B];
  constexpr Pick() : bytes() {
    for (size_t o = 0; o < 8 / NB; ++o)
      for (size_t k = 0; k < B; ++k) bytes[o][k] = uint8_t(2 * (o * NB + k / 16) + k % 2);
  }
};
template <size_t B>
inline constexpr Pick<B> kPick{};

// Software prefetch distance of the 256-value kernels: each block asks for the lines kAhead<T> bytes further on, 4096
// (about 20 blocks, a weight row and more) or Q6_K's 8192. Decode reads each weight once, row after row, and the
// hardware prefetcher alone left the cores waiting on each new block's first line (Q6_K head and Q4_K experts: 4-layer
// Q4_K_M decode on 2 cores 22.3 -> 33 tok/s; 1024 and 16384 bytes gave about the same,
// docs/results/2026-12-05-cpu-kquant-prefetch.md). Q6_K's lines go to L2 only (prefetcht1): 16-layer Q4_K_M decode on 1
// thread +2-4% (its head is Q6_K); Q4_K's matvec was no faster so (2026-12-06). Q6_K at 8192 rather than 4096: its
// matvec -9-11% on one Zen 4 core, 4-layer Q4_K_M decode +2.7% at 1 thread
// (docs/results/2026-12-07-cpu-q6k-prefetch-8192-session35.md); Q4_K is best at 4096 in rows of 2048 values
// (2026-12-07-cpu-kquant-prefetch-distance-session35.md). SuperOuts4 asks at least four rows on (RangeT).
template <Codec T>
constexpr size_t kAhead = T == Codec::Q6_K ? 8192 : 4096;
template <Codec T>
constexpr int kLocality = T == Codec::Q6_K ? 2 : 3;

// A 256-value block made ready for the rows: its codes and its group scales as DotScaled's factors (NV vectors
// each), d and dmin, and where its per-group factors for x's group sums lie.
template <Codec T, class D8>
struct SuperBlock {
  static constexpr size_t B = hn::MaxLanes(D8()), NV = 256 / B;
  hn::Vec<D8> codes[NV];
  hn::Vec<hn::Repartition<int16_t, D8>> scale[NV];
  float d, dmin;
  ggml::IntScales s;              // the other types' integer scales (Q2_K, Q3_K, IQ4_XS)
  uint8_t sub_mins[8];            // Q4_K, Q5_K: the 8 sub-blocks' mins
  HWY_ALIGN int16_t windows[16];  // the 16 group scales, 8 at a time for LoadDup128
};

// Q4_K, Q5_K and Q6_K read their scales straight from the block's bytes into vectors, written by two 128-bit stores
// that the LoadDup128s below read back through store forwarding (a 16-byte load of IntScales::scale, written two
// bytes at a time, stalls until those stores retire: 10-20% of a K-quant decode); the other types go through
// ggml_int_scales.
template <Codec T, class D8>
HWY_INLINE void PrepareSuper(D8 d8, const uint8_t* block, SuperBlock<T, D8>& p) {
  const hn::Repartition<int16_t, D8> d16;
  constexpr size_t B = SuperBlock<T, D8>::B, NB = B / 16;  // NB groups of 16 a vector
  const int16_t* windows = p.windows;
  const hn::Full128<int16_t> d16x8;
  if constexpr (T == Codec::Q6_K) {
    p.d = ggml::f16_at(block + offsetof(BlockQ6_K, d)), p.dmin = 0;
    const auto* sc = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6_K, scales));
    const hn::Full64<int8_t> d8x8;
    hn::Store(hn::PromoteTo(d16x8, hn::LoadU(d8x8, sc)), d16x8, p.windows);
    hn::Store(hn::PromoteTo(d16x8, hn::LoadU(d8x8, sc + 8)), d16x8, p.windows + 8);
  } else if constexpr (T == Codec::Q4_K || T == Codec::Q5_K) {  // sub-block k's scale for groups 2k and 2k + 1
    p.d = ggml::f16_at(block), p.dmin = ggml::f16_at(block + offsetof(BlockQ4_K, dmin));
    uint64_t scales, mins;
    ggml::k_scales_mins(block + offsetof(BlockQ4_K, scales), scales, mins);
    std::memcpy(p.sub_mins, &mins, 8);
    const hn::Full64<uint8_t> du8x8;
    const hn::Full128<uint16_t> du16x8;
    const auto eight =
        hn::BitCast(d16x8, hn::PromoteTo(du16x8, hn::BitCast(du8x8, hn::Set(hn::Full64<uint64_t>(), scales))));
    hn::Store(hn::InterleaveLower(d16x8, eight, eight), d16x8, p.windows);
    hn::Store(hn::InterleaveUpper(d16x8, eight, eight), d16x8, p.windows + 8);
  } else {
    ggml::ggml_int_scales(T, block, p.s);
    p.d = p.s.d, p.dmin = p.s.dmin;
    windows = p.s.scale;
  }
  const auto& pick = kPick<B>.bytes;
  for (size_t v = 0; v < SuperBlock<T, D8>::NV; ++v) {
    p.codes[v] = gi::Codes<T>(d8, block, int(v * B));
    const auto window = hn::LoadDup128(d16, windows + (v * NB) / 8 * 8);
    p.scale[v] = hn::BitCast(d16, hn::TableLookupBytes(hn::BitCast(d8, window), hn::Load(d8, pick[(v * NB) % 8 / NB])));
  }
}

// The block terms that pair x's sums of 16 (bsum) with a factor per group of 16, summed in vectors: lane sums of
// sum over g of factor_g * bsum_g (exact: |bsum| <= 2032, factors below 128, 16 groups). factor(k) gives groups
// [k L, k L + L) as int32 lanes, L the lanes of d32.
template <class D32, class Factor>
HWY_INLINE hn::Vec<D32> GroupTerms(D32 d32, const int32_t* bsum, const Factor& factor) {
  constexpr size_t L = hn::MaxLanes(D32());
  auto acc = hn::Mul(hn::LoadU(d32, bsum), factor(0));
  for (size_t k = 1; k < 16 / L; ++k) acc = hn::Add(acc, hn::Mul(hn::LoadU(d32, bsum + k * L), factor(k)));
  return acc;
}

// One row's integer sums against a prepared block, in lanes: isum (the codes' offset taken off) and msum (the
// mins' sum, for the types with mins; else zero). Their lane sums are the exact integers of ref::ggml_matmul_int8.
// Scalar, the two 16-term loops per row and block took 20-30% of a K-quant matvec (2026-12-06).
template <Codec T, class D8>
HWY_INLINE void SuperDot(D8 d8, const SuperBlock<T, D8>& p, const uint8_t* block, const int8_t* x, const int32_t* bsum,
                         hn::Vec<hn::Repartition<int32_t, D8>>& isum, hn::Vec<hn::Repartition<int32_t, D8>>& msum) {
  const hn::RebindToSigned<D8> di8;
  const hn::Repartition<int32_t, D8> d32;
  constexpr size_t B = SuperBlock<T, D8>::B, L = hn::MaxLanes(decltype(d32)());
  auto sum = hn::Zero(d32);
  for (size_t v = 0; v < SuperBlock<T, D8>::NV; ++v) {
    auto xv = hn::LoadU(di8, x + v * B);
    auto a = p.codes[v];
    if constexpr (gi::kSigned<T>) gi::SignSplit(d8, p.codes[v], xv, a);
    sum = gi::DotScaled(d8, sum, a, xv, p.scale[v]);
  }
  if constexpr (gi::kOffset<T> != 0) {  // the codes carry kOffset: take kOffset * sum of scale_g * bsum_g
    const auto off = GroupTerms(d32, bsum, [&](size_t k) {
      if constexpr (T == Codec::Q6_K) {
        const auto* sc = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6_K, scales));
        return hn::PromoteTo(d32, hn::LoadU(hn::Rebind<int8_t, decltype(d32)>(), sc + k * L));
      } else {
        return hn::PromoteTo(d32, hn::LoadU(hn::Rebind<int16_t, decltype(d32)>(), p.s.scale + k * L));
      }
    });
    sum = hn::Sub(sum, hn::Mul(hn::Set(d32, gi::kOffset<T>), off));
  }
  isum = sum;
  if constexpr (T == Codec::Q2_K) {  // the mins: high nibbles of the scale bytes
    msum = GroupTerms(d32, bsum, [&](size_t k) {
      const auto v = hn::LoadU(hn::Rebind<uint8_t, decltype(d32)>(), block + offsetof(BlockQ2_K, scales) + k * L);
      return hn::BitCast(d32, hn::ShiftRight<4>(hn::PromoteTo(hn::RebindToUnsigned<decltype(d32)>(), v)));
    });
  } else if constexpr (T == Codec::Q4_K || T == Codec::Q5_K) {  // sub-block j's min in lanes 2j and 2j + 1
    msum = GroupTerms(d32, bsum, [&](size_t k) {
      const hn::Repartition<uint64_t, decltype(d32)> d64;
      const auto bytes = hn::LoadU(hn::Rebind<uint8_t, decltype(d64)>(), p.sub_mins + k * L / 2);
      const auto v = hn::PromoteTo(d64, hn::PromoteTo(hn::Rebind<uint32_t, decltype(d64)>(), bytes));
      return hn::BitCast(d32, hn::Or(v, hn::ShiftLeft<32>(v)));
    });
  } else {
    msum = hn::Zero(d32);
  }
}

// The lanes of a vector added down to one 128-bit block (4 int32 lanes).
template <class D32>
HWY_INLINE hn::Vec<hn::Full128<int32_t>> FoldTo128(D32 d32, hn::Vec<D32> v) {
  if constexpr (hn::MaxLanes(D32()) > 4) {
    const hn::Half<D32> dh;
    return FoldTo128(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    return v;
  }
}

template <Codec T>
constexpr bool kHasMin = T == Codec::Q2_K || T == Codec::Q4_K || T == Codec::Q5_K;

// The K types and iq4_xs: rows [i0, i0 + TM) of output row `row` (one weight row), 256-value blocks. The float
// steps run per block in order, as ref::ggml_matmul_int8's. A single row (decode) takes several blocks a step, so
// that one transposing reduction (Reduce4) sums four vectors of lanes at once (the isum and msum of 2 blocks, or the
// isum of 4 for the types without mins) instead of a reduction per sum.
template <Codec T, size_t TM>
HWY_INLINE void SuperRows(const Int8Rows& xq, const uint8_t* row, int64_t i0, float* y, int64_t ldy) {
  using D8 = hn::CappedTag<uint8_t, 64>;
  const D8 d8;
  const hn::Repartition<int32_t, D8> d32;
  const Int8Rows& r = xq;
  const size_t block_bytes = codec_block_bytes(T);
  float acc[TM] = {};
  const auto step = [&](int64_t b, float d, float dmin, int32_t isum, int32_t msum, size_t i) {
    const int64_t index = (i0 + int64_t(i)) * r.blocks + b;
    float t = d * float(isum);
    if constexpr (kHasMin<T>) t = t - dmin * float(msum);
    acc[i] = acc[i] + r.scale[size_t(index)] * t;
  };
  SuperBlock<T, D8> p;
  if constexpr (TM == 1) {
    constexpr int64_t C = kHasMin<T> ? 2 : 4;  // blocks a reduction: 4 sums (isum and msum of 2, or isum of 4)
    for (int64_t b0 = 0; b0 < r.blocks; b0 += C) {
      const int64_t count = std::min(C, r.blocks - b0);
      hn::Vec<decltype(d32)> part[4];
      float d[C], dmin[C];
      for (int64_t k = 0; k < C; ++k) {
        if (k >= count) {
          for (int64_t j = k * 4 / C; j < 4; ++j) part[j] = hn::Zero(d32);
          break;
        }
        const uint8_t* block = row + size_t(b0 + k) * block_bytes;
        for (size_t c = 0; c < block_bytes; c += 64) __builtin_prefetch(block + kAhead<T> + c, 0, kLocality<T>);
        PrepareSuper<T>(d8, block, p);
        d[k] = p.d, dmin[k] = p.dmin;
        const int64_t index = i0 * r.blocks + b0 + k;
        hn::Vec<decltype(d32)> msum;
        SuperDot<T>(d8, p, block, r.q.data() + index * 256, xq.bsum.data() + index * 16, part[k * 4 / C], msum);
        if constexpr (kHasMin<T>) part[2 * k + 1] = msum;
      }
      HWY_ALIGN int32_t sums[4];  // lane j: the lane sum of part[j]
      hn::Store(FoldTo128(d32, Reduce4(d32, part)), hn::Full128<int32_t>(), sums);
      for (int64_t k = 0; k < count; ++k) {
        if constexpr (kHasMin<T>) {
          step(b0 + k, d[k], dmin[k], sums[2 * k], sums[2 * k + 1], 0);
        } else {
          step(b0 + k, d[k], dmin[k], sums[k], 0, 0);
        }
      }
    }
  } else {
    for (int64_t b = 0; b < r.blocks; ++b) {
      const uint8_t* block = row + size_t(b) * block_bytes;
      for (size_t c = 0; c < block_bytes; c += 64) __builtin_prefetch(block + kAhead<T> + c, 0, kLocality<T>);
      PrepareSuper<T>(d8, block, p);
      constexpr size_t R = kHasMin<T> ? 2 : 4;  // rows a reduction, as blocks above
      for (size_t i = 0; i < TM; i += R) {
        hn::Vec<decltype(d32)> part[4];
        for (size_t k = 0; k < R; ++k) {
          if (i + k >= TM) {
            for (size_t j = k * 4 / R; j < 4; ++j) part[j] = hn::Zero(d32);
            break;
          }
          const int64_t index = (i0 + int64_t(i + k)) * r.blocks + b;
          hn::Vec<decltype(d32)> msum;
          SuperDot<T>(d8, p, block, r.q.data() + index * 256, xq.bsum.data() + index * 16, part[k * 4 / R], msum);
          if constexpr (kHasMin<T>) part[2 * k + 1] = msum;
        }
        HWY_ALIGN int32_t sums[4];
        hn::Store(FoldTo128(d32, Reduce4(d32, part)), hn::Full128<int32_t>(), sums);
        for (size_t k = 0; k < R && i + k < TM; ++k) {
          if constexpr (kHasMin<T>) {
            step(b, p.d, p.dmin, sums[2 * k], sums[2 * k + 1], i + k);
          } else {
            step(b, p.d, p.dmin, sums[k], 0, i + k);
          }
        }
      }
    }
  }
  for (size_t i = 0; i < TM; ++i) y[(i0 + int64_t(i)) * ldy] = acc[i];
}

// The K types and iq4_xs, one row of x (decode) against four outputs at once: each output's block is prepared and
// dotted as SuperRows does it, one transposing reduction gives the four outputs' isums (and one more their msums) in
// four lanes, and the float steps run for the four outputs in one 128-bit vector: SuperRows's operations per output
// (d * isum - dmin * msum, times x's block scale, added in block order), so the same bits, with a quarter of the
// scalar steps (in SuperRows<T, 1> they and the reductions took about 40% of a Q4_K matvec, 2026-12-06). Taken
// where it was faster on Zen 4 (matmul_bench --codecs, one thread): Q2_K -25%, Q4_K -35%, Q5_K -15%, IQ4_XS -28%;
// Q6_K was 55% slower so (not for want of prefetch one group ahead, nor from its d and dmin's stores: both tried;
// the cause is not known), Q3_K unclear. Each block asks for the lines `ahead` bytes on (RangeT's choice).
template <Codec T>
constexpr bool kOuts4 = T == Codec::Q2_K || T == Codec::Q4_K || T == Codec::Q5_K || T == Codec::IQ4_XS;
template <Codec T>
HWY_INLINE void SuperOuts4(const Int8Rows& xq, const uint8_t* const (&rows)[4], int64_t i, float* y, int64_t ldy,
                           size_t ahead) {
  using D8 = hn::CappedTag<uint8_t, 64>;
  const D8 d8;
  const hn::Repartition<int32_t, D8> d32;
  const hn::Full128<float> df4;
  const Int8Rows& r = xq;
  const size_t block_bytes = codec_block_bytes(T);
  auto acc = hn::Zero(df4);
  SuperBlock<T, D8> p;
  for (int64_t b = 0; b < r.blocks; ++b) {
    const int64_t index = i * r.blocks + b;
    hn::Vec<decltype(d32)> isum[4], msum[4];
    HWY_ALIGN float d[4], dmin[4];
    for (size_t j = 0; j < 4; ++j) {
      const uint8_t* block = rows[j] + size_t(b) * block_bytes;
      for (size_t c = 0; c < block_bytes; c += 64) __builtin_prefetch(block + ahead + c, 0, kLocality<T>);
      PrepareSuper<T>(d8, block, p);
      d[j] = p.d, dmin[j] = p.dmin;
      SuperDot<T>(d8, p, block, r.q.data() + index * 256, xq.bsum.data() + index * 16, isum[j], msum[j]);
    }
    auto t = hn::Mul(hn::Load(df4, d), hn::ConvertTo(df4, FoldTo128(d32, Reduce4(d32, isum))));
    if constexpr (kHasMin<T>) {
      t = hn::Sub(t, hn::Mul(hn::Load(df4, dmin), hn::ConvertTo(df4, FoldTo128(d32, Reduce4(d32, msum)))));
    }
    acc = hn::Add(acc, hn::Mul(hn::Set(df4, r.scale[size_t(index)]), t));
  }
  HWY_ALIGN float out[4];
  hn::Store(acc, df4, out);
  for (size_t j = 0; j < 4; ++j) y[int64_t(j) + i * ldy] = out[j];
}

// The 32-element types, a tile of TN outputs (the int32 lanes of a 32-byte vector) at a time, rows [i0, i0 + TM):
// as matmul_int8.cpp's TileRows, each block's codes are read once for the TM rows, four outputs' integer sums are
// reduced into one vector (Reduce4, then ReduceBlocks: lane j = output j's exact isum), and the float steps of the
// definition run one output a lane: the same operations in the same order as ref::ggml_matmul_int8's, so the same
// bits, with TN outputs' d, dmin and steps in one vector each. rows[j] is output j's weight row (a short tile repeats
// its last), offsets lane j its byte offset from rows[0]; with ahead, each block asks for the line ahead bytes
// further on in every row (the next tile's), into L2 (prefetcht2, as matmul_int8.cpp's tiles): into L1 the next
// tile's lines pushed out this one's (1 thread, 37 MB matvec, Zen 4: Q8_0 -31%, Q5_0 -9%, IQ4_NL -7%, Q4_0 -7% of
// the time, docs/results/2026-12-06-cpu-q4g64-output-pairs-session32.md).
template <Codec T, size_t TM>
HWY_INLINE void BlockTileRows(const Int8Rows& xq, const uint8_t* const* rows,
                              hn::Vec<hn::Repartition<int32_t, hn::CappedTag<uint8_t, 32>>> offsets, int64_t i0,
                              float* y, int64_t ldy, int64_t count, size_t ahead) {
  const hn::CappedTag<uint8_t, 32> d8;
  const hn::RebindToSigned<decltype(d8)> di8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  constexpr size_t B = hn::MaxLanes(decltype(d8)()), S = 32 / B, TN = hn::MaxLanes(decltype(d32)());
  const size_t block_bytes = codec_block_bytes(T);
  hn::Vec<decltype(df)> acc[TM];
  for (size_t i = 0; i < TM; ++i) acc[i] = hn::Zero(df);
  HWY_ALIGN float ds[TN], dmins[TN];
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const size_t at = size_t(b) * block_bytes;
    if (ahead != 0) {
      for (size_t j = 0; j < TN; ++j) __builtin_prefetch(rows[j] + at + ahead, 0, 1);
    }
    hn::Vec<decltype(d32)> reduced[TM][TN / 4];
    for (size_t g = 0; g < TN / 4; ++g) {
      hn::Vec<decltype(d8)> codes[4][S];
      for (size_t j = 0; j < 4; ++j)
        for (size_t e = 0; e < S; ++e) codes[j][e] = gi::Codes<T>(d8, rows[4 * g + j] + at, int(e * B));
      for (size_t i = 0; i < TM; ++i) {
        const int8_t* x = xq.q.data() + ((i0 + int64_t(i)) * xq.blocks + b) * 32;
        hn::Vec<decltype(d32)> part[4];
        for (size_t j = 0; j < 4; ++j) {
          part[j] = hn::Zero(d32);
          for (size_t e = 0; e < S; ++e) {
            auto xv = hn::LoadU(di8, x + e * B);
            auto a = codes[j][e];
            if constexpr (gi::kSigned<T>) gi::SignSplit(d8, codes[j][e], xv, a);
            part[j] = gi::Dot4(d8, part[j], a, xv);
          }
        }
        reduced[i][g] = Reduce4(d32, part);
      }
    }
    hn::Vec<decltype(df)> d, dmin;
    if constexpr (T == Codec::MXFP4_GGML) {  // an e8m0 exponent, not a float16
      for (size_t j = 0; j < TN; ++j) ggml::ggml_d_dmin(T, rows[j] + at, ds[j], dmins[j]);
      d = hn::Load(df, ds);
    } else {  // float16 d at the block's start (and Q5_1's m after it)
      const auto f16 = [&](size_t field) {
        const auto g = hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(rows[0] + at + field), offsets);
        return F16ToF32(d32, g);
      };
      d = f16(0);
      if constexpr (T == Codec::Q5_1) dmin = hn::Neg(f16(offsetof(BlockQ5_1, m)));
    }
    for (size_t i = 0; i < TM; ++i) {
      const size_t index = size_t((i0 + int64_t(i)) * xq.blocks + b);
      const float xsum = xq.sum[index];
      auto isum = ReduceBlocks(d32, reduced[i]);
      if constexpr (gi::kOffset<T> != 0) isum = hn::Sub(isum, hn::Set(d32, gi::kOffset<T> * int32_t(xsum)));
      auto t = hn::Mul(d, hn::ConvertTo(df, isum));
      if constexpr (T == Codec::Q5_1) t = hn::Sub(t, hn::Mul(dmin, hn::Set(df, xsum)));
      acc[i] = hn::Add(acc[i], hn::Mul(hn::Set(df, xq.scale[index]), t));
    }
  }
  StoreTileRows<TM>(df, acc, y, i0, ldy, count);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// ---- Decode of the 32-element types on AVX-512: tiles of 16 outputs ----
//
// BlockTileRows takes 8 outputs a 256-bit vector and widens each output's codes on its own; these take 16, several
// outputs a 512-bit vector, so one load, nibble split or table lookup serves more outputs and one Reduce4 leaves four
// outputs' exact integer sums. The float steps are BlockTileRows's, lane by lane: the same bits.
//
// Q4_0 (and the signed 4-bit levels with VNNI): four outputs' 16 code bytes a vector, output 4b + k in 128-bit block b
// of vector k; their low nibbles (elements 0-15) in one vector and high nibbles (16-31) in another, against x's
// elements 0-15 and 16-31 broadcast to every block. Q5_0's and Q5_1's fifth bits (qh) join their nibbles from two
// 64-bit masks, one bit a byte lane (a masked move of 16). IQ4_NL's and MXFP4's nibbles index a table of their levels
// plus 128 (unsigned bytes for vpdpbusd, exact with VNNI: no saturation), and the sums less 128 times x's block sum are
// the signed levels' exact sums.
template <Codec T>
inline constexpr bool kNibbleTile16 = T == Codec::Q4_0 || T == Codec::Q5_0 || T == Codec::Q5_1
#if HWY_TARGET <= HWY_AVX3_DL
                                      || T == Codec::IQ4_NL || T == Codec::MXFP4_GGML
#endif
    ;
template <Codec T>
inline constexpr bool kTile16 = kNibbleTile16<T>
#if HWY_TARGET <= HWY_AVX3_DL
                                || T == Codec::Q8_0
#endif
    ;

// The level tables of IQ4_NL and MXFP4 (doubled), each plus 128 (the sign bit flipped): unsigned bytes.
struct UnsignedLevels {
  uint8_t iq4nl[16], mxfp4[16];
  constexpr UnsignedLevels() : iq4nl(), mxfp4() {
    for (int i = 0; i < 16; ++i) {
      iq4nl[i] = uint8_t(gi::kBytes.iq4nl[i] ^ 0x80);
      mxfp4[i] = uint8_t(gi::kBytes.mxfp4[i] ^ 0x80);
    }
  }
};
inline constexpr UnsignedLevels kUnsignedLevels{};

// The 16 outputs' block scale d: a float16 at the block's start, or MXFP4's e8m0 byte (ggml::e8m0_half: 2^(e - 128)).
template <Codec T>
HWY_INLINE hn::Vec<hn::Full512<float>> Tile16Scale(const uint8_t* block0, hn::Vec<hn::Full512<int32_t>> offsets) {
  const hn::Full512<int32_t> d32;
  const auto g = hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(block0), offsets);
  if constexpr (T == Codec::MXFP4_GGML) {
    const auto e = hn::And(g, hn::Set(d32, 0xFF));
    const auto small = hn::Shl(hn::Set(d32, 0x00200000), e);  // e < 2: the subnormals 2^-128, 2^-127
    const auto normal = hn::ShiftLeft<23>(hn::Sub(e, hn::Set(d32, 1)));
    return hn::BitCast(hn::Full512<float>(), hn::IfThenElse(hn::Lt(e, hn::Set(d32, 2)), small, normal));
  } else {
    return F16ToF32(d32, g);
  }
}

// Rows [i0, i0 + TM)'s exact integer sums of one block of the 16 outputs (output j in lane j), for the nibble types.
template <Codec T, size_t TM>
HWY_INLINE void NibbleSums16(const Int8Rows& xq, const uint8_t* const* rows, size_t at, int64_t i0, int64_t b,
                             hn::Vec<hn::Full512<int32_t>>* isum) {
  const hn::Full512<uint8_t> d8;
  const hn::Full512<int8_t> di8;
  const hn::Full512<int32_t> d32;
  constexpr size_t qs = T == Codec::Q4_0     ? offsetof(BlockQ4_0, qs)
                        : T == Codec::Q5_0   ? offsetof(BlockQ5_0, qs)
                        : T == Codec::Q5_1   ? offsetof(BlockQ5_1, qs)
                        : T == Codec::IQ4_NL ? offsetof(BlockIq4Nl, qs)
                                             : offsetof(BlockMxfp4Ggml, qs);
  constexpr bool kLevels = T == Codec::IQ4_NL || T == Codec::MXFP4_GGML;  // signed levels through a table
  constexpr int32_t offset = kLevels ? 128 : gi::kOffset<T>;
  hn::Vec<decltype(d8)> lo[4], hi[4];
  for (size_t k = 0; k < 4; ++k) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + at + qs)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 + k] + at + qs)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[8 + k] + at + qs)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[12 + k] + at + qs)), 3);
    const hn::Vec<decltype(d8)> codes{v};
    lo[k] = hn::And(codes, hn::Set(d8, uint8_t{0x0F}));
    hi[k] = hn::ShiftRight<4>(codes);
    if constexpr (T == Codec::Q5_0 || T == Codec::Q5_1) {  // element j's fifth bit: bit j of the block's qh
      constexpr size_t qh = T == Codec::Q5_0 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh);
      uint64_t lo_bits = 0, hi_bits = 0;
      for (size_t b = 0; b < 4; ++b) {
        uint32_t h;
        std::memcpy(&h, rows[4 * b + k] + at + qh, 4);
        lo_bits |= uint64_t(h & 0xFFFF) << (16 * b);
        hi_bits |= uint64_t(h >> 16) << (16 * b);
      }
      lo[k] = hn::Or(lo[k], hn::Vec<decltype(d8)>{_mm512_maskz_mov_epi8(lo_bits, _mm512_set1_epi8(16))});
      hi[k] = hn::Or(hi[k], hn::Vec<decltype(d8)>{_mm512_maskz_mov_epi8(hi_bits, _mm512_set1_epi8(16))});
    }
    if constexpr (kLevels) {
      const auto table = hn::LoadDup128(d8, T == Codec::IQ4_NL ? kUnsignedLevels.iq4nl : kUnsignedLevels.mxfp4);
      lo[k] = hn::TableLookupBytes(table, lo[k]);
      hi[k] = hn::TableLookupBytes(table, hi[k]);
    }
  }
  for (size_t i = 0; i < TM; ++i) {
    const size_t index = size_t((i0 + int64_t(i)) * xq.blocks + b);
    const int8_t* x = xq.q.data() + index * 32;
    const hn::Vec<decltype(di8)> xlo{_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)))};
    const hn::Vec<decltype(di8)> xhi{_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)))};
    hn::Vec<decltype(d32)> part[4];
    for (size_t k = 0; k < 4; ++k) part[k] = gi::Dot4(d8, gi::Dot4(d8, hn::Zero(d32), lo[k], xlo), hi[k], xhi);
    isum[i] = hn::Sub(Reduce4(d32, part), hn::Set(d32, offset * int32_t(xq.sum[index])));
  }
}

#if HWY_TARGET <= HWY_AVX3_DL
// The same for Q8_0 with VNNI: two outputs' 32 signed codes a vector, made unsigned by adding 128 (a xor of the sign
// bit, once for every row), x's 32 activations in both halves; vpdpbusd's sums less 128 times x's block sum are the
// signed codes' exact sums. Output pairs (k, k + 4) and (8 + k, 12 + k): two Reduce4s and ReducePairHalves leave output
// j in lane j. (BlockTileRows splits each code vector's signs into x once per row.)
template <size_t TM>
HWY_INLINE void Q8_0Sums16(const Int8Rows& xq, const uint8_t* const* rows, size_t at, int64_t i0, int64_t b,
                           hn::Vec<hn::Full512<int32_t>>* isum) {
  const hn::Full512<uint8_t> d8;
  const hn::Full512<int8_t> di8;
  const hn::Full256<int8_t> dh;
  const hn::Full512<int32_t> d32;
  constexpr size_t qs = offsetof(BlockQ8_0, qs);
  hn::Vec<decltype(d32)> half[2][TM];
  for (size_t g = 0; g < 2; ++g) {
    hn::Vec<decltype(d8)> u[4];
    for (size_t k = 0; k < 4; ++k) {
      const size_t a = 8 * g + k;  // outputs a and a + 4 of the tile
      const auto* lo = reinterpret_cast<const int8_t*>(rows[a] + at + qs);
      const auto* hi = reinterpret_cast<const int8_t*>(rows[a + 4] + at + qs);
      u[k] = hn::Xor(hn::BitCast(d8, hn::Combine(di8, hn::LoadU(dh, hi), hn::LoadU(dh, lo))), hn::Set(d8, 0x80));
    }
    for (size_t i = 0; i < TM; ++i) {
      const int8_t* x = xq.q.data() + size_t((i0 + int64_t(i)) * xq.blocks + b) * 32;
      const auto xv = hn::LoadU(dh, x);
      const auto x2 = hn::Combine(di8, xv, xv);
      hn::Vec<decltype(d32)> part[4];
      for (size_t k = 0; k < 4; ++k) part[k] = gi::Dot4(d8, hn::Zero(d32), u[k], x2);
      half[g][i] = Reduce4(d32, part);
    }
  }
  for (size_t i = 0; i < TM; ++i) {
    const size_t index = size_t((i0 + int64_t(i)) * xq.blocks + b);
    isum[i] = hn::Sub(ReducePairHalves(half[0][i], half[1][i]), hn::Set(d32, 128 * int32_t(xq.sum[index])));
  }
}
#endif

// Rows [i0, i0 + TM) of a tile of 16 outputs (rows, offsets, ahead as BlockTileRows's).
template <Codec T, size_t TM>
HWY_INLINE void Tile16(const Int8Rows& xq, const uint8_t* const* rows, hn::Vec<hn::Full512<int32_t>> offsets,
                       int64_t i0, float* y, int64_t ldy, int64_t count, size_t ahead) {
  const hn::Full512<int32_t> d32;
  const hn::Full512<float> df;
  const size_t block_bytes = codec_block_bytes(T);
  hn::Vec<decltype(df)> acc[TM];
  for (size_t i = 0; i < TM; ++i) acc[i] = hn::Zero(df);
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const size_t at = size_t(b) * block_bytes;
    if (ahead != 0) {
      for (size_t j = 0; j < 16; ++j) __builtin_prefetch(rows[j] + at + ahead, 0, 1);
    }
    // The scale's gather before the nibble types' sums and after Q8_0's: each the faster placement (Q4_0 6%, Q8_0
    // 3-7% of a 1-thread matvec on Zen 4).
    hn::Vec<decltype(df)> d;
    if constexpr (T != Codec::Q8_0) d = Tile16Scale<T>(rows[0] + at, offsets);
    hn::Vec<decltype(d32)> isum[TM];
#if HWY_TARGET <= HWY_AVX3_DL
    if constexpr (T == Codec::Q8_0) {
      Q8_0Sums16<TM>(xq, rows, at, i0, b, isum);
    } else
#endif
    {
      NibbleSums16<T, TM>(xq, rows, at, i0, b, isum);
    }
    if constexpr (T == Codec::Q8_0) d = Tile16Scale<T>(rows[0] + at, offsets);
    hn::Vec<decltype(df)> dmin;
    if constexpr (T == Codec::Q5_1) {  // its min m, negated as BlockTileRows's dmin
      const auto m =
          hn::GatherOffset(d32, reinterpret_cast<const int32_t*>(rows[0] + at + offsetof(BlockQ5_1, m)), offsets);
      dmin = hn::Neg(F16ToF32(d32, m));
    }
    for (size_t i = 0; i < TM; ++i) {
      const size_t index = size_t((i0 + int64_t(i)) * xq.blocks + b);
      auto t = hn::Mul(d, hn::ConvertTo(df, isum[i]));
      if constexpr (T == Codec::Q5_1) t = hn::Sub(t, hn::Mul(dmin, hn::Set(df, xq.sum[index])));
      acc[i] = hn::Add(acc[i], hn::Mul(hn::Set(df, xq.scale[index]), t));
    }
  }
  StoreTileRows<TM>(df, acc, y, i0, ldy, count);
}
#endif

// ---- The GEMM form of the 256-value types with unsigned codes (prefill): a tile repacked once, every row on it ----
//
// A tile is TN outputs (the int32 lanes of a full vector). Repacked, its block b is 64 byte vectors, vector q holding
// in bytes 4j..4j+3 output j's codes of elements 4q..4q+3 (Codes<T>'s bytes), then per group g of 16 three vectors
// (the scale as an int16 pair, DotScaled's factor), then per pair of groups 2k, 2k + 1 the two scales and the two mins
// as int16 pairs, then d and dmin. A row's block
// is 64 lane-local dots of a code vector with the row's four activations of those elements broadcast (DotScaled, the
// scale folded in; with VNNI, vpdpbusd over a group's four vectors, then times its scale), each int32 lane summing
// its own output's products: lane j ends with output j's isum, the same exact integer SuperRows sums across lanes. msum
// and the offset's sum take the group sums of x (bsum) times the min or the scale as int16 pairs (two groups a lane,
// pmaddwd or vpdpwssd), exact: |bsum| <= 2032, min <= 63, |scale| <= 128, 16 groups. The float steps are
// SuperRows's, lane by lane. So the GEMM gives the row kernel's bits; it repacks once where the row kernel decodes each
// block once per 4 rows, and adds no sum across lanes.
template <Codec T>
constexpr bool kTileK =
    T == Codec::Q2_K || T == Codec::Q3_K || T == Codec::Q4_K || T == Codec::Q5_K || T == Codec::Q6_K;
inline constexpr int64_t kTileKRows = 8;  // from 8 rows; 4 gave the same 64-token prefill (2 cores, 2026-12-06)
inline constexpr size_t kTileKVectors = 64 + 16 + 8 + 8 + 2;            // a block's vectors in the tile
inline constexpr size_t kTileScales = 80, kTileMins = 88, kTileD = 96;  // where they start

// acc + per int32 lane the sum of the products of its two int16 halves in a and in b (pmaddwd; vpdpwssd with VNNI).
template <class D32>
HWY_INLINE hn::Vec<D32> PairDot(D32 d32, hn::Vec<D32> acc, hn::Vec<D32> a, hn::Vec<D32> b) {
  constexpr size_t kWidth = hn::MaxLanes(D32()) * 4;
#if HWY_TARGET == HWY_AVX3_DL
  (void)d32;
  auto raw = acc.raw;
  asm("%{evex%} vpdpwssd %2, %1, %0" : "+v"(raw) : "v"(a.raw), "v"(b.raw));
  return hn::Vec<D32>{raw};
#elif HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  (void)d32;
  if constexpr (kWidth == 64) {
    return hn::Add(acc, hn::Vec<D32>{_mm512_madd_epi16(a.raw, b.raw)});
  } else if constexpr (kWidth == 32) {
    return hn::Add(acc, hn::Vec<D32>{_mm256_madd_epi16(a.raw, b.raw)});
  } else {
    return hn::Add(acc, hn::Vec<D32>{_mm_madd_epi16(a.raw, b.raw)});
  }
#else
  (void)kWidth;
  const auto low = [](hn::Vec<D32> v) { return hn::ShiftRight<16>(hn::ShiftLeft<16>(v)); };
  return hn::Add(acc, hn::Add(hn::Mul(low(a), low(b)), hn::Mul(hn::ShiftRight<16>(a), hn::ShiftRight<16>(b))));
#endif
}

// Rows [i0, i0 + TM) against a repacked tile (GemmRangeK's layout): count outputs into y (row stride ldy).
template <Codec T, size_t TM>
HWY_INLINE void GemmRowsK(const Int8Rows& xq, const int32_t* bpairs, const uint8_t* HWY_RESTRICT tile, int64_t i0,
                          float* y, int64_t ldy, int64_t count) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::RebindToSigned<decltype(d8)> di8;
  const hn::Repartition<int16_t, decltype(d8)> d16;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  constexpr size_t V = hn::MaxLanes(decltype(d8)());
  constexpr bool kMin = T == Codec::Q2_K || T == Codec::Q4_K || T == Codec::Q5_K;
  const int64_t blocks = xq.blocks;
  const auto vec_f = [&](const uint8_t* src, size_t v) {
    return hn::Load(df, reinterpret_cast<const float*>(src + v * V));
  };
  hn::Vec<decltype(df)> acc[TM];
  for (size_t r = 0; r < TM; ++r) acc[r] = hn::Zero(df);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = tile + size_t(b) * kTileKVectors * V;
    const int8_t* x[TM];
    hn::Vec<decltype(d32)> isum[TM];
    for (size_t r = 0; r < TM; ++r) {
      const int64_t at = (i0 + int64_t(r)) * blocks + b;
      x[r] = xq.q.data() + at * 256;
      isum[r] = hn::Zero(d32);
    }
    for (size_t g = 0; g < 16; ++g) {
      const auto pair = hn::BitCast(d16, hn::Load(d8, src + (64 + g) * V));
      // The group's four code vectors, each with every row's four activations of its elements broadcast.
      const auto each_code = [&](const auto& dot_into) {
        for (size_t k = 0; k < 4; ++k) {
          const size_t q = 4 * g + k;
          const auto codes = hn::Load(d8, src + q * V);
          for (size_t r = 0; r < TM; ++r) {
            int32_t four;
            std::memcpy(&four, x[r] + 4 * q, 4);
            dot_into(r, codes, hn::BitCast(di8, hn::Set(d32, four)));
          }
        }
      };
#if HWY_TARGET == HWY_AVX3_DL
      // vpdpbusd: the group's products into one int32 dot per lane (at most 16 * 63 * 127), then times the group's
      // scale (the pair's upper int16) into isum: the same exact integers as DotScaled's, fewer uops.
      hn::Vec<decltype(d32)> dot[TM];
      for (size_t r = 0; r < TM; ++r) dot[r] = hn::Zero(d32);
      each_code([&](size_t r, auto codes, auto xv) {
        auto a = dot[r].raw;
        asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(a) : "v"(codes.raw), "v"(xv.raw));
        dot[r] = hn::Vec<decltype(d32)>{a};
      });
      const auto scale = hn::ShiftRight<16>(hn::BitCast(d32, pair));
      for (size_t r = 0; r < TM; ++r) isum[r] = hn::Add(isum[r], hn::Mul(dot[r], scale));
#else
      each_code([&](size_t r, auto codes, auto xv) { isum[r] = gi::DotScaled(d8, isum[r], codes, xv, pair); });
#endif
    }
    const auto d = vec_f(src, kTileD);
    for (size_t r = 0; r < TM; ++r) {
      // x's group sums of this block as int16 pairs (GemmRangeK's bpairs) against the tile's scale and min pairs.
      const int32_t* bp = bpairs + ((i0 + int64_t(r)) * blocks + b) * 8;
      auto off = hn::Zero(d32), msum = hn::Zero(d32);
      for (size_t k = 0; k < 8; ++k) {
        const auto pair = hn::Set(d32, bp[k]);
        if constexpr (gi::kOffset<T> != 0)
          off = PairDot(d32, off, hn::Load(d32, reinterpret_cast<const int32_t*>(src + (kTileScales + k) * V)), pair);
        if constexpr (kMin)
          msum = PairDot(d32, msum, hn::Load(d32, reinterpret_cast<const int32_t*>(src + (kTileMins + k) * V)), pair);
      }
      if constexpr (gi::kOffset<T> != 0) isum[r] = hn::Sub(isum[r], hn::Mul(hn::Set(d32, gi::kOffset<T>), off));
      auto t = hn::Mul(d, hn::ConvertTo(df, isum[r]));
      if constexpr (kMin) t = hn::Sub(t, hn::Mul(vec_f(src, kTileD + 1), hn::ConvertTo(df, msum)));
      const float scale = xq.scale[size_t((i0 + int64_t(r)) * blocks + b)];
      acc[r] = hn::Add(acc[r], hn::Mul(hn::Set(df, scale), t));
    }
  }
  StoreTileRows<TM>(df, acc, y, i0, ldy, count);
}

// The GEMMs' code repack, for a block of E elements of TN outputs (TN = the int32 lanes of a full vector): StageCodes
// writes one output's codes (Codes<T>, E bytes); TransposeCodes turns the TN outputs' staged codes (output j at codes
// + j E) into the tile's E / 4 vectors, vector q holding in bytes 4j..4j+3 output j's codes 4q..4q+3.
template <Codec T, size_t E>
HWY_INLINE void StageCodes(const uint8_t* block, uint8_t* out) {
  const hn::CappedTag<uint8_t, (E < 64 ? E : 64)> dc;  // Codes<T>'s widest that stays inside the block
  for (size_t e0 = 0; e0 < E; e0 += hn::Lanes(dc)) hn::Store(gi::Codes<T>(dc, block, int(e0)), dc, out + e0);
}
template <size_t E>
HWY_INLINE void TransposeCodes(const uint8_t* codes, uint8_t* dst) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  constexpr size_t V = hn::MaxLanes(decltype(d8)()), TN = hn::MaxLanes(decltype(d32)());
  HWY_ALIGN int32_t index[TN];
  for (size_t j = 0; j < TN; ++j) index[j] = int32_t(j * E / 4);  // output j's dword q at codes + 4 (j E / 4 + q)
  const auto at = hn::Load(d32, index);
  const auto* dwords = reinterpret_cast<const int32_t*>(codes);
  for (size_t q = 0; q < E / 4; ++q) hn::Store(hn::BitCast(d8, hn::GatherIndex(d32, dwords + q, at)), d8, dst + q * V);
}

// Every row of a repacked tile, in groups: run.template operator()<TM>(i) for rows [i, i + TM), TM = 4 where a full
// vector is 64 bytes (32 vector registers: 4 rows share each code vector's load), then 2, then 1.
template <size_t V, class F>
HWY_INLINE void ForRowGroups(int64_t rows, F&& run) {
  int64_t i = 0;
  if constexpr (V == 64) {
    for (; i + 4 <= rows; i += 4) run.template operator()<4>(i);
  }
  for (; i + 2 <= rows; i += 2) run.template operator()<2>(i);
  for (; i < rows; ++i) run.template operator()<1>(i);
}

template <Codec T>
HWY_NOINLINE void GemmRangeK(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  constexpr size_t V = hn::MaxLanes(decltype(d8)()), TN = hn::MaxLanes(decltype(d32)());
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes(), block_bytes = codec_block_bytes(T);
  const int64_t blocks = xq.blocks;
  uint8_t* const tile = TileBuffer(size_t(blocks) * kTileKVectors * V);
  HWY_ALIGN uint8_t codes[TN * 256];
  HWY_ALIGN int32_t pairs[16 * TN], scale2[8 * TN], min2[8 * TN];
  HWY_ALIGN float ds[TN], dmins[TN];
  // Every row's group sums per block as 8 int16 pairs (|bsum| <= 2032), for GemmRowsK's PairDot.
  thread_local std::vector<int32_t> bpairs;
  bpairs.resize(size_t(xq.rows * blocks * 8));
  for (size_t at = 0; at < bpairs.size(); ++at)
    bpairs[at] = int32_t(uint32_t(uint16_t(xq.bsum[2 * at])) | uint32_t(uint16_t(xq.bsum[2 * at + 1])) << 16);
  for (int64_t n = n0; n < n1; n += int64_t(TN)) {
    const int64_t count = std::min(int64_t(TN), n1 - n);
    for (int64_t b = 0; b < blocks; ++b) {
      for (size_t j = 0; j < TN; ++j) {  // a short tile repeats its last output in the lanes past it
        const uint8_t* block = base + size_t(n + std::min(int64_t(j), count - 1)) * row_bytes + size_t(b) * block_bytes;
        ggml::IntScales s;
        ggml::ggml_int_scales(T, block, s);
        StageCodes<T, 256>(block, codes + j * 256);
        const auto two = [](int16_t lo, int16_t hi) {
          return int32_t(uint32_t(uint16_t(lo)) | uint32_t(uint16_t(hi)) << 16);
        };
        for (size_t g = 0; g < 16; ++g) pairs[g * TN + j] = two(s.scale[g], s.scale[g]);
        for (size_t k = 0; k < 8; ++k) {
          scale2[k * TN + j] = two(s.scale[2 * k], s.scale[2 * k + 1]);
          min2[k * TN + j] = two(s.min[2 * k], s.min[2 * k + 1]);
        }
        ds[j] = s.d, dmins[j] = s.dmin;
      }
      uint8_t* dst = tile + size_t(b) * kTileKVectors * V;
      TransposeCodes<256>(codes, dst);
      for (size_t g = 0; g < 16; ++g) hn::Store(hn::BitCast(d8, hn::Load(d32, pairs + g * TN)), d8, dst + (64 + g) * V);
      for (size_t k = 0; k < 8; ++k) {
        hn::Store(hn::BitCast(d8, hn::Load(d32, scale2 + k * TN)), d8, dst + (kTileScales + k) * V);
        hn::Store(hn::BitCast(d8, hn::Load(d32, min2 + k * TN)), d8, dst + (kTileMins + k) * V);
      }
      hn::Store(hn::Load(df, ds), df, reinterpret_cast<float*>(dst + kTileD * V));
      hn::Store(hn::Load(df, dmins), df, reinterpret_cast<float*>(dst + (kTileD + 1) * V));
    }
    ForRowGroups<V>(xq.rows,
                    [&]<size_t TM>(int64_t i) { GemmRowsK<T, TM>(xq, bpairs.data(), tile, i, y + n, w.rows, count); });
  }
}

// ---- The GEMM form of the 32-element types (prefill): a tile repacked once, every row on it ----
//
// A tile is TN outputs (the int32 lanes of a full vector). Repacked, its block b is 8 byte vectors, vector q holding
// in bytes 4j..4j+3 output j's codes of elements 4q..4q+3 (Codes<T>'s bytes), then d (and Q5_1's dmin) of the TN
// outputs as float vectors. A row's four activations of those elements broadcast to every lane and one lane-local dot
// per vector (the signed types through SignSplit, lane by lane) leave lane j output j's exact isum; the float steps
// are BlockTileRows's, lane by lane. So the GEMM gives the tile kernel's bits, decoding each block once per tile
// instead of once per 4 rows, and adds no sum across lanes.
inline constexpr size_t kTile32Vectors = 8 + 2;  // a block's vectors in the tile: codes, d, dmin

// Rows [i0, i0 + TM) against a repacked tile (GemmRange32's layout): count outputs into y (row stride ldy).
template <Codec T, size_t TM>
HWY_INLINE void GemmRows32(const Int8Rows& xq, const uint8_t* HWY_RESTRICT tile, int64_t i0, float* y, int64_t ldy,
                           int64_t count) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::RebindToSigned<decltype(d8)> di8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  const hn::Rebind<float, decltype(d32)> df;
  constexpr size_t V = hn::MaxLanes(decltype(d8)());
  const int64_t blocks = xq.blocks;
  hn::Vec<decltype(df)> acc[TM];
  for (size_t r = 0; r < TM; ++r) acc[r] = hn::Zero(df);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* src = tile + size_t(b) * kTile32Vectors * V;
    const int8_t* x[TM];
    hn::Vec<decltype(d32)> isum[TM];
    for (size_t r = 0; r < TM; ++r) {
      x[r] = xq.q.data() + ((i0 + int64_t(r)) * blocks + b) * 32;
      isum[r] = hn::Zero(d32);
    }
    for (size_t q = 0; q < 8; ++q) {
      const auto codes = hn::Load(d8, src + q * V);
      for (size_t r = 0; r < TM; ++r) {
        int32_t four;
        std::memcpy(&four, x[r] + 4 * q, 4);
        auto xv = hn::BitCast(di8, hn::Set(d32, four));
        auto a = codes;
        if constexpr (gi::kSigned<T>) gi::SignSplit(d8, codes, xv, a);
        isum[r] = gi::Dot4(d8, isum[r], a, xv);
      }
    }
    const auto d = hn::Load(df, reinterpret_cast<const float*>(src + 8 * V));
    for (size_t r = 0; r < TM; ++r) {
      const size_t index = size_t((i0 + int64_t(r)) * blocks + b);
      const float xsum = xq.sum[index];
      if constexpr (gi::kOffset<T> != 0) isum[r] = hn::Sub(isum[r], hn::Set(d32, gi::kOffset<T> * int32_t(xsum)));
      auto t = hn::Mul(d, hn::ConvertTo(df, isum[r]));
      if constexpr (T == Codec::Q5_1)
        t = hn::Sub(t, hn::Mul(hn::Load(df, reinterpret_cast<const float*>(src + 9 * V)), hn::Set(df, xsum)));
      acc[r] = hn::Add(acc[r], hn::Mul(hn::Set(df, xq.scale[index]), t));
    }
  }
  StoreTileRows<TM>(df, acc, y, i0, ldy, count);
}

template <Codec T>
HWY_NOINLINE void GemmRange32(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  constexpr size_t V = hn::MaxLanes(decltype(d8)()), TN = hn::MaxLanes(decltype(d32)());
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes(), block_bytes = codec_block_bytes(T);
  const int64_t blocks = xq.blocks;
  uint8_t* const tile = TileBuffer(size_t(blocks) * kTile32Vectors * V);
  HWY_ALIGN uint8_t codes[TN * 32];
  HWY_ALIGN float ds[TN], dmins[TN];
  for (int64_t n = n0; n < n1; n += int64_t(TN)) {
    const int64_t count = std::min(int64_t(TN), n1 - n);
    for (int64_t b = 0; b < blocks; ++b) {
      for (size_t j = 0; j < TN; ++j) {  // a short tile repeats its last output in the lanes past it
        const uint8_t* block = base + size_t(n + std::min(int64_t(j), count - 1)) * row_bytes + size_t(b) * block_bytes;
        StageCodes<T, 32>(block, codes + j * 32);
        ggml::ggml_d_dmin(T, block, ds[j], dmins[j]);
      }
      uint8_t* dst = tile + size_t(b) * kTile32Vectors * V;
      TransposeCodes<32>(codes, dst);
      std::memcpy(dst + 8 * V, ds, sizeof(ds));
      std::memcpy(dst + 9 * V, dmins, sizeof(dmins));
    }
    ForRowGroups<V>(xq.rows, [&]<size_t TM>(int64_t i) { GemmRows32<T, TM>(xq, tile, i, y + n, w.rows, count); });
  }
}

// Aligned to a cache line: where the linker happens to place the row kernel moved 2-core decode by 5-10%
// (loop alignment), from one unrelated change to the next.
template <Codec T>
__attribute__((aligned(64))) void RangeT(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  if constexpr (kTileK<T>) {
    if (xq.rows >= kTileKRows) return GemmRangeK<T>(xq, w, y, n0, n1);
  }
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes();
  const int64_t m = xq.rows;
  if constexpr (codec_group(T) == 32) {
    if (m >= kTileKRows) return GemmRange32<T>(xq, w, y, n0, n1);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (kTile16<T>) {  // 16 outputs a tile, as BlockTileRows's 8 below
      for (int64_t n = n0; n < n1; n += 16) {
        const int64_t count = std::min(int64_t(16), n1 - n);
        const uint8_t* rows[16];
        HWY_ALIGN int32_t offsets[16];
        for (size_t j = 0; j < 16; ++j) {
          const int64_t r = std::min(int64_t(j), count - 1);
          rows[j] = base + size_t(n + r) * row_bytes;
          offsets[j] = int32_t(size_t(r) * row_bytes);
        }
        const auto offset = hn::Load(hn::Full512<int32_t>(), offsets);
        const size_t ahead = n + 32 <= n1 ? 16 * row_bytes : 0;
        int64_t i = 0;
        const auto tile = [&]<size_t TM>(int64_t i0) {
          Tile16<T, TM>(xq, rows, offset, i0, y + n, w.rows, count, i0 == 0 ? ahead : 0);
        };
        for (; i + 4 <= m; i += 4) tile.template operator()<4>(i);
        for (; i < m; ++i) tile.template operator()<1>(i);
      }
      return;
    }
#endif
    constexpr size_t TN = hn::MaxLanes(hn::Repartition<int32_t, hn::CappedTag<uint8_t, 32>>());
    for (int64_t n = n0; n < n1; n += int64_t(TN)) {
      const int64_t count = std::min(int64_t(TN), n1 - n);
      const uint8_t* rows[TN];
      HWY_ALIGN int32_t offsets[TN];
      for (size_t j = 0; j < TN; ++j) {
        const int64_t r = std::min(int64_t(j), count - 1);
        rows[j] = base + size_t(n + r) * row_bytes;
        offsets[j] = int32_t(size_t(r) * row_bytes);
      }
      const auto offset = hn::Load(hn::Repartition<int32_t, hn::CappedTag<uint8_t, 32>>(), offsets);
      // The next tile's rows, on the first pass over this one (its rows are the same stream, one tile on).
      const size_t ahead = n + 2 * int64_t(TN) <= n1 ? TN * row_bytes : 0;
      int64_t i = 0;
      for (; i + 4 <= m; i += 4) BlockTileRows<T, 4>(xq, rows, offset, i, y + n, w.rows, count, i == 0 ? ahead : 0);
      for (; i < m; ++i) BlockTileRows<T, 1>(xq, rows, offset, i, y + n, w.rows, count, i == 0 ? ahead : 0);
    }
    return;
  }
  int64_t n = n0;
  if (kOuts4<T> && m < 4) {  // decode: four outputs at a time for each row of x
    // Each block asks for its lines in the next four rows (the next outputs' same block) where those lie past
    // kAhead<T>: in rows longer than a quarter of kAhead<T>, the lines kAhead<T> bytes on are in this group's own
    // rows, already on their way, and the next group's first blocks were never asked for. One Zen 4 core, rows of
    // 4096 values: Q4_K and Q5_K matvec -31% and -32%, IQ4_XS -16%, Q2_K -11%; of 2048, Q5_K -9%, the rest as they
    // were (docs/results/2026-12-07-cpu-kquant-prefetch-next-rows-session36.md).
    const size_t ahead = std::max(kAhead<T>, 4 * row_bytes);
    for (; n + 4 <= n1; n += 4) {
      const uint8_t* const rows[4] = {base + size_t(n) * row_bytes, base + size_t(n + 1) * row_bytes,
                                      base + size_t(n + 2) * row_bytes, base + size_t(n + 3) * row_bytes};
      for (int64_t i = 0; i < m; ++i) SuperOuts4<T>(xq, rows, i, y + n, w.rows, ahead);
    }
  }
  for (; n < n1; ++n) {
    const uint8_t* row = base + size_t(n) * row_bytes;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) SuperRows<T, 4>(xq, row, i, y + n, w.rows);
    for (; i < m; ++i) SuperRows<T, 1>(xq, row, i, y + n, w.rows);
  }
}

void GgmlInt8Range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  switch (w.codec) {
    case Codec::Q8_0:
      return RangeT<Codec::Q8_0>(xq, w, y, n0, n1);
    case Codec::Q4_0:
      return RangeT<Codec::Q4_0>(xq, w, y, n0, n1);
    case Codec::Q5_0:
      return RangeT<Codec::Q5_0>(xq, w, y, n0, n1);
    case Codec::Q5_1:
      return RangeT<Codec::Q5_1>(xq, w, y, n0, n1);
    case Codec::IQ4_NL:
      return RangeT<Codec::IQ4_NL>(xq, w, y, n0, n1);
    case Codec::MXFP4_GGML:
      return RangeT<Codec::MXFP4_GGML>(xq, w, y, n0, n1);
    case Codec::Q2_K:
      return RangeT<Codec::Q2_K>(xq, w, y, n0, n1);
    case Codec::Q3_K:
      return RangeT<Codec::Q3_K>(xq, w, y, n0, n1);
    case Codec::Q4_K:
      return RangeT<Codec::Q4_K>(xq, w, y, n0, n1);
    case Codec::Q5_K:
      return RangeT<Codec::Q5_K>(xq, w, y, n0, n1);
    case Codec::Q6_K:
      return RangeT<Codec::Q6_K>(xq, w, y, n0, n1);
    case Codec::IQ4_XS:
      return RangeT<Codec::IQ4_XS>(xq, w, y, n0, n1);
    default:
      fail("ggml_matmul_int8: {} is not a ggml codec", codec_name(w.codec));
  }
}
bool HasKernel() {
  return true;
}
#else
void GgmlInt8Range(const Int8Rows&, const Matrix&, float*, int64_t, int64_t) {
  fail("ggml_matmul_int8: no SIMD kernel on this target");
}
bool HasKernel() {  // false: run the reference
  return false;
}
#endif

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::ops {
HWY_EXPORT(QuantizeSuper);
HWY_EXPORT(GgmlInt8Range);
HWY_EXPORT(HasKernel);

void quantize_ggml_int8_rows(const float* x, int64_t m, int64_t cols, int64_t group, Int8Rows& out) {
  SEEDLING_CHECK((group == 32 || group == 256) && cols % group == 0,
                 "quantize_ggml_int8_rows: {} columns in blocks of {}", cols, group);
  if (group == 32) {
    quantize_int8_rows(x, m, cols, group, out);
    out.bsum.clear();
    return;
  }
  out.rows = m, out.cols = cols, out.group = group, out.blocks = cols / group;
  out.q.resize(size_t(m * cols));
  out.scale.resize(size_t(m * out.blocks));
  out.sum.resize(size_t(m * out.blocks));
  out.bsum.resize(size_t(m * cols / 16));
  // Rows apart over the threads, as quantize_int8_rows.
  ThreadPool::global().parallel_for(size_t(m), 16, [&](size_t i0, size_t i1) {
    const int64_t i = int64_t(i0);
    HWY_DYNAMIC_DISPATCH(QuantizeSuper)
    (x + i * cols, int64_t(i1 - i0), cols, out.q.data() + i * cols, out.scale.data() + i * out.blocks,
     out.sum.data() + i * out.blocks, out.bsum.data() + i * cols / 16);
  });
}

void ggml_matmul_int8_range(const Int8Rows& xq, const Matrix& w, float* y, int64_t n0, int64_t n1) {
  HWY_DYNAMIC_DISPATCH(GgmlInt8Range)(xq, w, y, n0, n1);
}

bool ggml_int8_has_kernel() {
  return HWY_DYNAMIC_DISPATCH(HasKernel)();
}

void ggml_matmul_int8(const float* x, int64_t m, const Matrix& w, float* y) {
  const int64_t group = ggml_int8_group(w.codec);
  SEEDLING_CHECK(group > 0, "ggml_matmul_int8: {} is not a ggml codec", codec_name(w.codec));
  if (m <= 0 || w.rows <= 0) return;
  if (!ggml_int8_has_kernel()) return ref::ggml_matmul_int8(x, m, w, y);
  thread_local Int8Rows mine;  // the caller's, reused; the workers read it by this reference while it waits
  Int8Rows& xq = mine;
  quantize_ggml_int8_rows(x, m, w.cols, group, xq);
  ThreadPool::global().parallel_for(
      size_t(w.rows), 8, [&](size_t n0, size_t n1) { ggml_matmul_int8_range(xq, w, y, int64_t(n0), int64_t(n1)); },
      product_chunks_per_thread(m, w.nbytes(), ThreadPool::global().size()));
}

}  // namespace seedling::ops
#endif
