// GGUF's ggml blocks as the CUDA kernels read them (cuda/ggml_pieces.h), on the CPU: no GPU needed, so these run in
// CI. Every piece of random blocks of each type decodes to codec/ggml_quants.h's codes, and its values are
// ggml_quants.h's (gguf-py's: ggml_codec_test.cpp) bit for bit; the kernels' factored form d * q + m is the very
// arithmetic of those values.
#include "cuda/ggml_pieces.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "cuda_test_util.h"

namespace seedling {
namespace {

namespace gd = cuda::ggml_dev;
using cuda::codec_ids::CodecId;

// One decoded piece of block b against ggml_quants.h: element i of the piece is element elem(i) of the block, its
// code and its value bit for bit, and the offset only where the type has one. False at the first failure.
template <CodecId C, typename Elem>
bool piece_is_ggmls(Codec c, const uint8_t* b, const gd::Piece& p, Elem elem, const std::string& what) {
  float v[8];
  gd::values<C>(p, v);
  for (int i = 0; i < 8; ++i) {
    const int j = elem(i);
    EXPECT_EQ(p.q[i], float(ggml::ggml_code(c, b, j))) << what << " elem " << j;
    EXPECT_EQ(std::bit_cast<uint32_t>(v[i]), std::bit_cast<uint32_t>(ggml::ggml_value(c, b, j)))
        << what << " elem " << j << ": " << v[i] << " vs " << ggml::ggml_value(c, b, j);
    if (::testing::Test::HasFailure()) return false;
  }
  if (!gd::has_offset(C)) {
    EXPECT_EQ(p.m, 0.0f) << what;
  }
  return !::testing::Test::HasFailure();
}

// Every piece of `blocks` (back to back) against ggml_quants.h; returns the number of pieces checked.
template <CodecId C>
int check_pieces(Codec c, const std::vector<uint8_t>& blocks, const std::string& what) {
  const int G = gd::block_elems(C), bytes = gd::block_bytes(C);
  int pieces = 0;
  for (size_t at = 0; at + size_t(bytes) <= blocks.size(); at += size_t(bytes)) {
    const uint8_t* b = blocks.data() + at;
    for (int j0 = 0; j0 < G; j0 += 8) {
      uint32_t raw[8] = {};
      gd::fetch<C>(b, j0, raw);
      const std::string at_block = what + " block " + std::to_string(at / size_t(bytes));
      if (!piece_is_ggmls<C>(
              c, b, gd::decode<C>(raw, j0), [&](int i) { return j0 + i; }, at_block))
        return pieces;
      ++pieces;
    }
  }
  return pieces;
}

// Every pair piece (ggml_pieces.h: elements 4w .. 4w + 3 and 16 + 4w .. 16 + 4w + 3) of `blocks` against
// ggml_quants.h, each element once a block; returns the number of pieces checked.
template <CodecId C>
int check_pair_pieces(Codec c, const std::vector<uint8_t>& blocks, const std::string& what) {
  const int bytes = gd::block_bytes(C);
  int pieces = 0;
  for (size_t at = 0; at + size_t(bytes) <= blocks.size(); at += size_t(bytes)) {
    const uint8_t* b = blocks.data() + at;
    std::vector<int> seen(32, 0);
    for (int w = 0; w < 4; ++w) {
      uint32_t raw[8] = {};
      gd::pair_fetch<C>(b, w, raw);
      const auto elem = [w](int i) { return (i < 4 ? 0 : 16) + 4 * w + i % 4; };
      for (int i = 0; i < 8; ++i) ++seen[size_t(elem(i))];
      const std::string at_block = what + " pair piece, block " + std::to_string(at / size_t(bytes));
      if (!piece_is_ggmls<C>(c, b, gd::pair_decode<C>(raw, w), elem, at_block)) return pieces;
      ++pieces;
    }
    for (int j = 0; j < 32; ++j) EXPECT_EQ(seen[size_t(j)], 1) << what << " elem " << j;
  }
  return pieces;
}

// Pieces (and pair pieces, for the types that have them) of blocks against ggml_quants.h.
template <CodecId C>
void check_all_pieces(Codec c, const std::vector<uint8_t>& blocks, const std::string& what) {
  check_pieces<C>(c, blocks, what);
  if constexpr (gd::has_pair_pieces(C)) check_pair_pieces<C>(c, blocks, what);
}

// Random blocks at the kernels' scale (float16 subnormal d included), then blocks whose every float16 field is a
// random finite float16 (any sign, exponent and mantissa), then the extremes: every byte 0x00, every byte 0xFF but
// the float16 fields set to the largest finite float16.
template <CodecId C>
void check_codec() {
  const Codec c = Codec(uint8_t(C));
  const std::string name(codec_name(c));
  std::vector<uint8_t> blocks = test::random_ggml_blocks(c, 300, 17);
  EXPECT_EQ(check_pieces<C>(c, blocks, name + " (kernel scale)"), 300 * gd::block_elems(C) / 8);
  if constexpr (gd::has_pair_pieces(C)) {
    EXPECT_EQ(check_pair_pieces<C>(c, blocks, name + " (kernel scale)"), 300 * 4);
  }
  std::mt19937 rng(18);
  const size_t bytes = codec_block_bytes(c);
  for (size_t at = 0; at < blocks.size(); at += bytes) {
    for (const size_t f : ggml::ggml_f16_fields(c)) {
      uint16_t h;
      do {
        h = uint16_t(rng());
      } while ((h & 0x7C00u) == 0x7C00u);  // not an infinity or NaN
      std::memcpy(blocks.data() + at + f, &h, 2);
    }
  }
  check_all_pieces<C>(c, blocks, name + " (any finite float16)");
  std::vector<uint8_t> zeros(bytes, 0x00), ones(bytes, 0xFF);
  for (const size_t f : ggml::ggml_f16_fields(c)) {
    const uint16_t largest = 0x7BFF;
    std::memcpy(ones.data() + f, &largest, 2);
  }
  check_all_pieces<C>(c, zeros, name + " (zeros)");
  check_all_pieces<C>(c, ones, name + " (ones)");
}

TEST(GgmlPieces, EveryPieceIsGgmlQuantsBitForBit) {
  check_codec<CodecId::Q8_0>();
  check_codec<CodecId::Q4_0>();
  check_codec<CodecId::Q5_0>();
  check_codec<CodecId::Q5_1>();
  check_codec<CodecId::Q2_K>();
  check_codec<CodecId::Q3_K>();
  check_codec<CodecId::Q4_K>();
  check_codec<CodecId::Q5_K>();
  check_codec<CodecId::Q6_K>();
  check_codec<CodecId::IQ4_NL>();
  check_codec<CodecId::IQ4_XS>();
}

// Q6_K's runs (q6k_run_fetch / q6k_run_decode, the kernels' lane mapping) give ggml_quants.h's codes and values for
// every element, each once.
TEST(GgmlPieces, Q6kRunsCoverEveryElementAsGgmlQuants) {
  const Codec c = Codec::Q6_K;
  const std::vector<uint8_t> blocks = test::random_ggml_blocks(c, 200, 19);
  const size_t bytes = codec_block_bytes(c);
  for (size_t at = 0; at < blocks.size(); at += bytes) {
    const uint8_t* b = blocks.data() + at;
    std::vector<int> seen(256, 0);
    for (int t = 0; t < 8; ++t) {
      uint32_t raw[9] = {};
      gd::q6k_run_fetch(b, t, raw);
      for (int g = 0; g < 4; ++g) {
        const gd::Piece p = gd::q6k_run_decode(raw, t, g);
        float v[8];
        gd::values<CodecId::Q6_K>(p, v);
        for (int i = 0; i < 8; ++i) {
          const int j = 128 * (t / 4) + 32 * g + 8 * (t % 4) + i;
          ++seen[size_t(j)];
          ASSERT_EQ(p.q[i], float(ggml::ggml_code(c, b, j))) << "block " << at / bytes << " elem " << j;
          ASSERT_EQ(std::bit_cast<uint32_t>(v[i]), std::bit_cast<uint32_t>(ggml::ggml_value(c, b, j)))
              << "block " << at / bytes << " elem " << j;
        }
      }
    }
    for (int j = 0; j < 256; ++j) ASSERT_EQ(seen[size_t(j)], 1) << j;
  }
}

// The blocks' sizes keep every load of fetch() aligned to its size when the row starts kAlign-aligned (rows start
// 16-byte aligned in VRAM): a block starts at a multiple of its size, which kAlign divides.
TEST(GgmlPieces, BlockSizesKeepTheLoadsAligned) {
  for (const Codec c : test::kGgmlCodecs) {
    const CodecId id = CodecId(uint8_t(c));
    ASSERT_TRUE(gd::is_ggml_piece(id)) << codec_name(c);
    EXPECT_EQ(gd::block_bytes(id) % gd::kAlign(id), 0) << codec_name(c);
    EXPECT_EQ(size_t(gd::block_bytes(id)), codec_block_bytes(c)) << codec_name(c);
    EXPECT_EQ(gd::block_elems(id), codec_group(c)) << codec_name(c);
  }
  EXPECT_FALSE(gd::is_ggml_piece(CodecId::MXFP4_GGML));
  EXPECT_FALSE(gd::is_ggml_piece(CodecId::FP8_G32));
}

}  // namespace
}  // namespace seedling
