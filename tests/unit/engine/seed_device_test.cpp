// cuda/seed_device.cuh's block decode, run on the CPU (its functions are __host__ __device__): the same index and
// bit logic the CUDA kernels run, held against lfsr.h's stepping and seed_codec.h's spec in every build, GPU or not.
#include "cuda/seed_device.cuh"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/lfsr.h"
#include "codec/seed_codec.h"

namespace seedling {

namespace {

using namespace seed;
namespace sd = cuda::seeddev;

sd::Geom geom_of(SeedTier t) {
  return t == SeedTier::P3 ? sd::kP3 : t == SeedTier::P4 ? sd::kP4 : sd::kS3;
}

// The device decode of block i of a blob (the path a kernel takes), on the CPU.
void device_block(SeedTier t, const uint8_t* blob, int64_t n, int64_t i, float* w) {
  const sd::Geom g = geom_of(t);
  const uint64_t* lo = kLfsrStreamTables.lo;
  const uint64_t* hi = kLfsrStreamTables.hi;
  if (t == SeedTier::P3) sd::seed_decode_blob_block<8, 3>(g, blob, n, i, lo, hi, w);
  if (t == SeedTier::P4) sd::seed_decode_blob_block<8, 4>(g, blob, n, i, lo, hi, w);
  if (t == SeedTier::S3) sd::seed_decode_blob_block<12, 4>(g, blob, n, i, lo, hi, w);
}

std::vector<SeedBlock> random_blocks(SeedTier t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<SeedBlock> blocks(static_cast<size_t>(n));
  for (SeedBlock& b : blocks) {
    b.seed = uint16_t(1 + rng() % 65535);
    for (int p = 0; p < seed_tier_spec(t).coefs; ++p) b.q[p] = int8_t(int(rng() % 16) - 8);
    b.code = uint8_t(rng() % 16);
  }
  return blocks;
}

// Every weight of a slice decoded block by block as the kernels do, against decode_seed_matrix, bit for bit.
void expect_slice_equals_spec(SeedTier t, int64_t rows, int64_t cols, int32_t bias, std::vector<SeedBlock> blocks) {
  const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
  const std::vector<uint8_t> blob = write_seed_blob(t, rows, cols, bias, blocks);
  std::vector<float> want(size_t(rows * cols));
  decode_seed_matrix({t, blob.data(), rows, cols}, want.data());
  const int C = seed_tier_spec(t).block;
  for (int64_t i = 0; i < L.n_blocks; ++i) {
    float w[kMaxBlock];
    device_block(t, blob.data(), L.n_blocks, i, w);
    const int64_t r = i / L.blocks_per_row, k0 = (i % L.blocks_per_row) * C;
    for (int c = 0; c < C && k0 + c < cols; ++c) {
      ASSERT_EQ(0, std::memcmp(&w[c], &want[size_t(r * cols + k0 + c)], 4))
          << seed_tier_name(t) << " block " << i << " weight " << c << ": " << w[c] << " vs "
          << want[size_t(r * cols + k0 + c)];
    }
  }
}

// The device's piece of row r at k (seed_piece_fetch then seed_piece_decode: what gemm.cu's mma kernel runs).
void device_piece(SeedTier t, const uint8_t* blob, int64_t n, int64_t first, int64_t cols, int64_t k, float* v) {
  const sd::Geom g = geom_of(t);
  uint32_t raw[4];
  sd::seed_piece_fetch(g, blob, n, first, cols, k, raw);
  const uint64_t* lo = kLfsrStreamTables.lo;
  const uint64_t* hi = kLfsrStreamTables.hi;
  if (t == SeedTier::P3) sd::seed_piece_decode<8, 3>(g, raw, k, cols, lo, hi, v);
  if (t == SeedTier::P4) sd::seed_piece_decode<8, 4>(g, raw, k, cols, lo, hi, v);
  if (t == SeedTier::S3) sd::seed_piece_decode<12, 4>(g, raw, k, cols, lo, hi, v);
}

}  // namespace

// The stream from the two tables: state k (1..48) of every seed equals k steps of the LFSR.
TEST(SeedDevice, StreamStatesEqualLfsrSteppingForEverySeed) {
  for (uint32_t s = 1; s <= kLfsrPeriod; ++s) {
    uint16_t states[kMaxStates];
    lfsr_states(uint16_t(s), kMaxStates, states);
    const uint64_t stream = sd::stream_of(uint16_t(s), kLfsrStreamTables.lo, kLfsrStreamTables.hi);
    for (int k = 1; k <= kMaxStates; ++k) ASSERT_EQ(uint16_t(stream >> k), states[k - 1]) << "seed " << s << " k " << k;
  }
}

TEST(SeedDevice, CoefficientsEqualTheSpec) {
  for (const SeedTier t : kAllSeedTiers) {
    for (uint32_t word = 0; word < 65536; ++word) {
      SeedBlock b;
      unpack_word(t, uint16_t(word), &b);
      for (int p = 0; p < seed_tier_spec(t).coefs; ++p) ASSERT_EQ(sd::coef_of(geom_of(t), uint16_t(word), p), b.q[p]);
    }
  }
}

// One block per seed for every seed of every tier, then odd shapes: partial last blocks (1003 = 125 * 8 + 3 =
// 83 * 12 + 7), rows shorter than a block, odd block counts, biases at both ends of the format's range.
TEST(SeedDevice, BlockDecodeEqualsSpecForEverySeedAndOddShapes) {
  for (const SeedTier t : kAllSeedTiers) {
    const int64_t C = seed_tier_spec(t).block;
    std::vector<SeedBlock> blocks = random_blocks(t, 65535, 2);
    for (uint32_t s = 1; s <= 65535; ++s) blocks[s - 1].seed = uint16_t(s);
    expect_slice_equals_spec(t, 65535, C, -20, blocks);
    for (const int32_t bias : {kMinExponent, -7, kMaxExponent - 15}) {
      for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{7, 1003}, {13, 5}, {3, 100}}) {
        expect_slice_equals_spec(t, rows, cols, bias,
                                 random_blocks(t, seed_slice_layout(t, rows, cols).n_blocks, uint32_t(rows + bias)));
      }
    }
  }
}

// Every 8-weight piece of every row (k = 0, 8, .. below cols; the tensor-core GEMMs' unit of decoding) against
// decode_seed_matrix bit for bit, zeros from cols on: s3 pieces that cross from one 12-weight block into the next
// (k % 12 == 8), partial last blocks (cols % 12 and cols % 8 of 1 to 11 and 1 to 7), a partial piece past a row's
// last block, rows shorter than one piece, and the last row (whose next block would be past the blob).
TEST(SeedDevice, PieceDecodeEqualsSpecAtEveryPieceOfOddShapes) {
  int64_t crossings = 0;
  for (const SeedTier t : kAllSeedTiers) {
    for (const int32_t bias : {kMinExponent, -19, kMaxExponent - 15}) {
      for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{5, 100},
                                       {3, 1003},
                                       {4, 12},
                                       {7, 5},
                                       {2, 64},
                                       {3, 20},
                                       {3, 28},
                                       {2, 2048},
                                       {3, 2047}}) {
        const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
        const std::vector<uint8_t> blob =
            write_seed_blob(t, rows, cols, bias, random_blocks(t, L.n_blocks, uint32_t(cols * 7 + rows - bias)));
        std::vector<float> want(size_t(rows * cols));
        decode_seed_matrix({t, blob.data(), rows, cols}, want.data());
        const int C = seed_tier_spec(t).block;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t k = 0; k < cols; k += 8) {
            float v[8];
            device_piece(t, blob.data(), L.n_blocks, r * L.blocks_per_row, cols, k, v);
            if (k % C + 8 > C && k + 8 <= cols) ++crossings;
            for (int i = 0; i < 8; ++i) {
              const float w = k + i < cols ? want[size_t(r * cols + k + i)] : 0.0f;
              ASSERT_EQ(0, std::memcmp(&v[i], &w, 4)) << seed_tier_name(t) << " " << rows << " x " << cols << " row "
                                                      << r << " k " << k << " + " << i << ": " << v[i] << " vs " << w;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(crossings, 1000) << "s3 pieces crossing two blocks were checked";
}

}  // namespace seedling
