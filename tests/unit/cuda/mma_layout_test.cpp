// The index arithmetic of gemm.cu's mma.sync kernel (cuda/mma_layout.h), on the CPU: no GPU needed, so these run in
// CI. The fragment functions against the PTX ISA's layouts for mma.m16n8k8 .tf32 (written out again here, as the
// ISA's figures state them); the f16 kernel's ldmatrix addresses through emulated ldmatrix.x4 and m16n8k16; each block
// tile's warps, fed and drained through those indices and an emulated MMA,
// against the plain product; and the weight pieces against codec_value (codec.h) for every codec.
#include "cuda/mma_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "codec/codec.h"
#include "codec/quantize.h"

namespace seedling {

namespace {

namespace mma = cuda::mma;

// The PTX ISA, "Matrix Fragments for mma.m16n8k8" (.tf32), with groupID = laneid >> 2 and threadID_in_group =
// laneid % 4. A: row = groupID for a0 and a2, groupID + 8 for a1 and a3; col = threadID_in_group for a0 and a1,
// threadID_in_group + 4 for a2 and a3. B: row = threadID_in_group for b0, threadID_in_group + 4 for b1; col =
// groupID. C/D: row = groupID for c0 and c1, groupID + 8 for c2 and c3; col = threadID_in_group * 2 + (i & 0x1).
mma::RowCol isa_a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {(i == 0 || i == 2) ? g : g + 8, (i == 0 || i == 1) ? t : t + 4};
}
mma::RowCol isa_b(int lane, int i) {
  return {i == 0 ? lane % 4 : lane % 4 + 4, lane >> 2};
}
mma::RowCol isa_c(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 0x1)};
}

// One warp's mma.sync m16n8k8 on the CPU, reading the registers as the ISA lays them out: d[lane][i] += sum_k
// A[row][k] B[k][col]. Operands are small integers, so float sums are exact in any order.
void emulate_mma(float (&d)[32][4], const float (&a)[32][4], const float (&b)[32][2]) {
  float A[16][8], B[8][8];
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) A[isa_a(lane, i).row][isa_a(lane, i).col] = a[lane][i];
    for (int i = 0; i < 2; ++i) B[isa_b(lane, i).row][isa_b(lane, i).col] = b[lane][i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const mma::RowCol rc = isa_c(lane, i);
      for (int k = 0; k < 8; ++k) d[lane][i] += A[rc.row][k] * B[k][rc.col];
    }
  }
}

}  // namespace

TEST(MmaLayout, FragmentsAreThePtxIsaLayouts) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(mma::frag_a(lane, i).row, isa_a(lane, i).row) << lane << " a" << i;
      EXPECT_EQ(mma::frag_a(lane, i).col, isa_a(lane, i).col) << lane << " a" << i;
      EXPECT_EQ(mma::frag_c(lane, i).row, isa_c(lane, i).row) << lane << " c" << i;
      EXPECT_EQ(mma::frag_c(lane, i).col, isa_c(lane, i).col) << lane << " c" << i;
      a.insert({mma::frag_a(lane, i).row, mma::frag_a(lane, i).col});
      c.insert({mma::frag_c(lane, i).row, mma::frag_c(lane, i).col});
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(mma::frag_b(lane, i).row, isa_b(lane, i).row) << lane << " b" << i;
      EXPECT_EQ(mma::frag_b(lane, i).col, isa_b(lane, i).col) << lane << " b" << i;
      b.insert({mma::frag_b(lane, i).row, mma::frag_b(lane, i).col});
    }
  }
  // Each covers its matrix once: 16 x 8, 8 x 8, 16 x 8.
  EXPECT_EQ(a.size(), 128u);
  EXPECT_EQ(b.size(), 64u);
  EXPECT_EQ(c.size(), 128u);
  EXPECT_EQ(*a.rbegin(), std::make_pair(15, 7));
  EXPECT_EQ(*c.rbegin(), std::make_pair(15, 7));
  // A few points read off the ISA's figures: lane 5 holds A (1, 1), (9, 1), (1, 5), (9, 5); B (1, 1), (5, 1);
  // C (1, 2), (1, 3), (9, 2), (9, 3).
  EXPECT_EQ(mma::frag_a(5, 3).row, 9);
  EXPECT_EQ(mma::frag_a(5, 3).col, 5);
  EXPECT_EQ(mma::frag_b(5, 1).row, 5);
  EXPECT_EQ(mma::frag_b(5, 1).col, 1);
  EXPECT_EQ(mma::frag_c(5, 3).row, 9);
  EXPECT_EQ(mma::frag_c(5, 3).col, 3);
}

namespace {

// A block tile's 64-wide k-slice as the kernel runs it: x (BM x 64) and weight rows (BN x 64) in shared-memory
// layout (stride kLd, padding poisoned with NaN), every warp's fragments read through a_index / b_index, the MMAs
// emulated, the accumulators written through c_index; the result must be the plain product X W^T.
template <class T>
void check_tile() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs(size_t(T::BM * T::kLd), nan), ws(size_t(T::BN * T::kLd), nan);
  for (int r = 0; r < T::BM; ++r) {
    for (int k = 0; k < T::kBK; ++k) xs[size_t(r * T::kLd + k)] = float(small(rng));
  }
  for (int n = 0; n < T::BN; ++n) {
    for (int k = 0; k < T::kBK; ++k) ws[size_t(n * T::kLd + k)] = float(small(rng));
  }
  std::vector<float> cs(size_t(T::BM * T::kLdc), nan);
  std::vector<int> written(cs.size(), 0);
  for (int warp = 0; warp < T::kThreads / 32; ++warp) {
    for (int mt = 0; mt < T::MT; ++mt) {
      for (int nt = 0; nt < T::NT; ++nt) {
        float d[32][4] = {};
        for (int kk = 0; kk < T::kBK; kk += 8) {
          float a[32][4], b[32][2];
          for (int lane = 0; lane < 32; ++lane) {
            for (int i = 0; i < 4; ++i) a[lane][i] = xs[size_t(T::a_index(warp, lane, mt, kk, i))];
            for (int i = 0; i < 2; ++i) b[lane][i] = ws[size_t(T::b_index(warp, lane, nt, kk, i))];
          }
          emulate_mma(d, a, b);
        }
        for (int lane = 0; lane < 32; ++lane) {
          for (int i = 0; i < 4; ++i) {
            const int at = T::c_index(warp, lane, mt, nt, i);
            cs[size_t(at)] = d[lane][i];
            ++written[size_t(at)];
          }
        }
      }
    }
  }
  for (int r = 0; r < T::BM; ++r) {
    for (int n = 0; n < T::BN; ++n) {
      float want = 0;
      for (int k = 0; k < T::kBK; ++k) want += xs[size_t(r * T::kLd + k)] * ws[size_t(n * T::kLd + k)];
      ASSERT_EQ(written[size_t(r * T::kLdc + n)], 1) << "row " << r << " col " << n;
      ASSERT_EQ(cs[size_t(r * T::kLdc + n)], want) << "row " << r << " col " << n;
    }
  }
}

}  // namespace

TEST(MmaLayout, WarpTilesComputeTheBlockProduct) {
  check_tile<mma::Tile<128, 128, 2, 4>>();  // gemm.cu's TileL
  check_tile<mma::Tile<64, 64, 2, 2>>();    // gemm.cu's TileS
}

namespace {

// ldmatrix.x4 on the CPU, as the PTX ISA states it: lanes 8i .. 8i + 7 give the addresses (indices into tile) of
// matrix i's rows; register i of `lane` receives row lane / 4 of matrix i, elements 2 (lane % 4) and the next.
void emulate_ldmatrix_x4(const std::vector<float>& tile, const int (&addr)[32], float (&reg)[32][4][2]) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      for (int e = 0; e < 2; ++e) reg[lane][i][e] = tile[size_t(addr[8 * i + lane / 4] + 2 * (lane % 4) + e)];
    }
  }
}

// mma.sync m16n8k16 (f16 operands, f32 accumulators) on the CPU, from the ISA's fragment layouts ("Matrix Fragments
// for mma.m16n8k16 with floating point type"): A register i, element e is (row g + 8 (i % 2), k 2t + e + 8 (i / 2));
// B register i, element e is (k 2t + e + 8 i, n g); C as m16n8k8's.
void emulate_mma16(float (&d)[32][4], const float (&a)[32][4][2], const float (&b)[32][2][2]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      for (int i = 0; i < 4; ++i) A[g + 8 * (i % 2)][2 * t + e + 8 * (i / 2)] = a[lane][i][e];
      for (int i = 0; i < 2; ++i) B[2 * t + e + 8 * i][g] = b[lane][i][e];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const mma::RowCol rc = isa_c(lane, i);
      for (int k = 0; k < 16; ++k) d[lane][i] += A[rc.row][k] * B[k][rc.col];
    }
  }
}

// As check_tile, for the f16 kernel's tiles: fragments by emulated ldmatrix.x4 from a_ldm / b_ldm addresses.
template <class T>
void check_tile16() {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> small(-8, 8);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs(size_t(T::BM * T::kLdh), nan), ws(size_t(T::BN * T::kLdh), nan);
  for (int r = 0; r < T::BM; ++r) {
    for (int k = 0; k < T::kBK; ++k) xs[size_t(r * T::kLdh + k)] = float(small(rng));
  }
  for (int n = 0; n < T::BN; ++n) {
    for (int k = 0; k < T::kBK; ++k) ws[size_t(n * T::kLdh + k)] = float(small(rng));
  }
  std::vector<float> cs(size_t(T::BM * T::kLdc), nan);
  std::vector<int> written(cs.size(), 0);
  for (int warp = 0; warp < T::kThreads / 32; ++warp) {
    for (int mt = 0; mt < T::MT; ++mt) {
      for (int np = 0; np < T::NT / 2; ++np) {
        float d[2][32][4] = {};
        for (int kk = 0; kk < T::kBK; kk += 16) {
          int aa[32], ba[32];
          for (int lane = 0; lane < 32; ++lane) {
            aa[lane] = T::a_ldm(warp, lane, mt, kk);
            ba[lane] = T::b_ldm(warp, lane, np, kk);
          }
          float a[32][4][2], b4[32][4][2], b[2][32][2][2];
          emulate_ldmatrix_x4(xs, aa, a);
          emulate_ldmatrix_x4(ws, ba, b4);
          for (int lane = 0; lane < 32; ++lane) {
            for (int e = 0; e < 2; ++e) {
              for (int h = 0; h < 2; ++h) {
                b[h][lane][0][e] = b4[lane][2 * h][e];
                b[h][lane][1][e] = b4[lane][2 * h + 1][e];
              }
            }
          }
          emulate_mma16(d[0], a, b[0]);
          emulate_mma16(d[1], a, b[1]);
        }
        for (int h = 0; h < 2; ++h) {
          for (int lane = 0; lane < 32; ++lane) {
            for (int i = 0; i < 4; ++i) {
              const int at = T::c_index(warp, lane, mt, 2 * np + h, i);
              cs[size_t(at)] = d[h][lane][i];
              ++written[size_t(at)];
            }
          }
        }
      }
    }
  }
  for (int r = 0; r < T::BM; ++r) {
    for (int n = 0; n < T::BN; ++n) {
      float want = 0;
      for (int k = 0; k < T::kBK; ++k) want += xs[size_t(r * T::kLdh + k)] * ws[size_t(n * T::kLdh + k)];
      ASSERT_EQ(written[size_t(r * T::kLdc + n)], 1) << "row " << r << " col " << n;
      ASSERT_EQ(cs[size_t(r * T::kLdc + n)], want) << "row " << r << " col " << n;
    }
  }
}

}  // namespace

TEST(MmaLayout, F16WarpTilesComputeTheBlockProduct) {
  check_tile16<mma::Tile16<128, 128, 2, 4>>();  // gemm.cu's Tile16L
  check_tile16<mma::Tile16<64, 64, 2, 2>>();    // gemm.cu's Tile16S
}

// ldmatrix reads 8 rows of 16 bytes a matrix: with rows kLdh halves apart, they fall in 8 different 16-byte groups
// of the 32 banks, so a matrix is one conflict-free wavefront.
TEST(MmaLayout, F16StrideSpreadsALdmatrixOverAllBanks) {
  using T = mma::Tile16<128, 128, 2, 4>;
  for (int kk = 0; kk < T::kBK; kk += 16) {
    for (int i = 0; i < 4; ++i) {
      std::set<int> a, b;
      for (int r = 0; r < 8; ++r) {
        a.insert(T::a_ldm(1, 8 * i + r, 2, kk) * 2 / 16 % 8);
        b.insert(T::b_ldm(3, 8 * i + r, 1, kk) * 2 / 16 % 8);
      }
      EXPECT_EQ(a.size(), 8u) << "a matrix " << i << " at k " << kk;
      EXPECT_EQ(b.size(), 8u) << "b matrix " << i << " at k " << kk;
    }
  }
}

TEST(MmaLayout, SharedStrideSpreadsAFragmentLoadOverAllBanks) {
  using T = mma::Tile<128, 128, 2, 4>;
  for (int kk = 0; kk < T::kBK; kk += 8) {
    for (int i = 0; i < 4; ++i) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) banks.insert(T::a_index(1, lane, 2, kk, i) % 32);
      EXPECT_EQ(banks.size(), 32u) << "a" << i << " at k " << kk;
    }
    for (int i = 0; i < 2; ++i) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) banks.insert(T::b_index(3, lane, 1, kk, i) % 32);
      EXPECT_EQ(banks.size(), 32u) << "b" << i << " at k " << kk;
    }
  }
}

// Every codec's 8 pieces of a slice cover its 64 positions once, and reading a piece's words as gemm.cu's
// fetch_piece / store_piece do (the d/m word, then code word `word`, and for 8-bit codes the next one; 4-bit
// values 0..3 from low nibbles, 4..7 from high ones) gives codec_value at those positions, slice after slice.
TEST(MmaLayout, WeightPiecesAreTheCodecsValues) {
  for (const Codec c :
       {Codec::F32, Codec::F16, Codec::BF16, Codec::Q8_G32, Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64}) {
    const bool affine = codec_group(c) > 1;
    const int G = affine ? int(codec_group(c)) : (c == Codec::F32 ? 4 : 8);
    const bool four = affine && codec_bits(c) == 4;
    const int64_t cols = 192;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> w(static_cast<size_t>(cols));
    for (float& v : w) v = nd(rng);
    std::vector<uint8_t> row(codec_matrix_bytes(c, 1, cols));
    encode_matrix(c, DType::F32, w.data(), 1, cols, row.data());
    for (int64_t k0 = 0; k0 < cols; k0 += 64) {
      std::vector<int> seen(64, 0);
      for (int p = 0; p < 8; ++p) {
        const mma::Piece pc = mma::piece_of(G, affine, four, p);
        for (int j = 0; j < 8; ++j) {
          const int pos = j < 4 ? pc.first + j : pc.second + j - 4;
          ASSERT_TRUE(pos >= 0 && pos < 64) << codec_name(c) << " piece " << p;
          ++seen[size_t(pos)];
          if (!affine) continue;
          const uint8_t* block = row.data() + size_t(k0 / G + pc.unit) * codec_block_bytes(c);
          uint16_t dh, mh;
          std::memcpy(&dh, block, 2);
          std::memcpy(&mh, block + 2, 2);
          uint32_t word;
          const int wi = four ? pc.word : pc.word + j / 4;
          std::memcpy(&word, block + 4 + 4 * wi, 4);
          const uint32_t byte = (word >> (8 * (j % 4))) & 0xffu;
          const uint32_t q = four ? (j < 4 ? byte & 0x0fu : byte >> 4) : byte;
          const float dq = f16_to_f32(dh) * float(q);  // as codec_value: the product, then + m
          const float got = dq + f16_to_f32(mh);
          ASSERT_EQ(got, codec_value(c, row.data(), k0 + pos)) << codec_name(c) << " k " << k0 + pos;
        }
      }
      for (int pos = 0; pos < 64; ++pos) ASSERT_EQ(seen[size_t(pos)], 1) << codec_name(c) << " position " << pos;
    }
  }
}

// FP8 (fp8_g32) takes a float codec's pieces (8 consecutive weights), which gemm.cu's fetch_piece reads as the scale
// of the piece's group and the two code words from the piece's first element: each weight, kE4m3Values[code] * d, is
// codec_value at its position, every position of every slice once, over a row of 6 groups (3 slices).
TEST(MmaLayout, Fp8PiecesAreTheCodecsValues) {
  const int64_t cols = 192;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(cols));
  for (float& v : w) v = nd(rng);
  std::vector<uint8_t> row(codec_matrix_bytes(Codec::FP8_G32, 1, cols));
  encode_matrix(Codec::FP8_G32, DType::F32, w.data(), 1, cols, row.data());
  for (int64_t k0 = 0; k0 < cols; k0 += 64) {
    std::vector<int> seen(64, 0);
    for (int p = 0; p < 8; ++p) {
      const mma::Piece pc = mma::piece_of(8, false, false, p);
      const int64_t k = k0 + 8 * p;  // fetch_piece: the group of k, code words (k % 32) / 4 and the next
      const uint8_t* block = row.data() + size_t(k / 32) * codec_block_bytes(Codec::FP8_G32);
      float d;
      std::memcpy(&d, block, 4);
      for (int j = 0; j < 8; ++j) {
        const int pos = j < 4 ? pc.first + j : pc.second + j - 4;
        ASSERT_TRUE(pos >= 0 && pos < 64) << "piece " << p;
        ++seen[size_t(pos)];
        uint32_t word;
        std::memcpy(&word, block + 4 + 4 * ((k % 32) / 4 + j / 4), 4);
        const float got = kE4m3Values.v[(word >> (8 * (j % 4))) & 0xffu] * d;
        ASSERT_EQ(got, codec_value(Codec::FP8_G32, row.data(), k0 + pos)) << "k " << k0 + pos;
      }
    }
    for (int pos = 0; pos < 64; ++pos) ASSERT_EQ(seen[size_t(pos)], 1) << "position " << pos;
  }
}

}  // namespace seedling
