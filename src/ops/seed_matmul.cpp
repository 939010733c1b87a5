// ops/seed_matmul.cpp - matvec and matmul on seed slices (ops/seed_matmul.h): Highway SIMD, runtime dispatch.
//
// Invariant: every decoded weight equals decode_seed_matrix's bit for bit, and each output y[i][r] is one fixed
// sequence of float operations that depends only on row r of W and row i of x (never on m, the thread split or
// which path ran), so a row alone equals the same row in a batch bit for bit.
//
// The decode of one block is vector work over its C weights, from tier-specific "pair tables" that extend the
// GF(2) stream tables of codec/lfsr.h: because every LFSR state is GF(2)-linear in the seed,
// state_k(seed) = state_k(seed & 0x00FF) ^ state_k(seed & 0xFF00), so for each byte value b a table row holds the
// block's states as int16, already placed for the multiply: plane t, lane c holds the int16 pair
// (S[c][2t], S[c][2t+1]) (zero where 2t + h >= P or c >= C), with the 0x8000 of S = state - 32768 folded into the
// low-byte table (state ^ 0x8000 is S as int16). Lanes per block are C rounded up to 8. A block is then two vector
// loads per table and plane, two XORs, and pairwise int16 multiply-adds (madd) against (q0, q1) and (q2, q3):
//   isum_c = S[c][0] q0 + S[c][1] q1 + S[c][2] q2 + S[c][3] q3        (exact in int32, |isum_c| <= 2^20)
//   w_c    = round_bf16(float(isum_c) * scale(e))                       (one multiply, then the spec's rounding)
// The dot with x runs on a copy of x laid out like the table (blocks of 8 or 16 lanes, zero where no weight is),
// into 4 accumulators: part p of the row (block j, part g) goes to accumulator (j * parts + g) mod 4, with a fused
// multiply-add; the accumulators are summed ((a0 + a1) + (a2 + a3)) then across lanes. m = 1 fuses decode and dot;
// m > 1 decodes a chunk of blocks once into a small buffer and runs every row of x over it with the same sequence.
// The scalar target (no SIMD) decodes by the spec (decode_block) and dots with ops::dot.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/seed_matmul.cpp"
#include "ops/seed_matmul.h"

#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/lfsr.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"

#ifndef SEEDLING_OPS_SEED_MATMUL_SHARED
#define SEEDLING_OPS_SEED_MATMUL_SHARED
namespace seedling::seed::detail {

// Lanes of one block in the tables and in the copy of x: C rounded up to 8.
constexpr int pad_lanes(int c) {
  return (c + 7) / 8 * 8;
}

// The pair tables of one tier (see the file comment). Entry b (b = 0..255) is kEntry int16 at b * kEntry:
// plane t (t = 0, 1) at t * 2 * kPad, lane c at 2 * c, then the pair (p = 2t, p = 2t + 1).
template <int C, int P>
struct PairTables {
  static constexpr int kPad = pad_lanes(C);
  static constexpr int kEntry = 2 * kPad * 2;
  alignas(64) int16_t lo[256 * kEntry];
  alignas(64) int16_t hi[256 * kEntry];
};

template <int C, int P>
const PairTables<C, P>& pair_tables() {
  static const PairTables<C, P>* tables = [] {
    auto* t = new PairTables<C, P>();  // zeroed: pads are 0
    for (int b = 0; b < 256; ++b) {
      uint16_t lo_states[kMaxStates], hi_states[kMaxStates];
      lfsr_states(uint16_t(b), C * P, lo_states);
      lfsr_states(uint16_t(b << 8), C * P, hi_states);
      for (int c = 0; c < C; ++c) {
        for (int p = 0; p < P; ++p) {
          const int at = b * PairTables<C, P>::kEntry + (p / 2) * 2 * PairTables<C, P>::kPad + 2 * c + (p % 2);
          t->lo[at] = int16_t(uint16_t(lo_states[c * P + p] ^ 0x8000u));
          t->hi[at] = int16_t(hi_states[c * P + p]);
        }
      }
    }
    return t;
  }();
  return *tables;
}

// Two int4 nibbles of a byte as the int16 pair (low nibble, high nibble) in one int32 (little-endian lanes).
struct NibblePairs {
  int32_t v[256];
  constexpr NibblePairs() : v() {
    for (int b = 0; b < 256; ++b) {
      const int lo = (b & 0xF) >= 8 ? (b & 0xF) - 16 : (b & 0xF);
      const int hi = (b >> 4) >= 8 ? (b >> 4) - 16 : (b >> 4);
      v[b] = int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
    }
  }
};
inline constexpr NibblePairs kNibblePairs{};

}  // namespace seedling::seed::detail
#endif  // SEEDLING_OPS_SEED_MATMUL_SHARED

HWY_BEFORE_NAMESPACE();
namespace seedling::seed::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR

// No SIMD: decode by the spec, dot with ops::dot (one fixed order per row, independent of m).
void DecodeRow(const SeedMatrix& w, int64_t r, float* out) {
  const SeedTierSpec sp = seed_tier_spec(w.tier);
  const SeedSliceLayout L = seed_slice_layout(w.tier, w.rows, w.cols);
  const int32_t bias = seed_blob_bias(w.blob);
  float wb[kMaxBlock];
  for (int64_t j = 0; j < L.blocks_per_row; ++j) {
    const SeedBlock b = seed_blob_block(w.tier, w.blob, L, r * L.blocks_per_row + j);
    decode_block(w.tier, b, bias + b.code, wb);
    for (int64_t c = 0; c < sp.block && j * sp.block + c < w.cols; ++c) out[j * sp.block + c] = wb[c];
  }
}

void MatmulRows(const float* x, const float* /*xp*/, int64_t m, const SeedMatrix& w, float* y, int64_t r0, int64_t r1) {
  std::vector<float> row(size_t(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    DecodeRow(w, r, row.data());
    for (int64_t i = 0; i < m; ++i) y[i * w.rows + r] = ops::dot(x + i * w.cols, row.data(), w.cols);
  }
}

#else

using D32 = hn::CappedTag<int32_t, 8>;
using D16 = hn::Repartition<int16_t, D32>;
using DF = hn::Rebind<float, D32>;
using DU = hn::Rebind<uint32_t, D32>;
using VF = hn::Vec<DF>;
constexpr int kN = int(hn::MaxLanes(D32()));

// Reads the blocks of one slice and decodes them, kN weights (one part) at a time.
template <int C, int P, bool kApart>
class BlockDecoder {
 public:
  static constexpr int kPad = detail::pad_lanes(C);
  static constexpr int kParts = kPad / kN;

  explicit BlockDecoder(const SeedMatrix& w)
      : L_(seed_slice_layout(w.tier, w.rows, w.cols)), tables_(detail::pair_tables<C, P>()) {
    seeds_ = w.blob + L_.seeds_offset;
    words_ = w.blob + L_.words_offset;
    codes_ = w.blob + L_.codes_offset;
    // scale(bias + code) for every code; codes a validated blob cannot use are clamped into pow2f's domain.
    const int32_t bias = seed_blob_bias(w.blob);
    for (int code = 0; code < 16; ++code) scales_[code] = seed_scale(std::clamp(bias + code, -126, 127));
  }

  int64_t blocks_per_row() const { return L_.blocks_per_row; }

  // The kParts parts of block i (global index): out[g] = weights g * kN .. g * kN + kN - 1 of the block.
  HWY_INLINE void Decode(size_t i, VF* out) const {
    const D32 d32;
    const D16 d16;
    const DF df;
    const DU du;
    uint16_t seed, word;
    std::memcpy(&seed, seeds_ + 2 * i, 2);
    std::memcpy(&word, words_ + 2 * i, 2);
    const unsigned code = kApart ? (unsigned(codes_[i >> 1]) >> ((i & 1) * 4)) & 0xFu : word & 0xFu;
    const unsigned nib01 = kApart ? word & 0xFFu : (word >> 4) & 0xFFu;
    const unsigned nib23 = kApart ? word >> 8 : word >> 12;
    const auto q01 = hn::BitCast(d16, hn::Set(d32, detail::kNibblePairs.v[nib01]));
    const auto q23 = hn::BitCast(d16, hn::Set(d32, detail::kNibblePairs.v[nib23]));
    const VF scale = hn::Set(df, scales_[code]);
    const int16_t* lo = tables_.lo + size_t(seed & 0xFF) * detail::PairTables<C, P>::kEntry;
    const int16_t* hi = tables_.hi + size_t(seed >> 8) * detail::PairTables<C, P>::kEntry;
    for (int g = 0; g < kParts; ++g) {
      const auto s01 = hn::Xor(hn::Load(d16, lo + 2 * kN * g), hn::Load(d16, hi + 2 * kN * g));
      const auto s23 = hn::Xor(hn::Load(d16, lo + 2 * kPad + 2 * kN * g), hn::Load(d16, hi + 2 * kPad + 2 * kN * g));
      auto odd = hn::Zero(d32);
      auto isum = hn::ReorderWidenMulAccumulate(d32, s01, q01, hn::Zero(d32), odd);
      isum = hn::ReorderWidenMulAccumulate(d32, s23, q23, isum, odd);
      isum = hn::RearrangeToOddPlusEven(isum, odd);
      const auto u = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, isum), scale));
      // round_bf16 without its tie term: float(isum) * scale(e) never has low bits 0x8000 (every isum of the
      // format checked in SeedKernel.ProductsNeverTieAtBf16), so adding 0x8000 then clearing the low 16 bits
      // rounds to nearest exactly as the spec's ties-to-even does.
      out[g] = hn::BitCast(df, hn::And(hn::Add(u, hn::Set(du, 0x8000u)), hn::Set(du, 0xFFFF0000u)));
    }
  }

 private:
  SeedSliceLayout L_;
  const detail::PairTables<C, P>& tables_;
  const uint8_t* seeds_;
  const uint8_t* words_;
  const uint8_t* codes_;
  float scales_[16];
};

HWY_INLINE float Reduce(const VF* a) {
  const DF df;
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a[0], a[1]), hn::Add(a[2], a[3]))));
}

template <int C, int P, bool kApart>
void DecodeRowT(const SeedMatrix& w, int64_t r, float* out) {
  using Dec = BlockDecoder<C, P, kApart>;
  const Dec dec(w);
  const DF df;
  HWY_ALIGN float wb[Dec::kPad];
  const int64_t bpr = dec.blocks_per_row();
  for (int64_t j = 0; j < bpr; ++j) {
    VF v[Dec::kParts];
    dec.Decode(size_t(r * bpr + j), v);
    for (int g = 0; g < Dec::kParts; ++g) hn::Store(v[g], df, wb + g * kN);
    const int64_t n = std::min<int64_t>(C, w.cols - j * C);
    std::memcpy(out + j * C, wb, sizeof(float) * size_t(n));
  }
}

// y[i][r] for rows r0..r1 of W; xp is x in the tables' layout (m rows of blocks_per_row * kPad floats, the parts
// of consecutive blocks contiguous). Part p of a row (counting from the row's start) goes to accumulator p mod 4.
template <int C, int P, bool kApart>
void MatmulRowsT(const float* xp, int64_t m, const SeedMatrix& w, float* y, int64_t r0, int64_t r1) {
  using Dec = BlockDecoder<C, P, kApart>;
  constexpr int kParts = Dec::kParts;
  // Blocks per group of 4 parts: one group fills the 4 accumulators once, in order.
  constexpr int kGroup = kParts >= 4 ? 1 : 4 / kParts;
  static_assert(kGroup * kParts == 4, "parts per block must divide 4 or be 4");
  const Dec dec(w);
  const DF df;
  const size_t bpr = size_t(dec.blocks_per_row());
  const size_t xs = bpr * Dec::kPad;  // stride of xp's rows
  if (m == 1) {
    // Fused: decode and dot, no row written.
    for (int64_t r = r0; r < r1; ++r) {
      const size_t i0 = size_t(r) * bpr;
      VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
      size_t j = 0;
      for (; j + kGroup <= bpr; j += kGroup) {
        VF v[4];
        for (int b = 0; b < kGroup; ++b) dec.Decode(i0 + j + size_t(b), v + b * kParts);
        const float* xb = xp + j * Dec::kPad;
        a0 = hn::MulAdd(hn::LoadU(df, xb), v[0], a0);
        a1 = hn::MulAdd(hn::LoadU(df, xb + kN), v[1], a1);
        a2 = hn::MulAdd(hn::LoadU(df, xb + 2 * kN), v[2], a2);
        a3 = hn::MulAdd(hn::LoadU(df, xb + 3 * kN), v[3], a3);
      }
      VF a[4] = {a0, a1, a2, a3};
      for (; j < bpr; ++j) {
        VF v[kParts];
        dec.Decode(i0 + j, v);
        for (int g = 0; g < kParts; ++g) {
          VF& acc = a[(j * kParts + size_t(g)) & 3];
          acc = hn::MulAdd(hn::LoadU(df, xp + j * Dec::kPad + g * kN), v[g], acc);
        }
      }
      y[r] = Reduce(a);
    }
    return;
  }
  // Several rows of x: decode a chunk of blocks once, then run each row of x over it. The accumulators of every
  // row live in `acc` between chunks; the order of operations per output is the fused path's.
  constexpr size_t kChunk = 64;  // blocks; a multiple of 4, so part k of a chunk goes to accumulator k mod 4
  hwy::AlignedFreeUniquePtr<float[]> wbuf = hwy::AllocateAligned<float>(kChunk * Dec::kPad);
  hwy::AlignedFreeUniquePtr<float[]> acc = hwy::AllocateAligned<float>(size_t(m) * 4 * kN);
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc.get(), acc.get() + size_t(m) * 4 * kN, 0.0f);
    for (size_t j0 = 0; j0 < bpr; j0 += kChunk) {
      const size_t nb = std::min(kChunk, bpr - j0);
      for (size_t b = 0; b < nb; ++b) {
        VF v[kParts];
        dec.Decode(size_t(r) * bpr + j0 + b, v);
        for (int g = 0; g < kParts; ++g) hn::Store(v[g], df, wbuf.get() + b * Dec::kPad + g * kN);
      }
      const size_t n_parts = nb * kParts;
      for (int64_t i = 0; i < m; ++i) {
        float* ai = acc.get() + size_t(i) * 4 * kN;
        VF a0 = hn::Load(df, ai), a1 = hn::Load(df, ai + kN), a2 = hn::Load(df, ai + 2 * kN),
           a3 = hn::Load(df, ai + 3 * kN);
        const float* xb = xp + size_t(i) * xs + j0 * Dec::kPad;
        const float* wv = wbuf.get();
        size_t p = 0;
        for (; p + 4 <= n_parts; p += 4) {
          a0 = hn::MulAdd(hn::LoadU(df, xb + p * kN), hn::Load(df, wv + p * kN), a0);
          a1 = hn::MulAdd(hn::LoadU(df, xb + (p + 1) * kN), hn::Load(df, wv + (p + 1) * kN), a1);
          a2 = hn::MulAdd(hn::LoadU(df, xb + (p + 2) * kN), hn::Load(df, wv + (p + 2) * kN), a2);
          a3 = hn::MulAdd(hn::LoadU(df, xb + (p + 3) * kN), hn::Load(df, wv + (p + 3) * kN), a3);
        }
        VF a[4] = {a0, a1, a2, a3};
        for (; p < n_parts; ++p) a[p & 3] = hn::MulAdd(hn::LoadU(df, xb + p * kN), hn::Load(df, wv + p * kN), a[p & 3]);
        for (int k = 0; k < 4; ++k) hn::Store(a[k], df, ai + k * kN);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      const float* ai = acc.get() + size_t(i) * 4 * kN;
      const VF a[4] = {hn::Load(df, ai), hn::Load(df, ai + kN), hn::Load(df, ai + 2 * kN), hn::Load(df, ai + 3 * kN)};
      y[i * w.rows + r] = Reduce(a);
    }
  }
}

void DecodeRow(const SeedMatrix& w, int64_t r, float* out) {
  switch (w.tier) {
    case SeedTier::P3:
      return DecodeRowT<8, 3, false>(w, r, out);
    case SeedTier::P4:
      return DecodeRowT<8, 4, true>(w, r, out);
    case SeedTier::S3:
      return DecodeRowT<12, 4, true>(w, r, out);
  }
}

void MatmulRows(const float* /*x*/, const float* xp, int64_t m, const SeedMatrix& w, float* y, int64_t r0, int64_t r1) {
  switch (w.tier) {
    case SeedTier::P3:
      return MatmulRowsT<8, 3, false>(xp, m, w, y, r0, r1);
    case SeedTier::P4:
      return MatmulRowsT<8, 4, true>(xp, m, w, y, r0, r1);
    case SeedTier::S3:
      return MatmulRowsT<12, 4, true>(xp, m, w, y, r0, r1);
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace seedling::seed::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seedling::seed {
HWY_EXPORT(DecodeRow);
HWY_EXPORT(MatmulRows);

void decode_seed_row(const SeedMatrix& w, int64_t r, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeRow)(w, r, out);
}

void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y) {
  if (m <= 0 || w.rows <= 0) return;
  const SeedTierSpec sp = seed_tier_spec(w.tier);
  const SeedSliceLayout L = seed_slice_layout(w.tier, w.rows, w.cols);
  // x in the tables' layout: each block of C inputs at a multiple of pad_lanes(C), zeros between (and past cols).
  const int pad = detail::pad_lanes(sp.block);
  const int64_t xs = L.blocks_per_row * pad;
  hwy::AlignedFreeUniquePtr<float[]> xp = hwy::AllocateAligned<float>(size_t(m * xs));
  std::fill(xp.get(), xp.get() + m * xs, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < L.blocks_per_row; ++j) {
      const int64_t n = std::min<int64_t>(sp.block, w.cols - j * sp.block);
      std::memcpy(xp.get() + i * xs + j * pad, x + i * w.cols + j * sp.block, sizeof(float) * size_t(n));
    }
  }
  ThreadPool::global().parallel_for(size_t(w.rows), 16, [&](size_t r0, size_t r1) {
    HWY_DYNAMIC_DISPATCH(MatmulRows)(x, xp.get(), m, w, y, int64_t(r0), int64_t(r1));
  });
}

namespace ref {
void seed_matmul(const float* x, int64_t m, const SeedMatrix& w, float* y) {
  std::vector<float> W(size_t(w.rows * w.cols));
  decode_seed_matrix(w, W.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < w.rows; ++r) {
      float s = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) s += x[i * w.cols + k] * W[size_t(r * w.cols + k)];
      y[i * w.rows + r] = s;
    }
  }
}
}  // namespace ref

}  // namespace seedling::seed
#endif  // HWY_ONCE
