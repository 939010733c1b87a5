// Each CUDA kernel against the CPU op it stands for (ops/, ops::ref::matmul in double), on random inputs.
//
// Tolerances come from the arithmetic. Activations are float32 on both sides and no bf16 rounding happens in any
// kernel, so the differences are float32 rounding of sums in another order: a dot product of n terms is within
// (n + 8) * 2^-24 * sum |x_k| |w_k| of the exact value (|w_k| read as |d q| + |m| for the affine and ggml codecs,
// whose kernels factor each block's (or piece's) d and m out of the sum), and the exp/sin/cos of CUDA are within a
// few ulps of the C library's.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <utility>

#include "codec/ggml_quants.h"
#include "codec/quantize.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "kv/kv_layout.h"
#include "model/config.h"
#include "ops/matmul.h"
#include "ops/ops.h"
#include "test_util.h"

namespace seedling {

namespace {

using test::DeviceVec;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  return test::gaussian(n, seed, scale);
}

using test::kCudaCodecs;

constexpr double kU = 1.0 / 16777216.0;  // 2^-24, float32 unit roundoff

using test::encoded;

// matmul_kernel's product of one row: x (cols floats on the device) twice, as a batch of two, into y (w.rows floats;
// with accumulate, y +=). matmul's one-row products take matvec's launch, which the tests below hold to this kernel.
void batch_kernel_row(const float* x, int64_t cols, const cuda::DeviceMatrix& w, float* y, bool accumulate = false) {
  std::vector<float> two(size_t(2 * cols)), y2(size_t(2 * w.rows));
  cuda::check(cudaMemcpy(two.data(), x, size_t(cols) * sizeof(float), cudaMemcpyDeviceToHost), "test download");
  std::copy_n(two.begin(), cols, two.begin() + cols);
  if (accumulate) {
    cuda::check(cudaMemcpy(y2.data(), y, size_t(w.rows) * sizeof(float), cudaMemcpyDeviceToHost), "test download");
    std::copy_n(y2.begin(), w.rows, y2.begin() + w.rows);
  }
  DeviceVec<float> dx(two), dy(y2);
  cuda::matmul(dx.get(), 2, w, dy.get(), accumulate, nullptr);
  cuda::check(cudaMemcpy(y, dy.get(), size_t(w.rows) * sizeof(float), cudaMemcpyDeviceToDevice), "test copy");
}

// What the rounding of element k's term scales with: |w| for float, seed, MXFP4 and FP8 codecs (seed and MXFP4
// weights are decoded exactly, then multiplied and added as floats are; FP8's kernels add d * sum(e4m3 x) per block,
// whose exact terms are within 2^-24 |w x| of the CPU's); for affine ones, whose kernels add d * sum(q x) + m * sum(x)
// per block (lane_dot.cuh, affine_group_dot), |d q| + |m|; for the ggml codecs, whose kernels add
// d * sum(q x) + m * sum(x) per piece of a sub-block (ggml_group_dot), |d q| + |m| of its sub-block's
// d = d_block * scale and m = dmin * min (ggml_quants.h's ggml_int_scales; q5_1: its m).
double abs_term(const ops::Matrix& w, int64_t n, int64_t k) {
  if (codec_is_float(w.codec) || codec_is_seed(w.codec) || w.codec == Codec::MXFP4 || w.codec == Codec::MXFP4_GGML ||
      w.codec == Codec::FP8_G32) {
    return std::fabs(double(w.at(n, k)));
  }
  const int64_t g = codec_group(w.codec);
  const uint8_t* block = static_cast<const uint8_t*>(w.data) + size_t(n) * codec_row_bytes(w.codec, w.cols) +
                         size_t(k / g) * codec_block_bytes(w.codec);
  if (codec_is_ggml(w.codec)) {
    ggml::IntScales s;
    ggml::ggml_int_scales(w.codec, block, s);
    const int j = int(k % g), sub = j / 16;
    const float d = s.d * float(s.scale[sub]), m = s.dmin * float(s.min[sub]);
    return std::fabs(double(d) * ggml::ggml_code(w.codec, block, j)) + std::fabs(double(m));
  }
  uint16_t mh;
  std::memcpy(&mh, block + 2, 2);
  const double m = f16_to_f32(mh);
  return std::fabs(double(w.at(n, k)) - m) + std::fabs(m);  // |d q| + |m|, d q recovered exactly as w - m
}

// |sum_k x_k w_k| bound for row i, output n: sum_k |x_k| (|w_k|, or |d q| + |m| for affine codecs).
double abs_dot(const std::vector<float>& x, int64_t i, const ops::Matrix& w, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < w.cols; ++k) s += std::fabs(double(x[size_t(i * w.cols + k)])) * abs_term(w, n, k);
  return s;
}

// Where the CUDA forward keeps the keys and values of a hybrid of 4 layers with kv_dim-wide rows (kv/kv_layout.h):
// layers 0 and 2 Gated DeltaNet (no rows), 1 and 3 attention; the tests write and read layer 3, at base 2 * kv_dim.
KvRowLayout hybrid_layout(int kv_dim) {
  const KvLayerShape linear{0, 0, 64}, attention{kv_dim, kv_dim, 0};
  return KvRowLayout(std::vector<KvLayerShape>{linear, attention, linear, attention});
}
constexpr int kHybridLayer = 3;

}  // namespace

class CudaMatmulTest : public ::testing::TestWithParam<std::tuple<Codec, int64_t>> {};

// 70 rows of x (as many as a prompt pass whose products stay on CUDA cores: MXFP4's), against the reference; row 4
// alone (decode) and rows 1..3 (a batch of 3: a partial pass of kMatmulRows) give their bits in the 70.
TEST_P(CudaMatmulTest, MatchesReferenceAndRowsAreIndependentOfTheBatch) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [codec, cols] = GetParam();
  const int64_t rows = 77, m = 70;
  const std::vector<uint8_t> wbytes = encoded(codec, rows, cols, 7);
  const ops::Matrix w(codec, wbytes.data(), rows, cols);
  const std::vector<float> x = random_floats(size_t(m * cols), 11);
  std::vector<float> want(size_t(m * rows));
  ops::ref::matmul(x.data(), m, w, want.data());

  DeviceVec<uint8_t> dw = test::device_weights(codec, wbytes, rows, cols);
  DeviceVec<float> dx(x), dy(test::poisoned(size_t(m * rows))), dy1(test::poisoned(size_t(rows))),
      dy3(test::poisoned(size_t(3 * rows)));
  const cuda::DeviceMatrix dm{codec, dw.get(), rows, cols};
  cuda::matmul(dx.get(), m, dm, dy.get(), false, nullptr);
  cuda::matmul(dx.get() + 4 * cols, 1, dm, dy1.get(), false, nullptr);  // row 4 alone
  cuda::matmul(dx.get() + cols, 3, dm, dy3.get(), false, nullptr);      // rows 1..3
  const std::vector<float> got = dy.download(), alone = dy1.download(), three = dy3.download();
  std::vector<double> terms(size_t(rows * cols));  // abs_term of every weight, once for the 70 rows
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) terms[size_t(n * cols + k)] = abs_term(w, n, k);
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < rows; ++n) {
      double abs = 0;
      for (int64_t k = 0; k < cols; ++k)
        abs += std::fabs(double(x[size_t(i * cols + k)])) * terms[size_t(n * cols + k)];
      const double bound = double(cols + 8) * kU * abs + 1e-30;
      ASSERT_LE(std::fabs(double(got[size_t(i * rows + n)]) - double(want[size_t(i * rows + n)])), bound)
          << codec_name(codec) << " row " << i << " out " << n;
    }
  }
  for (int64_t n = 0; n < rows; ++n) ASSERT_EQ(alone[size_t(n)], got[size_t(4 * rows + n)]) << "out " << n;
  for (int64_t n = 0; n < 3 * rows; ++n) ASSERT_EQ(three[size_t(n)], got[size_t(rows + n)]) << "rows 1..3, " << n;

  // accumulate: y += x W^T, the sum added once to what was there.
  std::vector<float> base = random_floats(size_t(m * rows), 5);
  dy.upload(base);
  cuda::matmul(dx.get(), m, dm, dy.get(), true, nullptr);
  const std::vector<float> acc = dy.download();
  for (size_t j = 0; j < acc.size(); ++j) ASSERT_EQ(acc[j], base[j] + got[j]) << j;
}

std::string matmul_case_name(const ::testing::TestParamInfo<std::tuple<Codec, int64_t>>& info) {
  return std::string(codec_name(std::get<0>(info.param))) + "_cols" + std::to_string(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(Codecs, CudaMatmulTest,
                         ::testing::Combine(::testing::ValuesIn(test::kCudaCoreCodecs),
                                            ::testing::Values(64, 100, 1900, 2048, 2880)),
                         matmul_case_name);
// GGUF's types at whole blocks: one 256-element block, 3, 8 and 11 of them (2,816); the 32-element types also at 3
// blocks (groups of lanes left idle) and at gpt-oss's 2,880 (90 blocks: the groups take uneven counts).
INSTANTIATE_TEST_SUITE_P(Ggml, CudaMatmulTest,
                         ::testing::Combine(::testing::ValuesIn(test::kGgmlCoreCodecs),
                                            ::testing::Values(256, 768, 2048, 2816)),
                         matmul_case_name);
constexpr Codec kGgml32Codecs[] = {Codec::Q8_0, Codec::Q4_0,   Codec::Q5_0,
                                   Codec::Q5_1, Codec::IQ4_NL, Codec::MXFP4_GGML};
INSTANTIATE_TEST_SUITE_P(Ggml32, CudaMatmulTest,
                         ::testing::Combine(::testing::ValuesIn(kGgml32Codecs), ::testing::Values(96, 2880)),
                         matmul_case_name);

// A ggml matrix that does not start as aligned as its blocks' loads need (ggml_pieces.h's kAlign: 16 bytes for q4_k,
// 8 for q5_1, 4 for q2_k, 2 for q8_0) is one clear error, raised before any launch (so this runs without a GPU too).
TEST(CudaKernels, MisalignedGgmlMatricesAreClearErrors) {
  for (const auto& [c, at] : {std::pair{Codec::Q4_K, 4104}, std::pair{Codec::Q5_1, 4100}, std::pair{Codec::Q2_K, 4098},
                              std::pair{Codec::Q8_0, 4097}}) {
    const cuda::DeviceMatrix w{c, reinterpret_cast<const void*>(uintptr_t(at)), 4, 256};
    for (const int64_t m : {int64_t(1), int64_t(70)}) {
      const std::string e = test::error_of([&] { cuda::matmul(nullptr, m, w, nullptr, false, nullptr); });
      EXPECT_NE(e.find("a ggml matrix (it must start aligned"), std::string::npos) << codec_name(c) << ": " << e;
    }
  }
}

TEST(CudaKernels, RmsNormMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 9, n = 640;
  const std::vector<float> x = random_floats(size_t(rows * n), 1, 3.0f), w = random_floats(size_t(n), 2);
  std::vector<float> want(x.size());
  ops::rms_norm_to(x.data(), want.data(), rows, n, w.data(), 1e-6f);
  DeviceVec<float> dx(x), dw(w), dout(test::poisoned(x.size()));
  cuda::rms_norm(dx.get(), dout.get(), rows, n, dw.get(), 1e-6f, nullptr);
  const std::vector<float> got = dout.download();
  // The sum of squares in float over n terms (relative n * u), its inverse square root and two products.
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], (double(n) + 8) * kU * std::fabs(want[i])) << i;
}

// Decode products: one launch for q, k and v with the RMS norm inside gives rms_norm then matmul_kernel bit for bit
// (and writes the normed row); a row wider than shared memory takes the unfused path with the same bits. Every codec of
// the CUDA-core products, GGUF's at whole blocks (256 for 100, 12,544 past the shared row); and the codec mixes of
// a llama-quantize file's q/k/v (one change of codec: the mixed launch; two: separate products), the same bits.
TEST(CudaKernels, MatvecWithFusedNormEqualsNormThenMatmulBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<std::array<Codec, 3>> mixes;
  for (const Codec c : test::kCudaCoreCodecs) mixes.push_back({c, c, c});
  for (const Codec c : test::kGgmlCoreCodecs) mixes.push_back({c, c, c});
  for (const std::array<Codec, 3> m :
       {std::array{Codec::Q4_K, Codec::Q8_0, Codec::Q8_0}, std::array{Codec::Q4_K, Codec::Q4_K, Codec::Q6_K},
        std::array{Codec::Q6_K, Codec::Q5_K, Codec::Q5_K}, std::array{Codec::Q8_0, Codec::Q4_K, Codec::Q4_K},
        std::array{Codec::Q4_K, Codec::Q5_K, Codec::Q8_0}}) {
    mixes.push_back(m);
  }
  for (const auto& [c, ck, cv] : mixes) {
    for (const int64_t asked : {int64_t(100), int64_t(2048), cuda::kMatvecSharedCols + 64}) {
      const int64_t cols = test::whole_blocks(c, test::whole_blocks(cv, asked)), rq = 37, rk = 9;
      const std::vector<uint8_t> wq = encoded(c, rq, cols, 1), wk = encoded(ck, rk, cols, 2),
                                 wv = encoded(cv, rk, cols, 3);
      const std::vector<float> x = random_floats(size_t(cols), 4, 2.0f), nw = random_floats(size_t(cols), 5);
      DeviceVec<uint8_t> dq = test::device_weights(c, wq, rq, cols), dk = test::device_weights(ck, wk, rk, cols),
                         dv = test::device_weights(cv, wv, rk, cols);
      DeviceVec<float> dx(x), dn(nw), xn_ref(static_cast<size_t>(cols)), xn(test::poisoned(size_t(cols)));
      const cuda::DeviceMatrix ws[3] = {{c, dq.get(), rq, cols}, {ck, dk.get(), rk, cols}, {cv, dv.get(), rk, cols}};
      DeviceVec<float> yq(test::poisoned(size_t(rq))), yk(test::poisoned(size_t(rk))), yv(test::poisoned(size_t(rk)));
      DeviceVec<float> rq_(static_cast<size_t>(rq)), rk_(static_cast<size_t>(rk)), rv_(static_cast<size_t>(rk));
      cuda::rms_norm(dx.get(), xn_ref.get(), 1, cols, dn.get(), 1e-6f, nullptr);
      batch_kernel_row(xn_ref.get(), cols, ws[0], rq_.get());
      batch_kernel_row(xn_ref.get(), cols, ws[1], rk_.get());
      batch_kernel_row(xn_ref.get(), cols, ws[2], rv_.get());
      float* const ys[3] = {yq.get(), yk.get(), yv.get()};
      cuda::matvec(dx.get(), ws, ys, dn.get(), 1e-6f, xn.get(), false, nullptr);
      ASSERT_EQ(xn.download(), xn_ref.download()) << codec_name(c) << " cols " << cols;
      ASSERT_EQ(yq.download(), rq_.download()) << codec_name(c) << " cols " << cols;
      ASSERT_EQ(yk.download(), rk_.download()) << codec_name(c) << " cols " << cols;
      ASSERT_EQ(yv.download(), rv_.download()) << codec_name(c) << " cols " << cols;
      // accumulate, no norm: y += W x, as matmul's accumulate.
      float* const y1[1] = {yq.get()};
      cuda::matvec(dx.get(), {ws, 1}, y1, nullptr, 0.0f, nullptr, true, nullptr);
      batch_kernel_row(dx.get(), cols, ws[0], rq_.get(), true);
      ASSERT_EQ(yq.download(), rq_.download()) << codec_name(c) << " accumulate, cols " << cols;
    }
    if (ck != c || cv != c) continue;  // the head's case below: one matrix
    // A matrix with more rows than one wave holds at two rows a warp (the head's case: the launch loops, staging
    // each warp's next rows while it multiplies these), and an odd row count (a row a warp): still matmul's bits.
    // At 2,048 columns a q4_g32 head stages exactly the 48 KB a launch gets without raising its limit, and the
    // kernel's own shared memory takes it past that: the launch was refused (invalid argument) until launch_pdl
    // raised the limit.
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{12290, 256}, {12289, 256}, {12290, 2048}}) {
      const std::vector<uint8_t> wh = encoded(c, rows, cols, 6);
      const std::vector<float> x = random_floats(size_t(cols), 7, 2.0f), nw = random_floats(size_t(cols), 8);
      DeviceVec<uint8_t> dh = test::device_weights(c, wh, rows, cols);
      DeviceVec<float> dx(x), dn(nw), xn_ref(static_cast<size_t>(cols)), xn(static_cast<size_t>(cols));
      DeviceVec<float> y(test::poisoned(size_t(rows))), ref(static_cast<size_t>(rows));
      const cuda::DeviceMatrix head{c, dh.get(), rows, cols};
      cuda::rms_norm(dx.get(), xn_ref.get(), 1, cols, dn.get(), 1e-6f, nullptr);
      batch_kernel_row(xn_ref.get(), cols, head, ref.get());
      float* const ys[1] = {y.get()};
      cuda::matvec(dx.get(), {&head, 1}, ys, dn.get(), 1e-6f, xn.get(), false, nullptr);
      ASSERT_EQ(y.download(), ref.download()) << codec_name(c) << " rows " << rows;
    }
  }
}

// q/k/v of a decode row with qk-norm, RoPE and the cache write in one launch (the last block of each head finishes
// it) gives the two launches' q, k, cache and normed row bit for bit, with or without qk-norm, at head sizes that
// take the fused path (whole blocks of 8 outputs, or of 16 at two a warp) and one that falls back (head_dim 12);
// called three times at three positions, so its head counters are back at zero after every call.
TEST(CudaKernels, MatvecQkvRopeEqualsMatvecThenQkRopeKvBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  // One codec, or a Q4_K_M file's mixes: one change of codec is fused, two are not.
  for (const auto& [c, ck, cv] :
       {std::array{Codec::BF16, Codec::BF16, Codec::BF16}, std::array{Codec::Q4_G64, Codec::Q4_G64, Codec::Q4_G64},
        std::array{Codec::Q4_K, Codec::Q4_K, Codec::Q4_K}, std::array{Codec::Q4_K, Codec::Q8_0, Codec::Q8_0},
        std::array{Codec::Q4_K, Codec::Q4_K, Codec::Q6_K}, std::array{Codec::Q4_K, Codec::Q5_K, Codec::Q8_0}}) {
    const bool one_change = (ck == c) != (cv == ck);
    struct Heads {
      int heads, kv_heads, hd;
    };
    // The last: Qwen3-30B-A3B's heads, enough rows for two a warp (blocks of 16 outputs).
    for (const Heads sh : {Heads{8, 2, 8}, Heads{8, 2, 64}, Heads{8, 2, 128}, Heads{8, 2, 12}, Heads{32, 4, 128}}) {
      for (const auto& [qk_norm, with_bias] :
           {std::pair{true, false}, std::pair{false, false}, std::pair{false, true}}) {
        const int hd = sh.hd, heads = sh.heads, kv_heads = sh.kv_heads, cap = 300;
        const int64_t cols = 256, rq = heads * hd, rk = kv_heads * hd, kv_dim = rk;
        const KvRowLayout layout = hybrid_layout(int(kv_dim));
        const int64_t base = layout.base(kHybridLayer);
        const std::vector<uint8_t> wq = encoded(c, rq, cols, 21), wk = encoded(ck, rk, cols, 22),
                                   wv = encoded(cv, rk, cols, 23);
        const std::vector<float> nw = random_floats(size_t(cols), 25), qn = random_floats(size_t(hd), 26),
                                 kn = random_floats(size_t(hd), 27);
        std::vector<float> inv_freq;
        for (int i = 0; i < hd / 2; ++i) inv_freq.push_back(1.0f / std::pow(10000.0f, float(2 * i) / float(hd)));
        DeviceVec<uint8_t> dq(wq), dk(wk), dv(wv);
        const cuda::DeviceMatrix ws[3] = {{c, dq.get(), rq, cols}, {ck, dk.get(), rk, cols}, {cv, dv.get(), rk, cols}};
        DeviceVec<float> dn(nw), dqn(qn), dkn(kn), df(inv_freq);
        // gpt_oss's and qwen2_moe's q/k/v biases: add_bias after the product, or added by the fused launch.
        DeviceVec<float> bq(random_floats(size_t(rq), 28)), bk(random_floats(size_t(rk), 29)),
            bv(random_floats(size_t(rk), 30));
        const float* const biases[3] = {bq.get(), bk.get(), bv.get()};
        const std::span<const float* const> bias_span =
            with_bias ? std::span<const float* const>(biases) : std::span<const float* const>();
        DeviceVec<int> counters(std::vector<int>(size_t(heads + 2 * kv_heads), 0));
        const std::vector<float> zeros(size_t(layout.per_position() * cap), 0.0f);
        DeviceVec<float> cache_a(zeros), cache_b(zeros);
        for (const int pos : {0, 5, 299}) {
          const std::vector<float> x = random_floats(size_t(cols), uint32_t(24 + pos), 2.0f);
          DeviceVec<float> dx(x), xn_a(static_cast<size_t>(cols)), xn_b(test::poisoned(size_t(cols)));
          DeviceVec<float> qa(static_cast<size_t>(rq)), ka(static_cast<size_t>(rk)), va(static_cast<size_t>(rk));
          DeviceVec<float> qb(test::poisoned(size_t(rq))), kb(test::poisoned(size_t(rk))),
              vb(test::poisoned(size_t(rk)));
          DeviceVec<int> dp(std::vector<int>{pos});
          DeviceVec<cuda::KvRow> rows_a(std::vector<cuda::KvRow>{{cache_a.get(), cap, pos}}),
              rows_b(std::vector<cuda::KvRow>{{cache_b.get(), cap, pos}});
          float* const ys[3] = {qa.get(), ka.get(), va.get()};
          cuda::matvec(dx.get(), ws, ys, dn.get(), 1e-6f, xn_a.get(), false, nullptr);
          if (with_bias) {
            cuda::add_bias(qa.get(), bq.get(), 1, rq, nullptr);
            cuda::add_bias(ka.get(), bk.get(), 1, rk, nullptr);
            cuda::add_bias(va.get(), bv.get(), 1, rk, nullptr);
          }
          cuda::qk_rope_kv(qa.get(), ka.get(), va.get(), 1, heads, kv_heads, hd, qk_norm ? dqn.get() : nullptr,
                           qk_norm ? dkn.get() : nullptr, 1e-6f, dp.get(), df.get(), hd, 1.0f, rows_a.get(), base,
                           nullptr);
          const cuda::QkRope r{.n_heads = heads,
                               .n_kv_heads = kv_heads,
                               .head_dim = hd,
                               .q_norm = qk_norm ? dqn.get() : nullptr,
                               .k_norm = qk_norm ? dkn.get() : nullptr,
                               .eps = 1e-6f,
                               .pos = dp.get(),
                               .inv_freq = df.get(),
                               .rotary_dim = hd,
                               .scaling = 1.0f,
                               .rows = rows_b.get(),
                               .base = base};
          const bool fused = cuda::matvec_qkv_rope(dx.get(), ws, qb.get(), kb.get(), vb.get(), dn.get(), 1e-6f,
                                                   xn_b.get(), r, counters.get(), nullptr, bias_span);
          const std::string at = std::string(codec_name(c)) + "/" + std::string(codec_name(ck)) + "/" +
                                 std::string(codec_name(cv)) + " head_dim " + std::to_string(hd) +
                                 (qk_norm ? " qk-norm" : "") + (with_bias ? " biases" : "") + " pos " +
                                 std::to_string(pos);
          // Heads of whole 8-row blocks take the one launch (unless SEEDLING_NO_FUSED_ROPE turns it off).
          const char* off = std::getenv("SEEDLING_NO_FUSED_ROPE");
          ASSERT_EQ(fused, hd % 8 == 0 && ((c == ck && ck == cv) || one_change) &&
                               (off == nullptr || off[0] == '\0' || off[0] == '0'))
              << at;
          ASSERT_EQ(xn_b.download(), xn_a.download()) << at;
          ASSERT_EQ(qb.download(), qa.download()) << at;
          ASSERT_EQ(kb.download(), ka.download()) << at;
          ASSERT_EQ(cache_b.download(), cache_a.download()) << at;
          ASSERT_EQ(counters.download(), std::vector<int>(size_t(heads + 2 * kv_heads), 0)) << at;
        }
      }
    }
  }
}

namespace {

// A decode row's router in one launch against the separate launches (rms_norm, matmul, then `separate`'s top-k or
// policy): the normed row, logits, ids and weights bit for bit, twice, the counter back at zero after each launch.
// separate(logits, ids, weights) and fused(x, router, norm, xn, logits, ids, weights, counter) run the launches.
template <typename Separate, typename Fused>
void expect_router_launch_equals_separate(Codec c, int e, int k, int64_t cols, const std::string& at, Separate separate,
                                          Fused fused) {
  const std::vector<uint8_t> wr = encoded(c, e, cols, 11);
  const std::vector<float> x = random_floats(size_t(cols), 12, 2.0f), nw = random_floats(size_t(cols), 13);
  DeviceVec<uint8_t> dr(wr);
  const cuda::DeviceMatrix router{c, dr.get(), e, cols};
  DeviceVec<float> dx(x), dn(nw), xn_ref(static_cast<size_t>(cols)), lg_ref(static_cast<size_t>(e)),
      w_ref(static_cast<size_t>(k));
  DeviceVec<int> ids_ref(static_cast<size_t>(k)), counter(std::vector<int>(1, 0));
  cuda::rms_norm(dx.get(), xn_ref.get(), 1, cols, dn.get(), 1e-6f, nullptr);
  batch_kernel_row(xn_ref.get(), cols, router, lg_ref.get());
  separate(lg_ref.get(), ids_ref.get(), w_ref.get());
  for (int round = 0; round < 2; ++round) {
    DeviceVec<float> xn(test::poisoned(size_t(cols))), lg(test::poisoned(size_t(e))), w(test::poisoned(size_t(k)));
    DeviceVec<int> ids(std::vector<int>(size_t(k), -1));
    fused(dx.get(), router, dn.get(), xn.get(), lg.get(), ids.get(), w.get(), counter.get());
    ASSERT_EQ(xn.download(), xn_ref.download()) << at;
    ASSERT_EQ(lg.download(), lg_ref.download()) << at;
    ASSERT_EQ(ids.download(), ids_ref.download()) << at << " round " << round;
    ASSERT_EQ(w.download(), w_ref.download()) << at << " round " << round;
    ASSERT_EQ(counter.download(), std::vector<int>{0}) << at;
  }
}

}  // namespace

// The router of a decode row in one launch (norm, product, softmax and top-k by the last block) gives the separate
// launches' logits, normed row, ids and weights bit for bit, and leaves its counter at zero for the next launch.
TEST(CudaKernels, RouterMatvecTopKEqualsSeparateLaunchesBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::BF16, Codec::Q4_G64, Codec::Q8_0}) {
    for (const int e : {8, 128, 300}) {
      const int k = e == 8 ? 2 : 8;
      expect_router_launch_equals_separate(
          c, e, k, 2048, std::string(codec_name(c)) + " e " + std::to_string(e),
          [&](float* lg, int* ids, float* w) { cuda::router_topk(lg, 1, e, k, true, ids, w, nullptr); },
          [&](const float* x, const cuda::DeviceMatrix& r, const float* n, float* xn, float* lg, int* ids, float* w,
              int* counter) { cuda::router_matvec_topk(x, r, n, 1e-6f, xn, lg, k, true, ids, w, counter, nullptr); });
    }
  }
}

// With a shared expert's gate beside the router (of its codec: one launch; of another: separate launches), the gate's
// logit is matmul's of the normed row and the router's outputs are those of the separate launches, bit for bit.
TEST(CudaKernels, RouterMatvecTopKWithTheSharedGateGivesItsLogitBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t cols = 2048;
  const int e = 256, k = 8;
  DeviceVec<uint8_t> dg(encoded(Codec::BF16, 1, cols, 21));
  const cuda::DeviceMatrix gate{Codec::BF16, dg.get(), 1, cols};
  for (const Codec c : {Codec::BF16, Codec::Q4_G64}) {
    const std::string at = std::string(codec_name(c)) + " router, bf16 gate";
    expect_router_launch_equals_separate(
        c, e, k, cols, at,
        [&](float* lg, int* ids, float* w) { cuda::router_topk(lg, 1, e, k, true, ids, w, nullptr); },
        [&](const float* x, const cuda::DeviceMatrix& r, const float* n, float* xn, float* lg, int* ids, float* w,
            int* counter) {
          DeviceVec<float> gl(test::poisoned(1)), gl_ref(test::poisoned(1));
          cuda::router_matvec_topk(x, r, n, 1e-6f, xn, lg, k, true, ids, w, counter, nullptr, &gate, gl.get());
          batch_kernel_row(xn, cols, gate, gl_ref.get());
          ASSERT_EQ(gl.download(), gl_ref.download()) << at;
        });
  }
}

// The router of a decode row under each policy in one launch (norm, product, then router_route's policy by the last
// block) gives the separate launches' logits, normed row, ids and weights bit for bit, its counter back at zero.
TEST(CudaKernels, RouterMatvecRouteEqualsSeparateLaunchesBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  struct Case {
    cuda::RouteGating gating;
    int e, k, n_group, topk_group;
    bool bias, correction;
    float scale;
  };
  // gpt_oss's (top-k of biased logits, softmax over them), glm4_moe's and deepseek_v3's shapes, a plain softmax.
  for (const Case& cs : {Case{cuda::RouteGating::TopKSoftmax, 32, 4, 1, 1, true, false, 1.0f},
                         Case{cuda::RouteGating::SigmoidGroupTopK, 256, 8, 8, 4, false, true, 2.5f},
                         Case{cuda::RouteGating::SigmoidGroupTopK, 160, 8, 1, 1, false, true, 1.0f},
                         Case{cuda::RouteGating::SoftmaxTopK, 128, 8, 1, 1, true, false, 1.0f}}) {
    for (const Codec c : {Codec::BF16, Codec::Q8_0}) {
      DeviceVec<float> db(random_floats(size_t(cs.e), 34, 0.5f)), dc(random_floats(size_t(cs.e), 35, 0.1f));
      cuda::RouterPolicy p;
      p.gating = cs.gating;
      p.renormalize = cs.gating != cuda::RouteGating::TopKSoftmax;
      p.bias = cs.bias ? db.get() : nullptr;
      p.correction = cs.correction ? dc.get() : nullptr;
      p.n_group = cs.n_group;
      p.topk_group = cs.topk_group;
      p.scale = cs.scale;
      const int k = cs.k;
      expect_router_launch_equals_separate(
          c, cs.e, k, 2880,  // gpt-oss's width: the norm in two passes (wider than one batch of the block)
          std::string(codec_name(c)) + " e " + std::to_string(cs.e) + " gating " + std::to_string(int(cs.gating)),
          [&](float* lg, int* ids, float* w) { cuda::router_route(lg, 1, cs.e, k, p, ids, w, nullptr); },
          [&](const float* x, const cuda::DeviceMatrix& r, const float* n, float* xn, float* lg, int* ids, float* w,
              int* counter) { cuda::router_matvec_route(x, r, n, 1e-6f, xn, lg, k, p, ids, w, counter, nullptr); });
    }
  }
}

// A decode product's biases added in its launch (one matrix accumulating, as the o product into the residual; three
// at once, as q/k/v; the head's row count, which loops) give matvec then add_bias bit for bit.
TEST(CudaKernels, MatvecBiasesEqualAddBiasBitForBit) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::BF16, Codec::Q4_G64, Codec::Q4_K}) {
    for (const bool accumulate : {false, true}) {
      for (const int64_t rows : {int64_t(64), int64_t(2880), int64_t(12000)}) {
        const int64_t cols = 4096;
        const std::vector<uint8_t> w0 = encoded(c, rows, cols, 41), w1 = encoded(c, rows / 8, cols, 42);
        DeviceVec<uint8_t> d0(w0), d1(w1);
        const cuda::DeviceMatrix ws[2] = {{c, d0.get(), rows, cols}, {c, d1.get(), rows / 8, cols}};
        const std::vector<float> y0 = random_floats(size_t(rows), 43), y1 = random_floats(size_t(rows / 8), 44);
        DeviceVec<float> dx(random_floats(size_t(cols), 45, 2.0f)), b0(random_floats(size_t(rows), 46)),
            b1(random_floats(size_t(rows / 8), 47));
        DeviceVec<float> ya0(y0), ya1(y1), yb0(y0), yb1(y1);
        float* const ya[2] = {ya0.get(), ya1.get()};
        float* const yb[2] = {yb0.get(), yb1.get()};
        cuda::matvec(dx.get(), ws, ya, nullptr, 0.0f, nullptr, accumulate, nullptr);
        cuda::add_bias(ya0.get(), b0.get(), 1, rows, nullptr);
        cuda::add_bias(ya1.get(), b1.get(), 1, rows / 8, nullptr);
        const float* const biases[2] = {b0.get(), b1.get()};
        cuda::matvec(dx.get(), ws, yb, nullptr, 0.0f, nullptr, accumulate, nullptr, biases);
        const std::string at =
            std::string(codec_name(c)) + " rows " + std::to_string(rows) + (accumulate ? " accumulating" : "");
        ASSERT_EQ(yb0.download(), ya0.download()) << at;
        ASSERT_EQ(yb1.download(), ya1.download()) << at;
      }
    }
  }
}

class CudaQkRopeKvTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

// Per-head RMS norm (Qwen3's qk-norm), RoPE and the cache write against the CPU's ops.
TEST_P(CudaQkRopeKvTest, MatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [scaling, qk_norm] = GetParam();
  // As model.cpp builds the table: inv_freq[i] = 1 / theta^(2i / d), divided by the factor for linear scaling.
  const int heads = 4, kv_heads = 2, hd = 64, rows = 5, layer = kHybridLayer, cap = 4100;
  const int kv_dim = kv_heads * hd;
  const KvRowLayout layout = hybrid_layout(kv_dim);
  ops::Rope rope;
  rope.rotary_dim = hd;
  for (int i = 0; i < hd / 2; ++i) {
    float f = 1.0f / std::pow(10000.0f, float(2 * i) / float(hd));
    if (scaling == "linear") f = f / 4.0f;
    rope.inv_freq.push_back(f);
  }
  const std::vector<int> pos = {0, 1, 17, 511, 4093};
  const std::vector<float> q = random_floats(size_t(rows * heads * hd), 3, 2.0f);
  const std::vector<float> k = random_floats(size_t(rows * kv_dim), 4, 2.0f),
                           v = random_floats(size_t(rows * kv_dim), 6);
  const std::vector<float> qn = random_floats(size_t(hd), 7), kn = random_floats(size_t(hd), 8);
  std::vector<float> want_q = q, want_k = k;
  if (qk_norm) {
    ops::rms_norm_to(q.data(), want_q.data(), rows * heads, hd, qn.data(), 1e-6f);
    ops::rms_norm_to(k.data(), want_k.data(), rows * kv_heads, hd, kn.data(), 1e-6f);
  }
  const std::vector<float> normed_q = want_q, normed_k = want_k;
  for (int r = 0; r < rows; ++r) {
    ops::apply_rope(want_q.data() + r * heads * hd, heads, hd, pos[size_t(r)], rope);
    ops::apply_rope(want_k.data() + r * kv_dim, kv_heads, hd, pos[size_t(r)], rope);
  }
  DeviceVec<float> dq(q), dk(k), dv(v), dqn(qn), dkn(kn), df(rope.inv_freq);
  DeviceVec<float> cache(std::vector<float>(size_t(layout.per_position() * cap), 0.0f));
  std::vector<cuda::KvRow> kvrows;
  for (int r = 0; r < rows; ++r) kvrows.push_back({cache.get(), cap, pos[size_t(r)]});
  DeviceVec<cuda::KvRow> drows(kvrows);
  DeviceVec<int> dp(pos);
  cuda::qk_rope_kv(dq.get(), dk.get(), dv.get(), rows, heads, kv_heads, hd, qk_norm ? dqn.get() : nullptr,
                   qk_norm ? dkn.get() : nullptr, 1e-6f, dp.get(), df.get(), hd, 1.0f, drows.get(), layout.base(layer),
                   nullptr);
  const std::vector<float> got_q = dq.download(), got_k = dk.download(), c = cache.download();
  // The norm: a sum of hd squares in float (relative (hd + 8) u). RoPE: the angle is the same float product on
  // both sides; cosf/sinf within 2 ulps of the C library's; two products and a sum of the normed pair.
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& normed,
                   const char* what) {
    for (size_t i = 0; i < got.size(); ++i) {
      const size_t head0 = i / size_t(hd) * size_t(hd), j = i % size_t(hd) % size_t(hd / 2);
      const double scale = std::fabs(normed[head0 + j]) + std::fabs(normed[head0 + j + size_t(hd / 2)]);
      ASSERT_NEAR(got[i], want[i], (double(hd) + 16) * kU * scale + 1e-30) << what << " " << scaling << " " << i;
    }
  };
  check(got_q, want_q, normed_q, "q");
  check(got_k, want_k, normed_k, "k");
  for (int r = 0; r < rows; ++r) {
    const size_t at = size_t(layout.row(layer, false, cap, pos[size_t(r)]));
    const size_t value_at = size_t(layout.row(layer, true, cap, pos[size_t(r)]));
    for (int i = 0; i < kv_dim; ++i) {
      ASSERT_EQ(c[at + size_t(i)], got_k[size_t(r * kv_dim + i)]) << "cached key, row " << r;
      ASSERT_EQ(c[value_at + size_t(i)], v[size_t(r * kv_dim + i)]) << "cached value";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Scalings, CudaQkRopeKvTest,
                         ::testing::Combine(::testing::Values("default", "linear"), ::testing::Bool()));

TEST(CudaKernels, RouterSoftmaxTopKMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const bool norm : {true, false}) {
    const int m = 7, e = 128, k = 8;
    const std::vector<float> logits = random_floats(size_t(m * e), 4, 2.0f);
    DeviceVec<float> dl(logits), dw(test::poisoned(size_t(m * k)));
    DeviceVec<int> di(size_t(m * k));
    cuda::router_topk(dl.get(), m, e, k, norm, di.get(), dw.get(), nullptr);
    const std::vector<int> ids = di.download();
    const std::vector<float> w = dw.download();
    for (int i = 0; i < m; ++i) {
      std::vector<float> p(logits.begin() + i * e, logits.begin() + (i + 1) * e);
      ops::softmax(p.data(), e);
      std::vector<int> want(static_cast<size_t>(k));
      ops::top_k(p.data(), e, k, want.data());
      float sum = 0;
      for (int s = 0; s < k; ++s) sum += p[size_t(want[size_t(s)])];
      for (int s = 0; s < k; ++s) {
        ASSERT_EQ(ids[size_t(i * k + s)], want[size_t(s)]) << "row " << i << " slot " << s;
        const float wv = norm ? p[size_t(want[size_t(s)])] / sum : p[size_t(want[size_t(s)])];
        // exp of e terms and their sum in float: relative (e + 8) u.
        ASSERT_NEAR(w[size_t(i * k + s)], wv, (e + 8) * kU * wv) << "row " << i << " slot " << s;
      }
    }
  }
}

namespace {

// E expert blobs of random gate (I x H), up and down (H x I) in codec c, each part 256-aligned as pack_expert_blob
// packs them; expert e's matrices from seeds seed + e, seed + 100 + e, seed + 200 + e. l gets their (packed) layout;
// test::device_blobs puts them in VRAM as the kernels read them.
std::vector<uint8_t> expert_blobs(Codec c, int64_t H, int64_t I, int E, uint32_t seed, cuda::ExpertLayout& l) {
  l.gate_up = l.down = c;
  l.hidden = H;
  l.intermediate = I;
  l.up_offset = (codec_matrix_bytes(c, I, H) + 255) / 256 * 256;
  l.down_offset = 2 * l.up_offset;
  l.bytes = l.down_offset + (codec_matrix_bytes(c, H, I) + 255) / 256 * 256;
  std::vector<uint8_t> blobs(size_t(E) * l.bytes);
  for (int e = 0; e < E; ++e) {
    uint8_t* b = blobs.data() + size_t(e) * l.bytes;
    const uint32_t s = seed + uint32_t(e);
    const auto g = encoded(c, I, H, s), u = encoded(c, I, H, s + 100), d = encoded(c, H, I, s + 200);
    std::copy(g.begin(), g.end(), b);
    std::copy(u.begin(), u.end(), b + l.up_offset);
    std::copy(d.begin(), d.end(), b + l.down_offset);
  }
  return blobs;
}

// Expert e's gate and up sums for one row x on the CPU (ops::ref::matmul) into gv and uv (I each), from blobs packed
// as l (expert_blobs'); returns its down matrix.
ops::Matrix cpu_gate_up(const std::vector<uint8_t>& blobs, const cuda::ExpertLayout& l, int e, const float* x,
                        std::vector<float>& gv, std::vector<float>& uv) {
  const uint8_t* b = blobs.data() + size_t(e) * l.bytes;
  const ops::Matrix g(l.gate_up, b, l.intermediate, l.hidden), u(l.gate_up, b + l.up_offset, l.intermediate, l.hidden);
  gv.resize(size_t(l.intermediate));
  uv.resize(size_t(l.intermediate));
  ops::ref::matmul(x, 1, g, gv.data());
  ops::ref::matmul(x, 1, u, uv.data());
  return ops::Matrix(l.down, b + l.down_offset, l.hidden, l.intermediate);
}

// decoder.cpp's route for one row of logits under `plan` (bias and correction host vectors or empty): the oracle of
// router_route.
void cpu_route(std::vector<float> p, const RouterPlan& plan, const std::vector<float>& bias,
               const std::vector<float>& correction, int k, int* ids, float* w) {
  const int e = int(p.size());
  std::vector<float> scratch;
  if (plan.bias) ops::add_to(p.data(), bias.data(), e);
  if (plan.gating == Gating::SoftmaxTopK) {
    ops::softmax(p.data(), e);
    ops::top_k(p.data(), e, k, ids);
    for (int s = 0; s < k; ++s) w[s] = p[size_t(ids[s])];
  } else if (plan.gating == Gating::TopKSoftmax) {
    ops::top_k(p.data(), e, k, ids);
    for (int s = 0; s < k; ++s) w[s] = p[size_t(ids[s])];
    ops::softmax(w, k);
  } else {
    for (float& v : p) v = ops::sigmoid(v);
    ops::group_top_k(p.data(), plan.correction_bias ? correction.data() : nullptr, e, plan.n_group, plan.topk_group, k,
                     ids, &scratch, plan.masked_neg_inf ? -INFINITY : 0.0f);
    for (int s = 0; s < k; ++s) w[s] = p[size_t(ids[s])];
  }
  if (plan.renormalize && plan.gating != Gating::TopKSoftmax) {
    float sum = 0.0f;
    for (int s = 0; s < k; ++s) sum = sum + w[s];
    if (plan.gating == Gating::SigmoidGroupTopK) sum = sum + 1e-20f;
    for (int s = 0; s < k; ++s) w[s] = w[s] / sum;
  }
  for (int s = 0; s < k; ++s) w[s] = w[s] * plan.scale;
}

}  // namespace

// Every router policy (gpt_oss's top-k then softmax with a logit bias, glm4_moe's and deepseek_v3's sigmoid scores
// with a correction bias over groups, the dropped groups' choices 0 (glm4_moe) or -inf (deepseek_v3), the softmax
// router with a bias and a scale) against decoder.cpp's route: the same experts in the same order, weights within
// float rounding. Ties: logits rounded to a coarse grid make equal values common, so the lower-index-first rule is
// exercised, not only random order. The -inf cases have correction biases larger than the scores, so kept experts'
// choices go negative and the two masks choose differently on some rows (counted, so a kernel that ignored the mask
// would fail there).
TEST(CudaKernels, RouterPoliciesMatchTheCpuRouteIdsExactly) {
  SKIP_WITHOUT_CUDA_DEVICE();
  struct Case {
    const char* what;
    RouterPlan plan;
    int e, k;
    float correction_sd = 0.1f;
  };
  const Case cases[] = {
      {"top-k softmax with bias (gpt_oss)", {.gating = Gating::TopKSoftmax, .renormalize = false, .bias = true}, 32, 4},
      {"sigmoid groups (glm4_moe)",
       {.gating = Gating::SigmoidGroupTopK, .correction_bias = true, .n_group = 2, .topk_group = 1, .scale = 2.5f},
       8,
       3},
      {"sigmoid groups (deepseek_v3)",
       {.gating = Gating::SigmoidGroupTopK, .correction_bias = true, .n_group = 8, .topk_group = 4, .scale = 2.5f},
       256,
       8},
      {"sigmoid, no renorm",
       {.gating = Gating::SigmoidGroupTopK, .renormalize = false, .n_group = 4, .topk_group = 2},
       64,
       6},
      {"softmax with bias and scale", {.gating = Gating::SoftmaxTopK, .bias = true, .scale = 1.5f}, 128, 8},
      {"sigmoid groups, dropped at -inf (deepseek_v3)",
       {.gating = Gating::SigmoidGroupTopK,
        .correction_bias = true,
        .n_group = 8,
        .topk_group = 4,
        .scale = 2.5f,
        .masked_neg_inf = true},
       256,
       8,
       1.5f},
      {"sigmoid groups, dropped at -inf, every kept expert chosen",
       {.gating = Gating::SigmoidGroupTopK,
        .correction_bias = true,
        .n_group = 4,
        .topk_group = 2,
        .masked_neg_inf = true},
       8,
       4,
       1.5f},
  };
  int mask_matters = 0;  // rows of the -inf cases whose experts differ under a 0 mask
  for (const Case& c : cases) {
    for (const bool coarse : {false, true}) {
      const int m = 9, e = c.e, k = c.k;
      std::vector<float> logits = random_floats(size_t(m * e), 60, 2.0f);
      if (coarse) {
        for (float& v : logits) v = std::round(v * 2.0f) / 2.0f;  // many equal logits
      }
      const std::vector<float> bias = random_floats(size_t(e), 61, 0.5f),
                               correction = random_floats(size_t(e), 62, c.correction_sd);
      DeviceVec<float> dl(logits), db(bias), dc(correction), dw(test::poisoned(size_t(m * k)));
      DeviceVec<int> di(std::vector<int>(size_t(m * k), -1));
      cuda::RouterPolicy p;
      p.gating = c.plan.gating == Gating::SoftmaxTopK   ? cuda::RouteGating::SoftmaxTopK
                 : c.plan.gating == Gating::TopKSoftmax ? cuda::RouteGating::TopKSoftmax
                                                        : cuda::RouteGating::SigmoidGroupTopK;
      p.renormalize = c.plan.renormalize;
      p.bias = c.plan.bias ? db.get() : nullptr;
      p.correction = c.plan.correction_bias ? dc.get() : nullptr;
      p.n_group = c.plan.n_group;
      p.topk_group = c.plan.topk_group;
      p.scale = c.plan.scale;
      p.masked = c.plan.masked_neg_inf ? -INFINITY : 0.0f;
      cuda::router_route(dl.get(), m, e, k, p, di.get(), dw.get(), nullptr);
      const std::vector<int> ids = di.download();
      const std::vector<float> w = dw.download();
      for (int i = 0; i < m; ++i) {
        std::vector<int> want(static_cast<size_t>(k));
        std::vector<float> wv(static_cast<size_t>(k));
        const std::vector<float> row(logits.begin() + i * e, logits.begin() + (i + 1) * e);
        cpu_route(row, c.plan, bias, correction, k, want.data(), wv.data());
        if (c.plan.masked_neg_inf) {
          RouterPlan zero = c.plan;
          zero.masked_neg_inf = false;
          std::vector<int> other(static_cast<size_t>(k));
          std::vector<float> ow(static_cast<size_t>(k));
          cpu_route(row, zero, bias, correction, k, other.data(), ow.data());
          mask_matters += other != want;
        }
        for (int s = 0; s < k; ++s) {
          ASSERT_EQ(ids[size_t(i * k + s)], want[size_t(s)]) << c.what << (coarse ? " ties" : "") << " row " << i;
          // exp or sigmoid per weight, a sum of at most e terms and a division, in float: relative (e + 8) u.
          ASSERT_NEAR(w[size_t(i * k + s)], wv[size_t(s)], (e + 8) * kU * std::fabs(wv[size_t(s)]) + 1e-30)
              << c.what << " row " << i << " slot " << s;
        }
      }
    }
  }
  EXPECT_GE(mask_matters, 1) << "the -inf cases should include rows where a 0 mask chooses other experts";
}

// gpt_oss's experts: biases on gate and up before the clamped SwiGLU, on down after its product, per expert (its
// slice of each (E, I) or (E, H) vector), against the CPU's ops; bf16 and MXFP4 weights (as released, and as a GGUF
// stores them: mxfp4_ggml); the fused down + combine gives the separate launches' bits with the biases too.
TEST(CudaKernels, ExpertBiasesAndClampedSwigluMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::BF16, Codec::MXFP4, Codec::MXFP4_GGML}) {
    for (const bool clamped : {false, true}) {
      const int64_t H = 128, I = 96, m = 3;
      const int E = 4, k = 2;
      cuda::ExpertLayout pl;
      const std::vector<uint8_t> blobs = expert_blobs(c, H, I, E, 400, pl);
      const cuda::ExpertLayout l = cuda::device_expert_layout(pl);
      const std::vector<int> ids = {3, 0, 2, 3, 1, 2};
      const std::vector<float> weights = {0.6f, 0.4f, 0.5f, 0.5f, 0.8f, 0.2f};
      // x large enough that gate and up pass the clamp's limit for some outputs.
      const std::vector<float> x = random_floats(size_t(m * H), 70, 40.0f), resid = random_floats(size_t(m * H), 71);
      const std::vector<float> gb = random_floats(size_t(E * I), 72), ub = random_floats(size_t(E * I), 73),
                               dbias = random_floats(size_t(E * H), 74);
      DeviceVec<uint8_t> db = test::device_blobs(blobs, pl, E, l);
      std::vector<const uint8_t*> table(static_cast<size_t>(E));
      for (int e = 0; e < E; ++e) table[size_t(e)] = db.get() + size_t(e) * l.bytes;
      DeviceVec<const uint8_t*> dt(table);
      DeviceVec<int> di(ids);
      DeviceVec<float> dx(x), dw(weights), dgb(gb), dub(ub), ddb(dbias), dact(test::poisoned(size_t(m * k * I))),
          dout(test::poisoned(size_t(m * k * H)));
      cuda::ExpertMath math;
      math.gate_bias = dgb.get();
      math.up_bias = dub.get();
      math.down_bias = ddb.get();
      math.clamped = clamped;
      cuda::expert_gate_up(dx.get(), m, k, di.get(), dt.get(), E, l, dact.get(), nullptr, math);
      cuda::expert_down(dact.get(), m * k, di.get(), dt.get(), l, dout.get(), nullptr, math);
      const std::vector<float> act = dact.download(), out = dout.download();
      for (int j = 0; j < m * k; ++j) {
        const int e = ids[size_t(j)];
        std::vector<float> gv, uv, a(static_cast<size_t>(I)), dv(static_cast<size_t>(H));
        const ops::Matrix d = cpu_gate_up(blobs, pl, e, x.data() + (j / k) * H, gv, uv);
        ops::add_to(gv.data(), gb.data() + e * I, I);
        ops::add_to(uv.data(), ub.data() + e * I, I);
        if (clamped) {
          ops::clamped_swiglu(gv.data(), uv.data(), a.data(), I, math.alpha, math.limit);
        } else {
          ops::silu_mul(gv.data(), uv.data(), a.data(), I);
        }
        for (int64_t n = 0; n < I; ++n) {
          ASSERT_NEAR(act[size_t(j * I + n)], a[size_t(n)], 2e-4 * (1 + std::fabs(a[size_t(n)])))
              << codec_name(c) << (clamped ? " clamped" : "") << " pair " << j << " out " << n;
        }
        const std::vector<float> act_j(act.begin() + j * I, act.begin() + (j + 1) * I);
        ops::ref::matmul(act_j.data(), 1, d, dv.data());
        ops::add_to(dv.data(), dbias.data() + e * H, H);
        for (int64_t h = 0; h < H; ++h) {
          const double bound = double(I + 8) * kU * abs_dot(act_j, 0, d, h) + 2 * kU * std::fabs(dv[size_t(h)]) + 1e-30;
          ASSERT_LE(std::fabs(out[size_t(j * H + h)] - dv[size_t(h)]), bound) << codec_name(c) << " pair " << j;
        }
      }
      DeviceVec<float> r_sep(resid), r_fused(resid);
      cuda::moe_combine(dout.get(), dw.get(), m, k, H, r_sep.get(), nullptr);
      cuda::expert_down_combine(dact.get(), m, k, di.get(), dw.get(), dt.get(), E, l, r_fused.get(), nullptr, nullptr,
                                math);
      ASSERT_EQ(r_fused.download(), r_sep.download()) << codec_name(c);
    }
  }
}

// olmoe's clip_qkv (ops::clamp) and qwen2_moe's gated shared expert (x += sigmoid(gate) * y) against the CPU: the
// clamp exactly, the gated add within one sigmoid's and one product's rounding.
TEST(CudaKernels, ClampAndSigmoidScaledAddMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 5, n = 300;
  const std::vector<float> x = random_floats(size_t(rows * n), 80, 4.0f), y = random_floats(size_t(rows * n), 81),
                           gate = random_floats(size_t(rows), 82, 3.0f);
  std::vector<float> clamped = x;
  ops::clamp(clamped.data(), rows * n, -2.5f, 2.5f);
  DeviceVec<float> dc(x), dx(x), dy(y), dg(gate);
  cuda::clamp(dc.get(), rows * n, -2.5f, 2.5f, nullptr);
  ASSERT_EQ(dc.download(), clamped);
  cuda::add_sigmoid_scaled(dx.get(), dy.get(), dg.get(), rows, n, nullptr);
  const std::vector<float> got = dx.download();
  for (int64_t i = 0; i < rows; ++i) {
    const float sg = ops::sigmoid(gate[size_t(i)]);
    for (int64_t h = 0; h < n; ++h) {
      const size_t j = size_t(i * n + h);
      const float want = x[j] + sg * y[j];
      ASSERT_NEAR(got[j], want, 8 * kU * (std::fabs(x[j]) + std::fabs(y[j])) + 1e-30) << i << " " << h;
    }
  }
}

TEST(CudaKernels, SiluMulMatchesCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const size_t n = 10000;
  const std::vector<float> g = random_floats(n, 5, 4.0f), u = random_floats(n, 6);
  std::vector<float> want(n);
  ops::silu_mul(g.data(), u.data(), want.data(), int64_t(n));
  DeviceVec<float> dg(g), du(u), dout(test::poisoned(n));
  cuda::silu_mul(dg.get(), du.get(), dout.get(), int64_t(n), nullptr);
  const std::vector<float> got = dout.download();
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 8 * kU * std::fabs(want[i]) + 1e-30) << i;
}

// Experts as one blob each, some absent: gate/up/SiLU, down, then the weighted combine into the residual; every codec
// family of has_kernel (FP8 as DeepSeek's releases store experts; GGUF's types at whole blocks: H, I 256 for the
// 256-element ones).
TEST(CudaKernels, ExpertProductsAndCombineMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<Codec> codecs = {Codec::BF16, Codec::Q8_G32, Codec::Q4_G64, Codec::FP8_G32,
                               Codec::P3,   Codec::P4,     Codec::S3,     Codec::MXFP4};
  codecs.insert(codecs.end(), std::begin(test::kGgmlCoreCodecs), std::end(test::kGgmlCoreCodecs));
  for (const Codec c : codecs) {
    const int64_t H = test::whole_blocks(c, 128), I = test::whole_blocks(c, 96), m = 3;
    const int E = 5, k = 2;
    cuda::ExpertLayout pl;
    const std::vector<uint8_t> blobs = expert_blobs(c, H, I, E, 100, pl);
    const cuda::ExpertLayout l = cuda::device_expert_layout(pl);
    const std::vector<int> ids = {4, 0, 2, 4, 1, 3};  // rows' chosen experts; expert 3 absent on the device
    const std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f};
    const std::vector<float> x = random_floats(size_t(m * H), 8);
    const std::vector<float> resid = random_floats(size_t(m * H), 9);
    DeviceVec<uint8_t> db = test::device_blobs(blobs, pl, E, l);
    std::vector<const uint8_t*> table(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) table[size_t(e)] = e == 3 ? nullptr : db.get() + size_t(e) * l.bytes;
    DeviceVec<const uint8_t*> dt(table);
    DeviceVec<int> di(ids);
    DeviceVec<float> dx(x), dw(weights), dact(test::poisoned(size_t(m * k * I))),
        dout(std::vector<float>(size_t(m * k * H), 0.0f));
    cuda::expert_gate_up(dx.get(), m, k, di.get(), dt.get(), E, l, dact.get(), nullptr);
    cuda::expert_down(dact.get(), m * k, di.get(), dt.get(), l, dout.get(), nullptr);
    const std::vector<float> act = dact.download(), out = dout.download();
    for (int j = 0; j < m * k; ++j) {
      const int e = ids[size_t(j)];
      if (e == 3) {
        ASSERT_EQ(act[size_t(j * I)], 1e30f) << "an absent expert's pair was written";
        continue;
      }
      std::vector<float> gv, uv, a(static_cast<size_t>(I)), dv(static_cast<size_t>(H));
      const ops::Matrix d = cpu_gate_up(blobs, pl, e, x.data() + (j / k) * H, gv, uv);
      ops::silu_mul(gv.data(), uv.data(), a.data(), I);
      for (int64_t n = 0; n < I; ++n)
        ASSERT_NEAR(act[size_t(j * I + n)], a[size_t(n)], 1e-5 * (1 + std::fabs(a[size_t(n)])));
      // down from the device's own activations, so only this product's rounding is measured.
      const std::vector<float> act_j(act.begin() + j * I, act.begin() + (j + 1) * I);
      ops::ref::matmul(act_j.data(), 1, d, dv.data());
      for (int64_t h = 0; h < H; ++h) {
        const double bound = double(I + 8) * kU * abs_dot(act_j, 0, d, h) + 1e-30;
        ASSERT_LE(std::fabs(out[size_t(j * H + h)] - dv[size_t(h)]), bound) << codec_name(c) << " pair " << j;
      }
    }
    // The combine: x += sum_s w_s * out_s, in slot order, exactly as the CPU loop (same float operations).
    DeviceVec<float> dr(resid);
    cuda::moe_combine(dout.get(), dw.get(), m, k, H, dr.get(), nullptr);
    const std::vector<float> comb = dr.download();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t h = 0; h < H; ++h) {
        float o = 0.0f;
        for (int s = 0; s < k; ++s) o = o + weights[size_t(i * k + s)] * out[size_t((i * k + s) * H + h)];
        ASSERT_EQ(comb[size_t(i * H + h)], resid[size_t(i * H + h)] + o) << i << " " << h;
      }
    }
    // Down products and combine in one launch, every expert present: expert_down + moe_combine bit for bit.
    for (int e = 0; e < E; ++e) table[size_t(e)] = db.get() + size_t(e) * l.bytes;
    dt.upload(table);
    DeviceVec<float> all_out(std::vector<float>(size_t(m * k * H), 0.0f)), r_sep(resid), r_fused(resid);
    cuda::expert_gate_up(dx.get(), m, k, di.get(), dt.get(), E, l, dact.get(), nullptr);
    cuda::expert_down(dact.get(), m * k, di.get(), dt.get(), l, all_out.get(), nullptr);
    cuda::moe_combine(all_out.get(), dw.get(), m, k, H, r_sep.get(), nullptr);
    cuda::expert_down_combine(dact.get(), m, k, di.get(), dw.get(), dt.get(), E, l, r_fused.get(), nullptr, nullptr);
    ASSERT_EQ(r_fused.download(), r_sep.download()) << codec_name(c);
    // A table too long for shared memory (600 entries, past the kernels' 512) is read from global memory instead:
    // the same bits.
    std::vector<const uint8_t*> long_table(600, nullptr);
    std::copy(table.begin(), table.end(), long_table.begin());
    DeviceVec<const uint8_t*> dlong(long_table);
    DeviceVec<float> act_long(test::poisoned(size_t(m * k * I))), r_long(resid);
    cuda::expert_gate_up(dx.get(), m, k, di.get(), dlong.get(), 600, l, act_long.get(), nullptr);
    cuda::expert_down_combine(act_long.get(), m, k, di.get(), dw.get(), dlong.get(), 600, l, r_long.get(), nullptr,
                              nullptr);
    ASSERT_EQ(act_long.download(), dact.download()) << codec_name(c);
    ASSERT_EQ(r_long.download(), r_fused.download()) << codec_name(c);
  }
}

// MXFP4 experts at gpt-oss's width (hidden 2,880: gate/up rows of 90 blocks, every chunk kind of mxfp4_layout.h, which
// the gate/up launch stages with x in shared memory) and at a width it does not stage (4,128: 2,208 bytes a row), with
// down rows of 60 blocks (chunks of 32, 16, 8 and 4): against the CPU, and down + combine fused = the two launches.
// The same for mxfp4_ggml (a GGUF's MXFP4 experts, whole blocks: I 1,920).
TEST(CudaKernels, Mxfp4ExpertsAtGptOssWidthsMatchCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [c, H] :
       {std::pair{Codec::MXFP4, int64_t(2880)}, std::pair{Codec::MXFP4, int64_t(4128)},
        std::pair{Codec::MXFP4_GGML, int64_t(2880)}, std::pair{Codec::MXFP4_GGML, int64_t(4128)}}) {
    const int64_t I = test::whole_blocks(c, 1900), m = 2;
    const int E = 3, k = 2;
    cuda::ExpertLayout pl;
    const std::vector<uint8_t> blobs = expert_blobs(c, H, I, E, 500, pl);
    const cuda::ExpertLayout l = cuda::device_expert_layout(pl);
    const std::vector<int> ids = {2, 0, 1, 2};
    const std::vector<float> weights = {0.6f, 0.4f, 0.3f, 0.7f};
    const std::vector<float> x = random_floats(size_t(m * H), 90), resid = random_floats(size_t(m * H), 91);
    DeviceVec<uint8_t> db = test::device_blobs(blobs, pl, E, l);
    std::vector<const uint8_t*> table(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) table[size_t(e)] = db.get() + size_t(e) * l.bytes;
    DeviceVec<const uint8_t*> dt(table);
    DeviceVec<int> di(ids);
    DeviceVec<float> dx(x), dw(weights), dact(test::poisoned(size_t(m * k * I))),
        dout(test::poisoned(size_t(m * k * H)));
    cuda::expert_gate_up(dx.get(), m, k, di.get(), dt.get(), E, l, dact.get(), nullptr);
    cuda::expert_down(dact.get(), m * k, di.get(), dt.get(), l, dout.get(), nullptr);
    const std::vector<float> act = dact.download(), out = dout.download();
    for (int j = 0; j < m * k; ++j) {
      const int e = ids[size_t(j)];
      std::vector<float> gv, uv, a(static_cast<size_t>(I)), dv(static_cast<size_t>(H));
      const ops::Matrix d = cpu_gate_up(blobs, pl, e, x.data() + (j / k) * H, gv, uv);
      ops::silu_mul(gv.data(), uv.data(), a.data(), I);
      for (int64_t n = 0; n < I; ++n) {
        ASSERT_NEAR(act[size_t(j * I + n)], a[size_t(n)], 1e-4 * (1 + std::fabs(a[size_t(n)])))
            << codec_name(c) << " H " << H << " pair " << j << " out " << n;
      }
      const std::vector<float> act_j(act.begin() + j * I, act.begin() + (j + 1) * I);
      ops::ref::matmul(act_j.data(), 1, d, dv.data());
      for (int64_t h = 0; h < H; ++h) {
        const double bound = double(I + 8) * kU * abs_dot(act_j, 0, d, h) + 1e-30;
        ASSERT_LE(std::fabs(out[size_t(j * H + h)] - dv[size_t(h)]), bound)
            << codec_name(c) << " H " << H << " pair " << j;
      }
    }
    DeviceVec<float> r_sep(resid), r_fused(resid);
    cuda::moe_combine(dout.get(), dw.get(), m, k, H, r_sep.get(), nullptr);
    cuda::expert_down_combine(dact.get(), m, k, di.get(), dw.get(), dt.get(), E, l, r_fused.get(), nullptr, nullptr);
    ASSERT_EQ(r_fused.download(), r_sep.download()) << codec_name(c) << " H " << H;
  }
}

namespace {

// A device cache laid out as hybrid_layout's, random at every float (keys and values of positions [0, cap)); its host
// copy for the CPU.
struct TestCache {
  int cap = 0, kv_dim = 0;
  std::vector<float> host;
  const float* keys(int layer) const { return host.data() + hybrid_layout(kv_dim).row(layer, false, cap, 0); }
  const float* values(int layer) const { return host.data() + hybrid_layout(kv_dim).row(layer, true, cap, 0); }
  const float* device_keys(const float* device, int layer) const { return device + (keys(layer) - host.data()); }
};

TestCache make_cache(int cap, int kv_dim, uint32_t seed) {
  return {cap, kv_dim, random_floats(size_t(hybrid_layout(kv_dim).per_position()) * size_t(cap), seed)};
}

// The CPU's attention for one query row at `pos` over keys [first, pos] (with sink logits when sinks is not null).
std::vector<float> cpu_attention(const float* q, const TestCache& c, int layer, int pos, int window,
                                 const cuda::AttentionShape& s, const float* sinks = nullptr) {
  const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
  std::vector<float> out(size_t(s.n_heads * s.head_dim));
  const ops::AttentionShape cs{s.n_heads, s.n_kv_heads, s.head_dim, s.scale, sinks};
  ops::attention_row(q, c.keys(layer), c.values(layer), first, pos, cs, 0, s.n_heads, out.data());
  return out;
}

// Outputs are convex combinations of values (|v| about 1 here): float32 softmax and sums in another order.
constexpr double kAttentionTolerance = 2e-5;

}  // namespace

class CudaPromptAttentionTest : public ::testing::TestWithParam<std::tuple<int, int, int, int, int, int>> {};

TEST_P(CudaPromptAttentionTest, MatchesCpuRowByRow) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [heads, kv_heads, hd, window, p0, n] = GetParam();
  const int layer = kHybridLayer;
  const TestCache c = make_cache(p0 + n + 3, kv_heads * hd, 21);
  const std::vector<float> q = random_floats(size_t(n * heads * hd), 22);
  // Without sinks, and with one logit a head of either sign and the scores' size (gpt_oss's attention sinks).
  const std::vector<float> sinks = random_floats(size_t(heads), 23, 2.0f);
  DeviceVec<float> dsinks(sinks);
  for (const bool with_sinks : {false, true}) {
    const cuda::AttentionShape s{
        heads, kv_heads, hd, 1.0f / std::sqrt(float(hd)), window, with_sinks ? dsinks.get() : nullptr};
    DeviceVec<float> dc(c.host), dq(q), dout(test::poisoned(q.size()));
    const float* kc = c.device_keys(dc.get(), layer);
    cuda::attention_prompt(dq.get(), n, p0, kc, kc + size_t(c.cap) * size_t(c.kv_dim), window, s, dout.get(), nullptr);
    const std::vector<float> got = dout.download();
    // A cache one float off 16-byte alignment takes the plain-load path (not cp.async): the same bits.
    std::vector<float> shifted(c.host.size() + 1, 0.0f);
    std::copy(c.host.begin(), c.host.end(), shifted.begin() + 1);
    DeviceVec<float> dshifted(shifted), dout2(test::poisoned(q.size()));
    const float* kc2 = c.device_keys(dshifted.get() + 1, layer);
    cuda::attention_prompt(dq.get(), n, p0, kc2, kc2 + size_t(c.cap) * size_t(c.kv_dim), window, s, dout2.get(),
                           nullptr);
    ASSERT_EQ(dout2.download(), got);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> want =
          cpu_attention(q.data() + i * heads * hd, c, layer, p0 + i, window, s, with_sinks ? sinks.data() : nullptr);
      for (size_t j = 0; j < want.size(); ++j) {
        ASSERT_NEAR(got[size_t(i * heads * hd) + j], want[j], kAttentionTolerance)
            << (with_sinks ? "sinks " : "") << "row " << i << " elem " << j;
      }
    }
  }
}

// (heads, kv heads, head_dim, sliding window, first position, rows): GQA groups of 1, 2, 4 and 8; head_dim 8 and 16
// (tiny checkpoints', padded to 64 inside), 32 to 128, 96 (not a power of 2) and 256; a window shorter than the
// prompt (mixtral_b's kind), also one shorter than a key tile and one spanning several query tiles; a prompt that
// continues a cached prefix; one row; 300 rows (5 query tiles of 64, the last partial) at issue 8's head shape; 200
// rows under a 150-key window after 10 cached.
INSTANTIATE_TEST_SUITE_P(Shapes, CudaPromptAttentionTest,
                         ::testing::Values(std::make_tuple(4, 2, 32, 0, 0, 37), std::make_tuple(4, 4, 64, 0, 5, 37),
                                           std::make_tuple(8, 2, 128, 0, 0, 37), std::make_tuple(4, 2, 32, 8, 0, 37),
                                           std::make_tuple(4, 1, 64, 13, 20, 37), std::make_tuple(4, 2, 8, 0, 0, 37),
                                           std::make_tuple(4, 4, 16, 3, 2, 37), std::make_tuple(6, 2, 96, 0, 9, 70),
                                           std::make_tuple(4, 2, 256, 40, 3, 100), std::make_tuple(8, 2, 128, 0, 11, 1),
                                           std::make_tuple(32, 4, 128, 0, 0, 300),
                                           std::make_tuple(32, 4, 128, 0, 77, 300),
                                           std::make_tuple(32, 4, 128, 64, 0, 300),
                                           std::make_tuple(4, 1, 64, 150, 10, 200)));

// A shape the kernel does not take is one Error naming it, thrown before anything reaches a device (no GPU needed).
TEST(CudaKernels, PromptAttentionRejectsShapesItCannotRun) {
  const cuda::AttentionShape shapes[] = {{4, 2, 320, 1.0f}, {6, 4, 64, 1.0f}, {4, 0, 64, 1.0f}};
  for (const cuda::AttentionShape& s : shapes) {
    try {
      cuda::attention_prompt(nullptr, 5, 0, nullptr, nullptr, 0, s, nullptr, nullptr);
      FAIL() << "attention_prompt accepted head_dim " << s.head_dim << ", " << s.n_heads << "/" << s.n_kv_heads;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("attention_prompt of 5 rows, head_dim " + std::to_string(s.head_dim)), std::string::npos) << m;
      EXPECT_NE(m.find("expected head_dim 1..256"), std::string::npos) << m;
    }
  }
}

class CudaDecodeAttentionTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(CudaDecodeAttentionTest, SplitOverKeysMatchesCpuAndEachRowAlone) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const auto [heads, kv_heads, hd] = GetParam();
  // Sinks of either sign and of the scores' size (|score| is about 1 here), so they move the denominator visibly.
  const std::vector<float> sinks = random_floats(size_t(heads), 41, 2.0f);
  DeviceVec<float> dsinks(sinks);
  for (const auto& [window, with_sinks] :
       {std::pair{0, false}, std::pair{300, false}, std::pair{0, true}, std::pair{300, true}}) {
    const int layer = kHybridLayer;
    const int64_t base = hybrid_layout(kv_heads * hd).base(layer);
    const cuda::AttentionShape s{
        heads, kv_heads, hd, 1.0f / std::sqrt(float(hd)), window, with_sinks ? dsinks.get() : nullptr};
    // (position, cache capacity): one key; splits of 64 keys (2 tiles) with the last one partial; splits of exactly
    // one tile; a cache far larger than its row (a graph's, empty splits); splits of 320 keys (10 tiles each).
    const std::vector<std::pair<int, int>> pos_cap = {{0, 1}, {700, 701}, {511, 512}, {100, 4096}, {4999, 5000}};
    std::vector<TestCache> caches;
    std::vector<std::unique_ptr<DeviceVec<float>>> dcaches;
    std::vector<cuda::KvRow> rows;
    for (size_t r = 0; r < pos_cap.size(); ++r) {
      caches.push_back(make_cache(pos_cap[r].second, kv_heads * hd, uint32_t(30 + r)));
      dcaches.push_back(std::make_unique<DeviceVec<float>>(caches.back().host));
      rows.push_back({dcaches.back()->get(), caches.back().cap, pos_cap[r].first});
    }
    const int n = int(rows.size());
    const std::vector<float> q = random_floats(size_t(n * heads * hd), 40);
    std::vector<int> listed(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) listed[size_t(i)] = i;
    DeviceVec<cuda::KvRow> drows(rows);
    DeviceVec<int> dlisted(listed);
    DeviceVec<float> dq(q), dout(test::poisoned(q.size()));
    DeviceVec<float> scratch(size_t(cuda::decode_attention_scratch_floats(n, s)));
    DeviceVec<int> counters(std::vector<int>(size_t(n * heads), 0));
    cuda::attention_decode(dq.get(), dlisted.get(), n, drows.get(), base, s, dout.get(), scratch.get(), counters.get(),
                           nullptr);
    const std::vector<float> got = dout.download();
    // The counters the launch's last blocks use are back at zero: a second launch merges again, to the same bits;
    // and a row listed alone gets the bits it got in the batch.
    DeviceVec<float> dout2(test::poisoned(q.size()));
    cuda::attention_decode(dq.get(), dlisted.get(), n, drows.get(), base, s, dout2.get(), scratch.get(), counters.get(),
                           nullptr);
    ASSERT_EQ(dout2.download(), got);
    DeviceVec<int> one(std::vector<int>{3});
    DeviceVec<float> dout3(test::poisoned(q.size()));
    cuda::attention_decode(dq.get(), one.get(), 1, drows.get(), base, s, dout3.get(), scratch.get(), counters.get(),
                           nullptr);
    const std::vector<float> alone = dout3.download();
    for (int j = 0; j < heads * hd; ++j) ASSERT_EQ(alone[size_t(3 * heads * hd + j)], got[size_t(3 * heads * hd + j)]);
    for (int i = 0; i < n; ++i) {
      const std::vector<float> want =
          cpu_attention(q.data() + i * heads * hd, caches[size_t(i)], layer, pos_cap[size_t(i)].first, window, s,
                        with_sinks ? sinks.data() : nullptr);
      for (size_t j = 0; j < want.size(); ++j) {
        ASSERT_NEAR(got[size_t(i * heads * hd) + j], want[j], kAttentionTolerance)
            << "window " << window << (with_sinks ? " sinks" : "") << " row " << i << " elem " << j;
      }
    }
  }
}

// (heads, kv heads, head_dim): GQA groups of 1 to 16 query heads per KV head (16: two groups of 8 per KV head),
// head_dim 8 (a tiny checkpoint's) to 256 (too wide to stage: read from the cache directly), 96 (not a power of 2).
INSTANTIATE_TEST_SUITE_P(Shapes, CudaDecodeAttentionTest,
                         ::testing::Values(std::make_tuple(8, 2, 64), std::make_tuple(32, 4, 128),
                                           std::make_tuple(4, 2, 8), std::make_tuple(4, 4, 16),
                                           std::make_tuple(32, 2, 256), std::make_tuple(6, 2, 96)));

TEST(CudaKernels, EmbedWidensRowsExactly) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<Codec> codecs(std::begin(kCudaCodecs), std::end(kCudaCodecs));
  codecs.insert(codecs.end(), std::begin(test::kGgmlCodecs), std::end(test::kGgmlCodecs));
  for (const Codec c : codecs) {
    const int64_t V = 50, H = test::whole_blocks(c, 100);
    const std::vector<uint8_t> e = encoded(c, V, H, 50);
    const ops::Matrix m(c, e.data(), V, H);
    const std::vector<int> tokens = {3, 49, 0, 3};
    DeviceVec<uint8_t> de(e);
    DeviceVec<int> dt(tokens);
    DeviceVec<float> dx(test::poisoned(tokens.size() * size_t(H)));
    cuda::embed(dt.get(), int64_t(tokens.size()), {c, de.get(), V, H}, dx.get(), nullptr);
    const std::vector<float> got = dx.download();
    for (size_t i = 0; i < tokens.size(); ++i) {
      for (int64_t k = 0; k < H; ++k) ASSERT_EQ(got[i * size_t(H) + size_t(k)], m.at(tokens[i], k)) << codec_name(c);
    }
  }
}

}  // namespace seedling
