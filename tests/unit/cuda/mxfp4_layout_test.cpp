// MXFP4 rows in VRAM (cuda/mxfp4_layout.h): on the CPU, the layout is a rearrangement of the stored bytes in which each
// lane of a chunk finds its blocks' codes and its group's scales where mxfp4_group_dot (lane_dot.cuh) reads them; on a
// GPU, the kernel that rearranges them gives the host's bytes.
#include "cuda/mxfp4_layout.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "codec/codec.h"
#include "cuda_test_util.h"

namespace seedling {
namespace {

namespace mx = cuda::mxfp4;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = uint8_t(rng());
  return v;
}

// Widths whose rows hold every kind of chunk: one partial block, a partial last chunk, chunks of 4, 8 and 16 blocks,
// whole chunks of 32, gpt-oss's 2,880 (90 blocks: 32, 32, 16, 8 and 2) and a ragged last block.
constexpr int64_t kCols[] = {1, 31, 32, 64, 100, 128, 224, 480, 1000, 1024, 1900, 2880, 4000, 4096};

// The chunks mxfp4_group_dot walks, as (first block, K), in its order.
std::vector<std::pair<int64_t, int>> chunks_of(int64_t nb) {
  std::vector<std::pair<int64_t, int>> out;
  int64_t b = 0;
  for (; b + 32 <= nb; b += 32) out.emplace_back(b, 8);
  for (const int k : {4, 2, 1}) {
    if (nb - b >= 4 * k) {
      out.emplace_back(b, k);
      b += 4 * k;
    }
  }
  if (b < nb) out.emplace_back(b, 1);
  return out;
}

// Every stored byte lands at one place of the device row, the rest of which is zero, and lane 8 grp + t of each chunk
// finds block b + grp + 4i's code bytes 2t, 2t + 1 at 2i, 2i + 1 of its 2K bytes and the block's scale at byte i of its
// group's K: what the kernel's loads read, each load aligned to its size.
TEST(CudaMxfp4Layout, RowsAreTheStoredBytesWhereEachLaneReadsThem) {
  for (const int64_t cols : kCols) {
    const int64_t nb = mx::blocks(cols);
    const std::vector<uint8_t> stored = random_bytes(size_t(nb) * mx::kStored, uint32_t(cols));
    std::vector<uint8_t> dev(mx::row_bytes(cols), 0xAB);
    mx::row_to_device(stored.data(), cols, dev.data());
    ASSERT_EQ(dev.size() % 16, 0u) << cols;
    std::vector<int> hits(dev.size(), 0);
    for (int64_t u = 0; u < nb; ++u) {
      ++hits[mx::scale_at(nb, u)];
      for (int t = 0; t < 8; ++t) {
        ++hits[mx::code_at(nb, u, t)];
        ++hits[mx::code_at(nb, u, t) + 1];
      }
    }
    for (size_t i = 0; i < dev.size(); ++i) {
      ASSERT_EQ(hits[i], i < size_t(nb) * mx::kStored ? 1 : 0) << "cols " << cols << " byte " << i;
      if (hits[i] == 0) {
        ASSERT_EQ(dev[i], 0) << "cols " << cols << " padding byte " << i;
      }
    }
    int64_t covered = 0;
    for (const auto& [b, k] : chunks_of(nb)) {
      ASSERT_EQ(mx::chunk_k(nb, b), k) << cols;
      for (int lane = 0; lane < 32; ++lane) {
        const int grp = lane / 8, t = lane % 8;
        const size_t codes = size_t(16 * b + 2 * k * lane), scales = mx::scales_at(nb) + size_t(b + k * grp);
        ASSERT_EQ(codes % size_t(2 * k), 0u);
        ASSERT_EQ(scales % size_t(k), 0u);
        for (int i = 0; i < k; ++i) {
          const int64_t u = b + grp + 4 * i;
          if (u >= nb) continue;  // a group past the last chunk's blocks
          ASSERT_EQ(mx::chunk_start(nb, u), b);
          const uint8_t* s = stored.data() + u * mx::kStored;
          ASSERT_EQ(dev[codes + size_t(2 * i)], s[1 + 2 * t]) << cols << " block " << u << " lane " << lane;
          ASSERT_EQ(dev[codes + size_t(2 * i) + 1], s[2 + 2 * t]) << cols << " block " << u << " lane " << lane;
          ASSERT_EQ(dev[scales + size_t(i)], s[0]) << cols << " block " << u;
          if (t == 0) ++covered;
        }
      }
    }
    ASSERT_EQ(covered, nb) << cols;
  }
}

// mxfp4_ggml's blocks (ggml's nibble order) put in mxfp4's order keep every value: codec_value of the mxfp4 block is
// that of the ggml block, bit for bit, for every scale byte but 255 (which mxfp4 refuses at load) and every code, but
// for the sign of code 8's zero (ggml's table has +0 there, the e2m1 format -0: no product or sum tells them apart
// but an exactly zero result's sign).
TEST(CudaMxfp4Layout, GgmlBlocksInMxfp4OrderKeepTheirValues) {
  std::vector<uint8_t> blocks = random_bytes(size_t(255 * 40) * mx::kStored, 5);
  for (size_t b = 0; b * mx::kStored < blocks.size(); ++b) blocks[b * mx::kStored] = uint8_t(b % 255);
  for (size_t at = 0; at < blocks.size(); at += mx::kStored) {
    uint8_t out[mx::kStored];
    mx::ggml_block_to_mxfp4(blocks.data() + at, out);
    for (int j = 0; j < 32; ++j) {
      const float want = codec_value(Codec::MXFP4_GGML, blocks.data() + at, j), got = codec_value(Codec::MXFP4, out, j);
      ASSERT_EQ(std::bit_cast<uint32_t>(got == 0.0f ? 0.0f : got), std::bit_cast<uint32_t>(want == 0.0f ? 0.0f : want))
          << "e " << int(blocks[at]) << " elem " << j << ": " << got << " vs " << want;
    }
  }
}

// The kernel gives row_to_device's bytes for every row of a matrix (and of an expert blob, its padding zeroed), for
// mxfp4's blocks and for mxfp4_ggml's (put in mxfp4's order on the way).
TEST(CudaMxfp4Layout, DeviceKernelGivesTheHostLayout) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::MXFP4, Codec::MXFP4_GGML}) {
    for (const int64_t cols : kCols) {
      const int64_t rows = 37, nb = mx::blocks(cols);
      const std::vector<uint8_t> stored = random_bytes(size_t(rows * nb) * mx::kStored, uint32_t(cols + 1));
      const std::vector<uint8_t> got = test::device_weights(c, stored, rows, cols).download();
      ASSERT_EQ(got.size(), size_t(rows) * mx::row_bytes(cols));
      std::vector<uint8_t> want(mx::row_bytes(cols));
      for (int64_t r = 0; r < rows; ++r) {
        mx::row_to_device(stored.data() + size_t(r * nb) * mx::kStored, cols, want.data(), c == Codec::MXFP4_GGML);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + ptrdiff_t(size_t(r) * want.size())))
            << codec_name(c) << " cols " << cols << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace seedling
