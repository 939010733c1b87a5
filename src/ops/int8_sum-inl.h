// ops/int8_sum-inl.h - what the int8 kernels (ops/matmul_int8.cpp, ops/matmul_ggml_int8.cpp) share: the reductions
// into one output a lane and the GEMMs' stores.
// Highway, included once per SIMD target inside its namespace.

// Per-target include guard (Highway's convention: toggled by foreach_target.h).
#if defined(SEEDLING_OPS_INT8_SUM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEEDLING_OPS_INT8_SUM_INL_H_
#undef SEEDLING_OPS_INT8_SUM_INL_H_
#else
#define SEEDLING_OPS_INT8_SUM_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace seedling::ops::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// Per 128-bit block, lane j of the result = that block's sum of the lanes of v[j] (j < 4).
template <class D32>
HWY_INLINE hn::Vec<D32> Reduce4(D32 d32, const hn::Vec<D32>* v) {
  const hn::Repartition<uint64_t, D32> d64;
  const auto ab = hn::Add(hn::InterleaveLower(d32, v[0], v[1]), hn::InterleaveUpper(d32, v[0], v[1]));
  const auto cd = hn::Add(hn::InterleaveLower(d32, v[2], v[3]), hn::InterleaveUpper(d32, v[2], v[3]));
  const auto ab64 = hn::BitCast(d64, ab), cd64 = hn::BitCast(d64, cd);
  return hn::Add(hn::BitCast(d32, hn::InterleaveLower(d64, ab64, cd64)),
                 hn::BitCast(d32, hn::InterleaveUpper(d64, ab64, cd64)));
}

// r[g] from Reduce4 of outputs 4g..4g+3 (g < number of 128-bit blocks): lane j = output j's whole sum.
template <class D32>
HWY_INLINE hn::Vec<D32> ReduceBlocks(D32 d32, hn::Vec<D32>* r) {
  constexpr size_t kBlocks = hn::MaxLanes(D32()) / 4;
  if constexpr (kBlocks == 1) {
    return r[0];
  } else {
    if constexpr (kBlocks == 4) {  // halves first: r[0] + r[2] per half, then adjacent blocks as for two
      const auto s02 = hn::Add(hn::ConcatLowerLower(d32, r[2], r[0]), hn::ConcatUpperUpper(d32, r[2], r[0]));
      const auto s13 = hn::Add(hn::ConcatLowerLower(d32, r[3], r[1]), hn::ConcatUpperUpper(d32, r[3], r[1]));
      r[0] = s02, r[1] = s13;
    }
    return hn::Add(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(r[1]), r[0]),
                   hn::OddEvenBlocks(r[1], hn::SwapAdjacentBlocks(r[0])));
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// Two outputs a 512-bit vector: h0 = Reduce4 of four vectors whose low halves hold outputs 0-3 and high halves outputs
// 4-7, h1 the same for outputs 8-11 and 12-15. Returns lane j = output j's sum (blocks 0 + 1 and 2 + 3 of each).
HWY_INLINE hn::Vec<hn::Full512<int32_t>> ReducePairHalves(hn::Vec<hn::Full512<int32_t>> h0,
                                                          hn::Vec<hn::Full512<int32_t>> h1) {
  return hn::Add(hn::Vec<hn::Full512<int32_t>>{_mm512_shuffle_i32x4(h0.raw, h1.raw, 0x88)},
                 hn::Vec<hn::Full512<int32_t>>{_mm512_shuffle_i32x4(h0.raw, h1.raw, 0xDD)});
}
#endif

// Float32 values of float16 bits in the low 16 bits of each lane (the upper 16 ignored), exactly f16_to_f32's for
// every value: subnormals, infinities and NaNs too.
template <class D32>
HWY_INLINE hn::Vec<hn::Rebind<float, D32>> F16ToF32(D32 d32, hn::Vec<D32> h) {
  const hn::Rebind<float, D32> df;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(d32, 0x8000)));
  const auto mag = hn::And(h, hn::Set(d32, 0x7FFF));
  const auto normal = hn::ShiftLeft<13>(hn::Add(mag, hn::Set(d32, (127 - 15) << 10)));
  const auto special = hn::Or(hn::Set(d32, 0x7F800000), hn::ShiftLeft<13>(hn::And(mag, hn::Set(d32, 0x3FF))));
  const auto subnormal = hn::BitCast(d32, hn::Mul(hn::ConvertTo(df, mag), hn::Set(df, 0x1p-24f)));
  const auto finite = hn::IfThenElse(hn::Lt(mag, hn::Set(d32, 0x400)), subnormal, normal);
  return hn::BitCast(df, hn::Or(sign, hn::IfThenElse(hn::Lt(mag, hn::Set(d32, 0x7C00)), finite, special)));
}

// This thread's buffer for a GEMM's repacked tile, at least `bytes`, vector-aligned, kept from call to call (a thread
// repacks one tile at a time).
HWY_INLINE uint8_t* TileBuffer(size_t bytes) {
  thread_local hwy::AlignedFreeUniquePtr<uint8_t[]> tile;
  thread_local size_t capacity = 0;
  if (capacity < bytes) tile = hwy::AllocateAligned<uint8_t>(capacity = bytes);
  return tile.get();
}

// The GEMMs' rows [i0, i0 + TM) of a tile of outputs, straight from their accumulators into y (row stride ldy):
// count lanes, with a masked store for a short tile (a copy through memory, rep movs for count floats, cost the
// affine GEMM 7% of its time).
template <size_t TM, class DF>
HWY_INLINE void StoreTileRows(DF df, const hn::Vec<DF>* acc, float* y, int64_t i0, int64_t ldy, int64_t count) {
  const auto keep = hn::FirstN(df, size_t(count));
  for (size_t r = 0; r < TM; ++r) {
    float* row = y + (i0 + int64_t(r)) * ldy;
    if (count == int64_t(hn::Lanes(df))) {
      hn::StoreU(acc[r], df, row);
    } else {
      hn::BlendedStore(acc[r], keep, df, row);
    }
  }
}
#endif

}  // namespace seedling::ops::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SEEDLING_OPS_INT8_SUM_INL_H_
