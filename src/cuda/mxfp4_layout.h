// cuda/mxfp4_layout.h - MXFP4 rows as the CUDA kernels read them: the same bytes as core/codec_layout.h's 17-byte
// blocks, rearranged where they enter VRAM (cuda/kernels.h's to_device_layout, expert_to_device_layout) so that a lane
// reads its codes with one 16-byte load and its scales with one 8-byte load. Host and device share these functions
// (SEEDLING_HD), so the CPU tests check the layout without a GPU (tests/unit/cuda/mxfp4_layout_test.cpp). ggml's
// MXFP4 blocks (mxfp4_ggml: the same scale byte and codes, element i in the low nibble of code byte i and i + 16 in its
// high nibble) take the same layout, their nibbles put in mxfp4's order on the way (ggml_block_to_mxfp4), so mxfp4's
// kernels read both.
//
// The kernels' order of additions is lane_dot.cuh's (mxfp4_group_dot): the warp's 4 groups of 8 lanes take blocks grp,
// grp + 4, ... of a row; lane t of a group the block's code bytes 2t and 2t + 1 (elements 4t .. 4t + 3). The layout
// keeps that order and puts together what one lane reads. A row of nb blocks is
//   [codes: 16 nb bytes][scales: nb bytes][zeros up to a multiple of 16 bytes],
// both parts cut into the same chunks of consecutive blocks: 32 blocks (K = 8) while 32 are left, then at most one
// chunk each of 16 (K = 4), 8 (K = 2) and 4 (K = 1), then the last 1..3 blocks (K = 1, the groups past them idle). In a
// chunk starting at block b, block b + grp + 4i (i < K) has its code bytes 2t, 2t + 1 at 16 b + 2 K (8 grp + t) + 2i
// and its scale at 16 nb + b + K grp + i: lane 8 grp + t's codes are the 2 K bytes at 16 b + 2 K (8 grp + t), its
// group's scales the K bytes at 16 nb + b + K grp, each aligned to its size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace seedling::cuda::mxfp4 {

inline constexpr int kGroup = 32;     // elements of a block
inline constexpr int kStored = 17;    // bytes of a block as stored: the scale, then 16 bytes of codes
inline constexpr int kChunkMax = 32;  // blocks of a K = 8 chunk

SEEDLING_HD constexpr int64_t blocks(int64_t cols) {
  return (cols + kGroup - 1) / kGroup;
}
// Bytes of one row in the device layout: the stored bytes, padded to a multiple of 16.
SEEDLING_HD constexpr size_t row_bytes(int64_t cols) {
  return (size_t(blocks(cols)) * kStored + 15) / 16 * 16;
}
// Where the scales of a row of nb blocks start.
SEEDLING_HD constexpr size_t scales_at(int64_t nb) {
  return size_t(nb) * 16;
}
// K of the chunk that starts at block b of a row of nb blocks (blocks b .. b + 4K - 1, or to nb for the last).
SEEDLING_HD constexpr int chunk_k(int64_t nb, int64_t b) {
  const int64_t left = nb - b;
  return left >= 32 ? 8 : left >= 16 ? 4 : left >= 8 ? 2 : 1;
}
// The first block of the chunk that holds block u.
SEEDLING_HD constexpr int64_t chunk_start(int64_t nb, int64_t u) {
  int64_t b = u / kChunkMax * kChunkMax;
  if (b + kChunkMax <= nb) return b;
  while (u >= b + 4 * chunk_k(nb, b)) b += 4 * chunk_k(nb, b);
  return b;
}
// Byte offsets in the device row of block u's code bytes 2t and 2t + 1 (t < 8: the first of the two) and of its scale.
SEEDLING_HD constexpr size_t code_at(int64_t nb, int64_t u, int t) {
  const int64_t b = chunk_start(nb, u), j = u - b;
  const int k = chunk_k(nb, b);
  return size_t(16 * b + 2 * k * (8 * (j % 4) + t) + 2 * (j / 4));
}
SEEDLING_HD constexpr size_t scale_at(int64_t nb, int64_t u) {
  const int64_t b = chunk_start(nb, u), j = u - b;
  const int k = chunk_k(nb, b);
  return scales_at(nb) + size_t(b + k * (j % 4) + j / 4);
}

// A block of mxfp4_ggml (17 bytes at g) as the mxfp4 block of the same scale and codes (out: 17 bytes): element 2k in
// the low nibble of code byte k, 2k + 1 in its high nibble.
SEEDLING_HD void ggml_block_to_mxfp4(const uint8_t* g, uint8_t* out) {
  out[0] = g[0];
  for (int k = 0; k < 16; ++k) {
    const int e0 = 2 * k, e1 = 2 * k + 1;  // e0 < 16 exactly when e1 < 16
    const int lo = e0 < 16 ? g[1 + e0] & 0x0F : g[1 + e0 - 16] >> 4;
    const int hi = e1 < 16 ? g[1 + e1] & 0x0F : g[1 + e1 - 16] >> 4;
    out[1 + k] = uint8_t(lo | hi << 4);
  }
}

// One block u of a stored row (its 17 bytes at `stored`) into the device row `out` of nb blocks.
SEEDLING_HD void place_block(const uint8_t* stored, int64_t nb, int64_t u, uint8_t* out) {
  out[scale_at(nb, u)] = stored[0];
  const size_t c0 = code_at(nb, u, 0);
  const int k = chunk_k(nb, chunk_start(nb, u));
  for (int t = 0; t < 8; ++t) {  // lane t's two bytes sit 2K bytes after lane t - 1's
    out[c0 + size_t(2 * k * t)] = stored[1 + 2 * t];
    out[c0 + size_t(2 * k * t) + 1] = stored[2 + 2 * t];
  }
}

// A stored row of `cols` (blocks of 17 bytes; ggml_order: mxfp4_ggml's) into its device form (row_bytes(cols) bytes,
// the padding zeroed).
inline void row_to_device(const uint8_t* stored, int64_t cols, uint8_t* out, bool ggml_order = false) {
  const int64_t nb = blocks(cols);
  for (int64_t u = 0; u < nb; ++u) {
    uint8_t block[kStored];
    if (ggml_order) ggml_block_to_mxfp4(stored + u * kStored, block);
    place_block(ggml_order ? block : stored + u * kStored, nb, u, out);
  }
  for (size_t i = size_t(nb) * kStored; i < row_bytes(cols); ++i) out[i] = 0;
}

}  // namespace seedling::cuda::mxfp4
