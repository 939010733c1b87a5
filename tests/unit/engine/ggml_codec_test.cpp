// ggml's quant types as Seedling codecs (codec/ggml_quants.h, io/gguf_codec.h, ops/ggml_decode-inl.h), held to
// vectors that gguf-py wrote (tests/data/gguf/quant_vectors.gguf, tests/data/gguf/make_quant_vectors.py): random
// blocks of every decoded type with edge cases, and gguf-py's float32 dequantization of them.
//
// - the reference dequantization (codec_value) and the kernels' SIMD decoder equal gguf-py's values bit for bit,
//   the decoder on every SIMD target;
// - matvec and batched matmul on the stored blocks are within float32 rounding of a float64 dot of gguf-py's
//   values, give a row the same bits alone, batched, in matmul_batch and at any thread count, and decode Plain and
//   Simd to the same bits;
// - the block sizes are ggml's, and every other ggml type is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/quantize.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/gguf_codec.h"
#include "ops/matmul.h"
#include "test_util.h"

namespace seedling {
namespace {

struct Vectors {
  GgmlType type = GgmlType::F32;
  std::string name;  // "Q4_K"
  Codec codec = Codec::F32;
  ops::Matrix w;                  // the stored blocks, rows x cols
  const float* values = nullptr;  // gguf-py's dequantization, rows x cols
};

const GgufFile& vector_file() {
  static const GgufFile f(test::data_path("gguf/quant_vectors.gguf"));
  return f;
}

// Every ggml type Seedling decodes, with its vectors; fails the test when the file lacks one.
std::vector<Vectors> all_vectors() {
  std::vector<Vectors> out;
  const GgufFile& f = vector_file();
  for (const GgmlTypeInfo& info : ggml_types()) {
    if (!ggml_codec(info.type)) continue;
    const GgufTensor& blocks = f.tensor(std::string(info.name) + ".blocks");
    const GgufTensor& values = f.tensor(std::string(info.name) + ".values");
    EXPECT_EQ(blocks.type, info.type);
    EXPECT_EQ(values.type, GgmlType::F32);
    EXPECT_EQ(blocks.dims, values.dims) << info.name;
    const Codec c = gguf_tensor_codec(f, blocks);
    const ops::Matrix w{c, blocks.data, blocks.dims[1], blocks.dims[0]};
    EXPECT_EQ(w.nbytes(), blocks.nbytes) << info.name;
    out.push_back({info.type, info.name, c, w, reinterpret_cast<const float*>(values.data)});
  }
  return out;
}

const uint8_t* row_of(const ops::Matrix& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes();
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

// The kernels read a block's d and dmin with ggml::f16_at, subnormals inline (a K-quant's super-block d often is one):
// the same bits as f16_to_f32 for every float16.
TEST(GgmlCodec, F16AtIsF16ToF32ForEveryFloat16) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    uint8_t b[2];
    const uint16_t v = uint16_t(h);
    std::memcpy(b, &v, 2);
    ASSERT_EQ(bits(ggml::f16_at(b)), bits(f16_to_f32(v))) << "float16 bits " << h;
  }
}

TEST(GgmlCodec, EveryDecodedTypeHasGgmlsBlockSizeAndAName) {
  int decoded = 0;
  for (const GgmlTypeInfo& info : ggml_types()) {
    const std::optional<Codec> c = ggml_codec(info.type);
    if (!c) continue;
    ++decoded;
    EXPECT_EQ(codec_group(*c), int64_t(info.block_elems)) << info.name;
    EXPECT_EQ(codec_block_bytes(*c), size_t(info.block_bytes)) << info.name;
    EXPECT_EQ(parse_codec(codec_name(*c)), c) << info.name;
  }
  EXPECT_EQ(decoded, 16);  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, MXFP4
  EXPECT_EQ(ggml_codec(GgmlType::Q4_1), Codec::Q4_G32);  // the same block byte for byte
  EXPECT_EQ(ggml_codec(GgmlType::MXFP4), Codec::MXFP4_GGML);
  EXPECT_EQ(codec_name(Codec::Q4_K), "q4_k");
  EXPECT_TRUE(codec_is_ggml(Codec::IQ4_XS));
  EXPECT_FALSE(codec_is_ggml(Codec::Q4_G32));
  EXPECT_FALSE(codec_is_affine(Codec::Q4_0));
}

TEST(GgmlCodec, OtherGgmlTypesAreRefusedByName) {
  for (const GgmlType t :
       {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ3_XXS, GgmlType::IQ1_S,
        GgmlType::IQ3_S, GgmlType::IQ2_S, GgmlType::IQ1_M, GgmlType::I8, GgmlType::I32, GgmlType::F64}) {
    EXPECT_FALSE(ggml_codec(t).has_value()) << ggml_type_name(t);
    GgufTensor tensor;
    tensor.name = "blk.0.ffn_down_exps.weight";
    tensor.type = t;
    const std::string e = test::error_of([&] { gguf_tensor_codec(vector_file(), tensor); });
    EXPECT_NE(e.find("tensor 'blk.0.ffn_down_exps.weight' is " + ggml_type_name(t) + ", which Seedling does not"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4"), std::string::npos) << e;
  }
}

TEST(GgmlCodec, ReferenceDequantizationEqualsGgufPyBitForBit) {
  for (const Vectors& v : all_vectors()) {
    int64_t nonzero = 0;
    for (int64_t r = 0; r < v.w.rows; ++r) {
      for (int64_t k = 0; k < v.w.cols; ++k) {
        const float want = v.values[r * v.w.cols + k], got = codec_value(v.codec, row_of(v.w, r), k);
        ASSERT_EQ(bits(got), bits(want)) << v.name << " row " << r << " element " << k << ": " << got << " vs " << want;
        nonzero += want != 0.0f;
      }
    }
    EXPECT_GT(nonzero, v.w.rows * v.w.cols / 2) << v.name << ": the vectors are mostly zeros";
  }
}

TEST(GgmlCodec, SimdDecodeEqualsGgufPyBitForBitOnEveryTarget) {
  const std::vector<Vectors> vs = all_vectors();
  test::for_each_simd_target([&] {
    for (const Vectors& v : vs) {
      if (!codec_is_ggml(v.codec)) continue;
      std::vector<float> row(size_t(v.w.cols) + 1);
      for (int64_t r = 0; r < v.w.rows; ++r) {
        row.back() = 12345.0f;
        ops::ggml_decode_row(v.codec, row_of(v.w, r), v.w.cols, row.data());
        ASSERT_EQ(std::memcmp(row.data(), v.values + r * v.w.cols, size_t(v.w.cols) * 4), 0) << v.name << " row " << r;
        ASSERT_EQ(row.back(), 12345.0f) << "wrote past the row";
      }
    }
  });
}

// y = x W^T against sum_k x_k w_k in float64 with w = gguf-py's values. Each output is one accumulator: every
// product is exact inside a fused multiply-add and each term goes through at most cols / L + log2(L) <= cols
// roundings, so |y - exact| <= gamma_cols * sum_k |x_k w_k|, plus an absolute 2^-150 a rounding where sums are
// subnormal, plus the float64 dot's own error (cols * 2^-53 relative). Rows whose products could overflow float32
// (the F32 extremes, MXFP4's largest exponent) are held to the bit tests only.
TEST(GgmlCodec, MatmulIsWithinFloatRoundingOfAFloat64DotOfGgufPysValues) {
  const ops::ScopedCpuDot float_dot(ops::CpuDot::Float);  // the float path's definition
  const std::vector<Vectors> vs = all_vectors();
  test::for_each_simd_target([&] {
    for (const Vectors& v : vs) {
      for (const int64_t rows : {int64_t(1), v.w.rows - 1, v.w.rows}) {  // a partial tile of 4 outputs, then whole
        const ops::Matrix w = v.w.row_slice(0, rows);
        const int64_t cols = w.cols, m = 5;
        const std::vector<float> x = test::gaussian(size_t(m * cols), 7);
        std::vector<float> y(size_t(m * rows)), alone(static_cast<size_t>(rows)), plain(y.size()), batch(y.size());
        ops::matmul(x.data(), m, w, y.data());
        for (int64_t i = 0; i < m; ++i) {
          ops::matmul(x.data() + i * cols, 1, w, alone.data());
          ASSERT_EQ(std::memcmp(alone.data(), y.data() + i * rows, size_t(rows) * 4), 0) << v.name << " row " << i;
        }
        ops::set_ggml_decode(ops::GgmlDecode::Plain);
        ops::matmul(x.data(), m, w, plain.data());
        ops::set_ggml_decode(ops::GgmlDecode::Simd);
        ASSERT_EQ(std::memcmp(plain.data(), y.data(), y.size() * 4), 0) << v.name << ": plain decode";
        ops::matmul_batch({{x.data(), m, w, batch.data()}, {x.data(), 1, w, alone.data()}});
        ASSERT_EQ(std::memcmp(batch.data(), y.data(), y.size() * 4), 0) << v.name << ": matmul_batch";
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t n = 0; n < rows; ++n) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double p = double(x[size_t(i * cols + k)]) * double(v.values[n * cols + k]);
              exact += p;
              mag += std::fabs(p);
            }
            if (mag > 0x1.0p100) continue;
            const double bound = test::rounding_gamma(double(cols)) * mag + double(cols) * std::ldexp(mag, -53) +
                                 double(cols) * 0x1.0p-150;
            ASSERT_LE(std::fabs(double(y[size_t(i * rows + n)]) - exact), bound)
                << v.name << " x row " << i << " output " << n;
          }
        }
      }
    }
  });
}

TEST(GgmlCodec, ARowGivesTheSameBitsAtAnyThreadCount) {
  const std::vector<Vectors> vs = all_vectors();
  const int threads = ThreadPool::global().size();
  for (const Vectors& v : vs) {
    const int64_t m = 3;
    const std::vector<float> x = test::gaussian(size_t(m * v.w.cols), 9);
    std::vector<float> many(size_t(m * v.w.rows)), one(many.size());
    ops::matmul(x.data(), m, v.w, many.data());
    ThreadPool::set_global_threads(1);
    ops::matmul(x.data(), m, v.w, one.data());
    ThreadPool::set_global_threads(threads);
    ASSERT_EQ(std::memcmp(many.data(), one.data(), many.size() * 4), 0) << v.name;
  }
}

TEST(GgmlCodec, RowsOfPartialBlocksAndEncodingAreRefusedByName) {
  const ops::ScopedCpuDot float_dot(ops::CpuDot::Float);  // the float path's definition
  Vectors v;
  for (const Vectors& u : all_vectors())
    if (u.type == GgmlType::Q4_K) v = u;
  ASSERT_EQ(v.codec, Codec::Q4_K);
  const ops::Matrix part{v.codec, v.w.data, 1, 128};
  std::vector<float> x(128, 1.0f), y(1);
  EXPECT_NE(test::error_of([&] {
              ops::matmul(x.data(), 1, part, y.data());
            }).find("a " + std::string(codec_name(v.codec)) + " row holds whole blocks of 256 elements, not 128"),
            std::string::npos);
  std::vector<uint8_t> out(codec_row_bytes(v.codec, 256));
  std::vector<float> row(256, 0.5f);
  EXPECT_NE(test::error_of([&] { encode_row(v.codec, row.data(), 256, out.data()); }).find("no encoder"),
            std::string::npos);
}

}  // namespace seedling
