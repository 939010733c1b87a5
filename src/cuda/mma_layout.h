// cuda/mma_layout.h - the index arithmetic of gemm.cu's mma.sync kernel, callable on the host so that CPU tests
// (tests/unit/cuda/mma_layout_test.cpp, which run without a GPU) can check it against the PTX ISA's fragment layouts.
//
// Invariant: these functions are the only place the kernel's fragment, warp-tile and weight-piece indices are
// written; the kernel calls them, the tests call them, so what the tests check is what the GPU runs.
// Fragments are those of mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA, "Matrix Fragments for
// mma.m16n8k8", .tf32): with g = lane / 4 and t = lane % 4, A (16 x 8, row-major) a0..a3 hold (g, t), (g + 8, t),
// (g, t + 4), (g + 8, t + 4); B (8 x 8, k by n) b0, b1 hold (k t, n g), (k t + 4, n g); C/D (16 x 8) c0..c3 hold
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace seedling::cuda::mma {

struct RowCol {
  int row, col;
};

// Register i (0..3) of the A fragment of `lane`: its row (0..15) and k (0..7).
SEEDLING_HD constexpr RowCol frag_a(int lane, int i) {
  return {lane / 4 + (i & 1) * 8, lane % 4 + (i >> 1) * 4};
}
// Register i (0..1) of the B fragment: row = k (0..7), col = n (0..7).
SEEDLING_HD constexpr RowCol frag_b(int lane, int i) {
  return {lane % 4 + i * 4, lane / 4};
}
// Register i (0..3) of the accumulator: row (0..15) and n (0..7).
SEEDLING_HD constexpr RowCol frag_c(int lane, int i) {
  return {lane / 4 + (i >> 1) * 8, 2 * (lane % 4) + (i & 1)};
}

// What the TF32 and f16 tiles share: a block tile of BM rows x BN outputs x 64 of k over WM x WN warps, each
// (BM / WM) x (BN / WN) of the tile as MT x NT accumulators of 16 x 8, and the accumulator tile of the epilogue.
template <int BM_, int BN_, int WM_, int WN_>
struct WarpGrid {
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_;
  static constexpr int kBK = 64;
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr int kWarpRows = BM / WM, kWarpCols = BN / WN;
  static constexpr int MT = kWarpRows / 16, NT = kWarpCols / 8;
  static_assert(kWarpRows % 16 == 0 && kWarpCols % 8 == 0, "warp tiles of whole 16 x 8 MMA tiles");
  static constexpr int kLdc = BN + 4;  // stride (floats) of the accumulator tile in the epilogue

  // Index in the accumulator tile (BM x kLdc) of register i of accumulator (mt, nt).
  static SEEDLING_HD constexpr int c_index(int warp, int lane, int mt, int nt, int i) {
    const RowCol f = frag_c(lane, i);
    return ((warp / WN) * kWarpRows + mt * 16 + f.row) * kLdc + (warp % WN) * kWarpCols + nt * 8 + f.col;
  }
};

// The TF32 kernel's tile: x and weight rows sit in shared memory row-major with a stride of kLd floats: with kLd %
// 32 == 4, the 32 lanes of a fragment load (rows g, columns t) hit 32 different banks.
template <int BM_, int BN_, int WM_, int WN_>
struct Tile : WarpGrid<BM_, BN_, WM_, WN_> {
  using G = WarpGrid<BM_, BN_, WM_, WN_>;
  using G::kWarpCols, G::kWarpRows, G::WN;
  static constexpr int kLd = G::kBK + 4;
  static constexpr int kStageFloats = (G::BM + G::BN) * kLd;

  // Shared index (in the x tile) of register i of the A fragment of MMA row-tile mt at k-step kk (0, 8, .. 56).
  static SEEDLING_HD constexpr int a_index(int warp, int lane, int mt, int kk, int i) {
    const RowCol f = frag_a(lane, i);
    return ((warp / WN) * kWarpRows + mt * 16 + f.row) * kLd + kk + f.col;
  }
  // Shared index (in the weight tile, one row per output) of register i of the B fragment of column-tile nt.
  static SEEDLING_HD constexpr int b_index(int warp, int lane, int nt, int kk, int i) {
    const RowCol f = frag_b(lane, i);
    return ((warp % WN) * kWarpCols + nt * 8 + f.col) * kLd + kk + f.row;
  }
};

// The f16 kernel (gemm.cu's mma16_kernel): mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, operands read from
// shared memory by ldmatrix.x4. ldmatrix.x4 loads four 8 x 8 matrices of 16-bit values: lanes 8i .. 8i + 7 give the
// addresses of matrix i's rows 0..7, and every lane receives, in register i, row lane / 4's elements 2 (lane % 4) and
// 2 (lane % 4) + 1 of matrix i (PTX ISA, "Warp-level matrix load instruction: ldmatrix"). The m16n8k16 fragments
// (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): A (16 x 16) register i holds row g + 8 (i %
// 2), k 2t + 8 (i / 2) and the next k; B (16 x 8, k by n) register i holds k 2t + 8 i and the next k, n g; C as
// m16n8k8's. So with x rows and weight rows stored k-contiguous, ldmatrix's matrices i = 0..3 are A's (rows 0-7,
// k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15), and for two column tiles of B, (n 0-7,
// k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): registers 0, 1 are the first tile's b0, b1 and 2, 3
// the second's. Rows are kLdh = 72 halves (144 bytes) apart, so the 8 rows of a matrix fall in 8 different 16-byte
// bank groups.
template <int BM_, int BN_, int WM_, int WN_>
struct Tile16 : WarpGrid<BM_, BN_, WM_, WN_> {
  using G = WarpGrid<BM_, BN_, WM_, WN_>;
  using G::kWarpCols, G::kWarpRows, G::WN;
  static constexpr int kLdh = G::kBK + 8;
  static_assert(kWarpCols % 16 == 0, "warp tiles of whole 16 x 16 A and B pairs");

  // Half index (in the x tile) of the row address `lane` gives ldmatrix.x4 for MMA row-tile mt at k-step kk (0, 16,
  // 32, 48).
  static SEEDLING_HD constexpr int a_ldm(int warp, int lane, int mt, int kk) {
    return ((warp / WN) * kWarpRows + mt * 16 + lane % 16) * kLdh + kk + (lane / 16) * 8;
  }
  // Half index (in the weight tile) of the row address `lane` gives ldmatrix.x4 for column tiles 2 np and 2 np + 1.
  static SEEDLING_HD constexpr int b_ldm(int warp, int lane, int np, int kk) {
    return ((warp % WN) * kWarpCols + np * 16 + (lane / 16) * 8 + lane % 8) * kLdh + kk + ((lane / 8) % 2) * 8;
  }
};

// A weight row's 64-wide k-slice is widened as 8 pieces of 8 values. Piece p of a codec with units of G values
// (G = 4, 8, 32 or 64; affine codes: 4 bits or 8) is unit p / (8 / U) of the slice (U = 64 / G units a slice, for
// G >= 8; float32 units of 4 are read as pairs), and lands at two runs of 4 in the slice: first(p) and second(p).
// Affine pieces read code words of their unit: 4-bit codes keep element j in the low nibble of byte j and element
// G / 2 + j in the high one (codec.h), so a word's 8 codes are elements 4w..4w+3 and G/2+4w..G/2+4w+3; 8-bit codes
// keep element j in byte j, so a piece of 8 is two words.
struct Piece {
  int unit;    // unit of the slice (0 .. 64 / G - 1); float codecs: 0
  int word;    // affine: the first code word of the piece in its unit (words after the d/m word)
  int first;   // slice position of values 0..3
  int second;  // slice position of values 4..7
};

SEEDLING_HD constexpr Piece piece_of(int G, bool affine, bool four_bit, int p) {
  if (!affine) return {0, 0, 8 * p, 8 * p + 4};
  const int per_unit = 8 / (64 / G), unit = p / per_unit, q = p % per_unit;
  if (four_bit) return {unit, q, unit * G + 4 * q, unit * G + G / 2 + 4 * q};
  return {unit, 2 * q, unit * G + 8 * q, unit * G + 8 * q + 4};
}

}  // namespace seedling::cuda::mma
