// The tensor-core GEMMs (cuda/gemm.h), every kernel kind (GemmKernel), against the CPU reference
// (the weights as Matrix::at gives them, codec_value or the seed spec's decode_block, times x summed in double, as
// ops::ref::matmul does), and their invariant: a row's (an expert pair's) bits do not depend on which other rows or
// experts share the launch, nor on the tile shape the mma kernel picks for it. Every kind rounds both operands to
// TF32 and accumulates in float32 MMAs, so one bound holds for all. The seed codecs (p3, p4, s3) run at shapes that
// leave partial blocks and k-slices.
//
// Tolerance, from the arithmetic: weights widen (seeds: decode) exactly and x is float32, then both are rounded to TF32
// (round to nearest, unit roundoff u = 2^-11), so each product is off by at most (2u + u^2) |x_k w_k|; the tensor
// cores add the k exact products in float32, perhaps truncating (2^-23 each, not 2^-24), and the tile sums meet
// once more in float32: (k + 8) 2^-23 of sum |x_k w_k|. So |got - exact| <= (2^-10 + 2^-22 + (k + 8) 2^-23) * sum
// |x_k w_k|, and the reference itself (double, rounded once to float) adds 2^-24 |exact|.
//
// The f16 kernel (affine codecs under Mma, MmaLarge, MmaSmall; matmul_tc with its f16 scratch) keeps both
// operands to the same 10 mantissa bits, plus (f16_extra): a weight is q d + m rounded once to f16 from its exact
// value, which is within 2^-24 |w| of the CPU's float one (so 2^-11 + 2^-23 of |w| in all), or within 2^-25 where f16
// is subnormal (|w| < 2^-14); an x, scaled by 2^(14 - e) for its row's largest |x| in [2^e, 2^(e+1)), is within
// 2^-25 of the scaled value where f16 is subnormal, 2^-39 max |x| of the row. So the f16 bound adds
// 2^-23 sum |x_k w_k| + 2^-25 sum |x_k| + 2^-39 max |x| sum |w_k|.
#include "cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "cuda_test_util.h"
#include "ops/matmul.h"
#include "ops/ops.h"

namespace seedling {

namespace {

using test::DeviceVec;

// The bound above for a dot product of k terms whose absolute products sum to `abs`, plus the reference's rounding.
double tc_bound(int64_t k, double abs, double exact) {
  const double u_tf32 = std::ldexp(1.0, -11);
  return (2 * u_tf32 + u_tf32 * u_tf32 + double(k + 8) * std::ldexp(1.0, -23)) * abs +
         std::ldexp(1.0, -24) * std::fabs(exact) + 1e-30;
}

// The f16 kernel's terms beyond tc_bound (see the file comment) for the dot of x and w over k.
double f16_extra(const float* x, const float* w, int64_t k) {
  double abs_xw = 0, abs_x = 0, max_x = 0, abs_w = 0;
  for (int64_t i = 0; i < k; ++i) {
    abs_xw += std::fabs(double(x[i]) * double(w[i]));
    abs_x += std::fabs(double(x[i]));
    abs_w += std::fabs(double(w[i]));
    max_x = std::max(max_x, std::fabs(double(x[i])));
  }
  return std::ldexp(abs_xw, -23) + std::ldexp(abs_x, -25) + std::ldexp(max_x * abs_w, -39);
}

// Whether kernel kind k runs codec c on the f16 kernel (given its scratch, for matmul_tc): the affine codecs and
// GGUF's 32-element types of float16 d (and m) (FP8's weights need float32's range: the TF32 kernel).
bool runs_f16(cuda::GemmKernel k, Codec c) {
  return k != cuda::GemmKernel::MmaTf32 && (codec_is_affine(c) || test::ggml_on_f16_kernel(c));
}

// matmul_tc_split's bound: x split into TF32 parts carries it to 2^-22 |x|, the 2k exact products (weights exact in
// TF32) are added in float32 MMAs as above, at most (1 + 2^-10) sum |x_k w_k| in magnitude.
double split_bound(int64_t k, double abs, double exact) {
  return (std::ldexp(1.0, -22) + double(2 * k + 8) * std::ldexp(1.0, -23) * (1 + std::ldexp(1.0, -10))) * abs +
         std::ldexp(1.0, -24) * std::fabs(exact) + 1e-30;
}
// The same with weights not exact in TF32, split in two as x is: each product x w carried to (2^-22 (x) + 2^-22 (w) +
// 2^-22 (x_lo w_lo, left out)) of itself, and 3k exact products added.
double split3_bound(int64_t k, double abs, double exact) {
  return (3 * std::ldexp(1.0, -22) + double(3 * k + 8) * std::ldexp(1.0, -23) * (1 + std::ldexp(1.0, -10))) * abs +
         std::ldexp(1.0, -24) * std::fabs(exact) + 1e-30;
}

// W widened to floats (codec_value through Matrix::at), row-major n x k, for the bounds' sum |x_k w_k|.
std::vector<float> widened(const ops::Matrix& w) {
  std::vector<float> out(size_t(w.rows * w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    for (int64_t k = 0; k < w.cols; ++k) out[size_t(n * w.cols + k)] = w.at(n, k);
  }
  return out;
}

double abs_dot(const float* x, const float* w, int64_t k) {
  double s = 0;
  for (int64_t i = 0; i < k; ++i) s += std::fabs(double(x[i]) * double(w[i]));
  return s;
}

// The reference y = x W^T (m rows) from W widened (n x k), summed in double and rounded once to float.
std::vector<float> reference(const float* x, int64_t m, const std::vector<float>& wf, int64_t n, int64_t k) {
  std::vector<float> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < n; ++o) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += double(x[i * k + j]) * double(wf[size_t(o * k + j)]);
      y[size_t(i * n + o)] = float(acc);
    }
  }
  return y;
}

// Runs the products with kernel k, back to the default (Mma) at the end of the scope.
struct UseKernel {
  explicit UseKernel(cuda::GemmKernel k) { cuda::use_gemm_kernel(k); }
  ~UseKernel() { cuda::use_gemm_kernel(cuda::GemmKernel::Mma); }
  UseKernel(const UseKernel&) = delete;
  UseKernel& operator=(const UseKernel&) = delete;
};
// Every kind: the default pick (which takes 64 x 64 tiles at these tests' small shapes), each tile forced (so the
// 128 x 128 one meets the bound too), and the TF32 mma kernel for every codec.
constexpr cuda::GemmKernel kKernels[] = {cuda::GemmKernel::Mma, cuda::GemmKernel::MmaLarge, cuda::GemmKernel::MmaSmall,
                                         cuda::GemmKernel::MmaTf32};
constexpr cuda::GemmKernel kMmaKernels[] = {cuda::GemmKernel::Mma, cuda::GemmKernel::MmaLarge,
                                            cuda::GemmKernel::MmaSmall};
constexpr Codec kSeedCodecs[] = {Codec::P3, Codec::P4, Codec::S3};
const char* kernel_name(cuda::GemmKernel k) {
  switch (k) {
    case cuda::GemmKernel::Mma:
      return "mma";
    case cuda::GemmKernel::MmaLarge:
      return "mma128";
    case cuda::GemmKernel::MmaSmall:
      return "mma64";
    case cuda::GemmKernel::MmaTf32:
      break;
  }
  return "tf32";
}

// Largest error seen, as a fraction of its bound (printed, so the margin is visible).
struct Worst {
  double ratio = 0;
  void see(double err, double bound) { ratio = std::max(ratio, err / bound); }
};

// One product to check: random W (n x k of `codec`) and x (m x k), the reference (want), both on the device (dx,
// dm), and a product's outputs for all m rows (got) and for the last row alone (alone).
struct ProductCase {
  int64_t m, n, k;
  std::vector<uint8_t> wbytes;
  std::vector<float> x, wf, want, got, alone;
  DeviceVec<uint8_t> dw;
  DeviceVec<float> dx;
  DeviceVec<uint8_t> dscratch;  // matmul_tc's scratch for the f16 kernel
  cuda::DeviceMatrix dm;
  ProductCase(Codec codec, int64_t m_, int64_t n_, int64_t k_)
      : m(m_),
        n(n_),
        k(k_),
        wbytes(test::encoded(codec, n, k, 7)),
        x(test::gaussian(size_t(m * k), 11)),
        wf(widened(ops::Matrix(codec, wbytes.data(), n, k))),
        want(reference(x.data(), m, wf, n, k)),
        dw(wbytes),
        dx(x),
        dscratch(cuda::matmul_tc_scratch_bytes(m_, k_)),
        dm{codec, dw.get(), n, k} {}
  // got and alone from product(x, rows, dm, y).
  template <typename Product>
  void run(Product product) {
    DeviceVec<float> dy(test::poisoned(size_t(m * n))), dlast(test::poisoned(size_t(n)));
    product(dx.get(), m, dm, dy.get());
    product(dx.get() + (m - 1) * k, 1, dm, dlast.get());
    got = dy.download();
    alone = dlast.download();
  }
  // Asserts each output within bound(k, sum |x_k w_k|, exact) (plus f16_extra with f16) of the reference and the last
  // row alone equal to its row in the batch; returns the worst error's share of its bound in worst. Call through
  // ASSERT_NO_FATAL_FAILURE.
  template <typename Bound>
  void expect_within(Bound bound, const std::string& what, Worst& worst, bool f16 = false) const {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < n; ++o) {
        const double exact = want[size_t(i * n + o)];
        const float *xi = x.data() + i * k, *wo = wf.data() + o * k;
        const double b = bound(k, abs_dot(xi, wo, k), exact) + (f16 ? f16_extra(xi, wo, k) : 0.0);
        const double err = std::fabs(double(got[size_t(i * n + o)]) - exact);
        worst.see(err, b);
        ASSERT_LE(err, b) << what << " row " << i << " out " << o;
      }
    }
    for (int64_t o = 0; o < n; ++o) ASSERT_EQ(alone[size_t(o)], got[size_t((m - 1) * n + o)]) << what << " out " << o;
  }
  // Asserts product(x, m, dm, y) gives got's bits on every tile shape (kKernels). Call through ASSERT_NO_FATAL_FAILURE.
  template <typename Product>
  void expect_every_tile_same_bits(Product product, const std::string& what) {
    for (const cuda::GemmKernel kind : kKernels) {
      const UseKernel use(kind);
      DeviceVec<float> dz(test::poisoned(size_t(m * n)));
      product(dx.get(), m, dm, dz.get());
      ASSERT_EQ(dz.download(), got) << what << " " << kernel_name(kind);
    }
  }
};

}  // namespace

// (codec, m, n, k): every m in {1, 17, 130}, n in {77, 2048}, k in {64, 100, 2048} appears, with partial tiles of
// rows, outputs and k (100: a partial k-slice and, for the g64 codecs, a partial block). Every codec adds k 1003 (not
// a multiple of 4: x read without float4s, and the f16 kernel's x converted without them, its last 8-half copy
// running into the row's zero padding): every k but 64 leaves p3/p4 a partial 8-weight block, every k s3 a partial
// 12-weight one (64 = 5 x 12 + 4, 2048 = 170 x 12 + 8), and pieces cross s3 blocks.
class GemmTcTest
    : public ::testing::TestWithParam<std::tuple<Codec, std::tuple<int64_t, int64_t, int64_t>, cuda::GemmKernel>> {};

TEST_P(GemmTcTest, MatmulMatchesReferenceWithinTf32Bound) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const Codec codec = std::get<0>(GetParam());
  const auto [m, n, k] = std::get<1>(GetParam());
  const UseKernel use(std::get<2>(GetParam()));
  ProductCase pc(codec, m, n, k);
  pc.run([&](const float* x, int64_t rows, const cuda::DeviceMatrix& w, float* y) {
    cuda::matmul_tc(x, rows, w, y, false, nullptr, pc.dscratch.get());
  });
  Worst worst;
  const bool f16 = runs_f16(std::get<2>(GetParam()), codec);
  ASSERT_NO_FATAL_FAILURE(pc.expect_within(tc_bound, std::string(codec_name(codec)), worst, f16));
  std::printf("[ gemm ] %s %s m %lld n %lld k %lld: worst error %.3f of the bound\n",
              kernel_name(std::get<2>(GetParam())), std::string(codec_name(codec)).c_str(), (long long)m, (long long)n,
              (long long)k, worst.ratio);

  // accumulate: y += x W^T, the sum added once to what was there.
  const std::vector<float> base = test::gaussian(size_t(m * n), 5);
  DeviceVec<float> dy(base);
  cuda::matmul_tc(pc.dx.get(), m, pc.dm, dy.get(), true, nullptr, pc.dscratch.get());
  const std::vector<float> acc = dy.download();
  for (size_t j = 0; j < acc.size(); ++j) ASSERT_EQ(acc[j], base[j] + pc.got[j]) << j;
  if (!f16) return;
  // Without the scratch, matmul_tc runs the TF32 kernel: within tc_bound.
  DeviceVec<float> dt(test::poisoned(size_t(m * n)));
  cuda::matmul_tc(pc.dx.get(), m, pc.dm, dt.get(), false, nullptr);
  pc.got = dt.download();
  pc.alone = std::vector<float>(pc.got.end() - n, pc.got.end());
  Worst tf32;
  ASSERT_NO_FATAL_FAILURE(pc.expect_within(tc_bound, std::string(codec_name(codec)) + " without scratch", tf32));
}

// The f16 kernel's row scales: rows whose largest |x| is far above f16's range (2^40), far below it (2^-40), rows of
// zeros beside them, and a row holding an infinity, which the product must carry as float32 arithmetic would (each of
// that row's outputs infinite or NaN).
TEST(GemmTcF16, RowScalesKeepEveryRowInRange) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t m = 70, n = 96, k = 192;
  ProductCase pc(Codec::Q4_G64, m, n, k);
  for (int64_t i = 0; i < m; ++i) {
    const float f = i % 4 == 0 ? std::ldexp(1.0f, 40) : i % 4 == 1 ? std::ldexp(1.0f, -40) : i % 4 == 2 ? 0.0f : 1.0f;
    for (int64_t j = 0; j < k; ++j) pc.x[size_t(i * k + j)] *= f;
  }
  pc.x[size_t(3 * k + 5)] = std::numeric_limits<float>::infinity();
  pc.want = reference(pc.x.data(), m, pc.wf, n, k);
  pc.dx.upload(pc.x);
  pc.run([&](const float* x, int64_t rows, const cuda::DeviceMatrix& w, float* y) {
    cuda::matmul_tc(x, rows, w, y, false, nullptr, pc.dscratch.get());
  });
  for (int64_t o = 0; o < n; ++o) {
    const float v = pc.got[size_t(3 * n + o)];
    ASSERT_TRUE(std::isinf(v) || std::isnan(v)) << "out " << o;
    pc.got[size_t(3 * n + o)] = pc.want[size_t(3 * n + o)] = 0.0f;  // the bound check below passes over this row
  }
  std::fill(pc.x.begin() + 3 * k, pc.x.begin() + 4 * k, 0.0f);
  Worst worst;
  ASSERT_NO_FATAL_FAILURE(pc.expect_within(tc_bound, "scaled rows", worst, true));
  std::printf("[ gemm ] f16 rows at 2^40, 2^-40, 0: worst error %.3f of the bound\n", worst.ratio);
}

using Shape = std::tuple<int64_t, int64_t, int64_t>;  // m, n, k

std::string shape_name(const ::testing::TestParamInfo<std::tuple<Codec, Shape, cuda::GemmKernel>>& info) {
  const Shape& s = std::get<1>(info.param);
  return std::string(codec_name(std::get<0>(info.param))) + "_m" + std::to_string(std::get<0>(s)) + "_n" +
         std::to_string(std::get<1>(s)) + "_k" + std::to_string(std::get<2>(s)) + "_" +
         kernel_name(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Codecs, GemmTcTest,
                         ::testing::Combine(::testing::ValuesIn(test::kCudaCodecs),
                                            ::testing::Values(Shape{1, 77, 64}, Shape{17, 77, 100},
                                                              Shape{130, 77, 2048}, Shape{1, 2048, 100},
                                                              Shape{17, 2048, 2048}, Shape{130, 2048, 64},
                                                              Shape{70, 77, 1003}),
                                            ::testing::ValuesIn(kKernels)),
                         shape_name);
// GGUF's types (cuda/ggml_pieces.h: the 32-element ones with float16 d on the f16 kernel, the K types and iq4_xs on
// TF32) at whole blocks: k of 1, 2, 8 and 3 blocks of 256; the 32-element ones also at k 96 and 1,056 (a partial
// k-slice: 1.5 and 16.5 of 64).
INSTANTIATE_TEST_SUITE_P(Ggml, GemmTcTest,
                         ::testing::Combine(::testing::ValuesIn(test::kGgmlCodecs),
                                            ::testing::Values(Shape{1, 77, 256}, Shape{17, 77, 512},
                                                              Shape{130, 77, 2048}, Shape{1, 2048, 256},
                                                              Shape{130, 2048, 256}, Shape{70, 77, 768}),
                                            ::testing::ValuesIn(kKernels)),
                         shape_name);
constexpr Codec kGgml32Codecs[] = {Codec::Q8_0, Codec::Q4_0, Codec::Q5_0, Codec::Q5_1, Codec::IQ4_NL};
INSTANTIATE_TEST_SUITE_P(Ggml32, GemmTcTest,
                         ::testing::Combine(::testing::ValuesIn(kGgml32Codecs),
                                            ::testing::Values(Shape{70, 77, 96}, Shape{130, 2048, 1056}),
                                            ::testing::ValuesIn(kKernels)),
                         shape_name);
INSTANTIATE_TEST_SUITE_P(Seeds, GemmTcTest,
                         ::testing::Combine(::testing::ValuesIn(kSeedCodecs),
                                            ::testing::Values(Shape{1, 77, 64}, Shape{17, 77, 100},
                                                              Shape{130, 77, 2048}, Shape{1, 2048, 100},
                                                              Shape{17, 2048, 2048}, Shape{130, 2048, 64},
                                                              Shape{70, 77, 1003}),
                                            ::testing::ValuesIn(kMmaKernels)),
                         shape_name);

// A seed blob that is not 4-byte aligned is one clear error, raised before any launch (so this runs without a GPU too).
TEST(GemmTcSeeds, MisalignedBlobsAreClearErrors) {
  for (const Codec c : kSeedCodecs) {
    const auto* misaligned = reinterpret_cast<const void*>(uintptr_t(4098));
    const std::string e = test::error_of([&] {
      cuda::matmul_tc(nullptr, 64, {c, misaligned, 4, 24}, nullptr, false, nullptr);
    });
    EXPECT_NE(e.find("4-byte aligned"), std::string::npos) << e;
  }
}

// matmul_tc_stacked (q, k and v in one product): each matrix's outputs have the bits matmul_tc gives it alone, under
// every kernel, with tiles of columns that straddle two matrices (77 + 64 + 37 rows), with and without the f16
// scratch.
TEST(GemmTcStacked, EachOutputHasItsBitsAlone) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t m = 130, k_most = 256, rows[3] = {77, 64, 37};
  const std::vector<float> x = test::gaussian(size_t(m * k_most), 21);  // m rows of k, for any k up to k_most
  DeviceVec<float> dx(x);
  DeviceVec<uint8_t> scratch(cuda::matmul_tc_scratch_bytes(m, k_most));
  for (const cuda::GemmKernel kernel : kKernels) {
    const UseKernel use(kernel);
    for (const Codec c : {Codec::F32, Codec::BF16, Codec::Q8_G32, Codec::Q4_G64, Codec::P4, Codec::Q8_0, Codec::Q6_K}) {
      const int64_t k = test::whole_blocks(c, 100);
      std::vector<std::vector<uint8_t>> bytes;
      std::vector<DeviceVec<uint8_t>> dw;
      cuda::DeviceMatrix ws[3];
      for (int i = 0; i < 3; ++i) {
        bytes.push_back(test::encoded(c, rows[i], k, uint32_t(30 + i)));
        dw.emplace_back(bytes.back());
        ws[i] = {c, dw.back().get(), rows[i], k};
      }
      for (void* sc : {static_cast<void*>(scratch.get()), static_cast<void*>(nullptr)}) {
        std::vector<DeviceVec<float>> stacked, alone;
        float* ys[3];
        for (int i = 0; i < 3; ++i) {
          stacked.emplace_back(test::poisoned(size_t(m * rows[i])));
          alone.emplace_back(test::poisoned(size_t(m * rows[i])));
          ys[i] = stacked.back().get();
          cuda::matmul_tc(dx.get(), m, ws[i], alone.back().get(), false, nullptr, sc);
        }
        cuda::matmul_tc_stacked(dx.get(), m, ws, ys, 3, false, nullptr, sc);
        for (int i = 0; i < 3; ++i) {
          const std::vector<float> got = stacked[size_t(i)].download(), want = alone[size_t(i)].download();
          for (const float v : got) ASSERT_NE(v, 1e30f) << codec_name(c) << " matrix " << i << " not written";
          ASSERT_EQ(got, want) << kernel_name(kernel) << " " << codec_name(c) << " matrix " << i
                               << (sc != nullptr ? " (f16 scratch)" : "");
        }
      }
    }
  }
}

// One codec and one k a stacked product, 1 to 3 matrices: anything else is one clear error, before any launch.
TEST(GemmTcStacked, MismatchedMatricesAreClearErrors) {
  const cuda::DeviceMatrix q4{Codec::Q4_G64, nullptr, 64, 128}, q8{Codec::Q8_G32, nullptr, 64, 128},
      q4k{Codec::Q4_G64, nullptr, 64, 192};
  float* ys[4] = {};
  const cuda::DeviceMatrix codecs[2] = {q4, q8}, cols[2] = {q4, q4k}, four[4] = {q4, q4, q4, q4};
  std::string e = test::error_of([&] { cuda::matmul_tc_stacked(nullptr, 64, codecs, ys, 2, false, nullptr); });
  EXPECT_NE(e.find("differ in codec or in columns"), std::string::npos) << e;
  e = test::error_of([&] { cuda::matmul_tc_stacked(nullptr, 64, cols, ys, 2, false, nullptr); });
  EXPECT_NE(e.find("differ in codec or in columns"), std::string::npos) << e;
  e = test::error_of([&] { cuda::matmul_tc_stacked(nullptr, 64, four, ys, 4, false, nullptr); });
  EXPECT_NE(e.find("1 to 3 matrices"), std::string::npos) << e;
}

// The router's product (matmul_tc_split), unsplit and split over k (with its scratch): bf16 and f16 weights within
// split_bound, the last row alone the same bits, each tile shape the same bits, and any other codec a clear error.
TEST(GemmTcSplit, MatchesReferenceToFloat32Accuracy) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const bool split_k : {false, true}) {
    for (const Codec codec : {Codec::BF16, Codec::F16}) {
      for (const Shape& s : {Shape{130, 128, 2048}, Shape{64, 77, 100}, Shape{2048, 128, 2048}}) {
        const auto [m, n, k] = s;
        ProductCase pc(codec, m, n, k);
        DeviceVec<uint8_t> scratch(cuda::matmul_tc_split_scratch_bytes(m, pc.dm));
        auto split = [&](const float* x, int64_t rows, const cuda::DeviceMatrix& w, float* y) {
          cuda::matmul_tc_split(x, rows, w, y, false, nullptr, split_k ? scratch.get() : nullptr);
        };
        pc.run(split);
        Worst worst;
        const std::string what = std::string(codec_name(codec)) + " m " + std::to_string(m) + (split_k ? " split" : "");
        ASSERT_NO_FATAL_FAILURE(pc.expect_within(split_bound, what, worst));
        ASSERT_NO_FATAL_FAILURE(pc.expect_every_tile_same_bits(split, what));
        std::printf("[ gemm ] split %s%s m %lld n %lld k %lld: worst error %.3f of the bound\n",
                    std::string(codec_name(codec)).c_str(), split_k ? " (k in parts)" : "", (long long)m, (long long)n,
                    (long long)k, worst.ratio);
      }
    }
  }
  const std::string e = test::error_of([&] {
    cuda::matmul_tc_split(nullptr, 64, {Codec::MXFP4, nullptr, 4, 64}, nullptr, false, nullptr);
  });
  EXPECT_NE(e.find("mxfp4 weights"), std::string::npos) << e;
}

// Every other codec of the tensor-core GEMMs (a float32 forward's products: forward_products.h): weights split in two
// TF32 parts as x is, three MMAs a product, within split3_bound; the last row alone the same bits, each tile shape
// the same bits; and the grouped expert products with float32 the same way.
TEST(GemmTcSplit, SplitWeightsMatchReferenceToFloat32Accuracy) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec codec : {Codec::F32, Codec::Q4_G64, Codec::Q8_G32, Codec::FP8_G32, Codec::Q4_0, Codec::Q8_0,
                            Codec::Q4_K, Codec::Q6_K, Codec::P4}) {
    for (const Shape& s : {Shape{130, 128, 2048}, Shape{64, 77, test::whole_blocks(codec, 100)}}) {
      const auto [m, n, k] = s;
      ProductCase pc(codec, m, n, k);
      auto split = [&](const float* x, int64_t rows, const cuda::DeviceMatrix& w, float* y) {
        cuda::matmul_tc_split(x, rows, w, y, false, nullptr);
      };
      pc.run(split);
      Worst worst;
      const std::string what = std::string(codec_name(codec)) + " m " + std::to_string(m);
      ASSERT_NO_FATAL_FAILURE(pc.expect_within(split3_bound, what, worst));
      ASSERT_NO_FATAL_FAILURE(pc.expect_every_tile_same_bits(split, what));
      std::printf("[ gemm ] split weights %s m %lld n %lld k %lld: worst error %.3f of the bound\n",
                  std::string(codec_name(codec)).c_str(), (long long)m, (long long)n, (long long)k, worst.ratio);
    }
  }
}

// The mma kernel picks its tile shape per call (gemm.cu: 128 x 128 when the grid is big enough, else 64 x 64); the
// shapes must not change a bit. On an H200 (132 SMs), m 2048 x n 2048 takes 128 x 128 tiles and m 64 takes 64 x 64:
// rows 1000..1063 computed both ways must match.
TEST(GemmTcTileShapes, GiveTheSameBits) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec codec : {Codec::F32, Codec::Q4_G64, Codec::S3, Codec::Q4_K, Codec::Q5_0}) {
    const int64_t m = 2048, n = 2048, k = test::whole_blocks(codec, 100), r0 = 1000, rows = 64;
    const std::vector<uint8_t> wbytes = test::encoded(codec, n, k, 12);
    const std::vector<float> x = test::gaussian(size_t(m * k), 13);
    DeviceVec<uint8_t> dw(wbytes);
    DeviceVec<float> dx(x), dall(size_t(m * n)), dpart(size_t(rows * n));
    DeviceVec<uint8_t> dscratch(cuda::matmul_tc_scratch_bytes(m, k));
    const cuda::DeviceMatrix dm{codec, dw.get(), n, k};
    cuda::matmul_tc(dx.get(), m, dm, dall.get(), false, nullptr, dscratch.get());
    cuda::matmul_tc(dx.get() + r0 * k, rows, dm, dpart.get(), false, nullptr, dscratch.get());
    const std::vector<float> all = dall.download(), part = dpart.download();
    ASSERT_EQ(0, std::memcmp(all.data() + r0 * n, part.data(), part.size() * sizeof(float))) << codec_name(codec);
  }
}

namespace {

// E experts as one blob each ([gate][up][down], 16-byte aligned parts) in codec c, on the host.
struct ExpertBlobs {
  cuda::ExpertLayout l;
  std::vector<uint8_t> bytes;
  ExpertBlobs(Codec c, int64_t H, int64_t I, int E) {
    l.gate_up = l.down = c;
    l.hidden = H;
    l.intermediate = I;
    const auto up16 = [](size_t b) { return (b + 15) / 16 * 16; };
    l.up_offset = up16(codec_matrix_bytes(c, I, H));
    l.down_offset = 2 * l.up_offset;
    l.bytes = up16(l.down_offset + codec_matrix_bytes(c, H, I));
    bytes.assign(size_t(E) * l.bytes, 0);
    for (int e = 0; e < E; ++e) {
      uint8_t* b = bytes.data() + size_t(e) * l.bytes;
      const auto g = test::encoded(c, I, H, 100 + e), u = test::encoded(c, I, H, 200 + e);
      const auto d = test::encoded(c, H, I, 300 + e);
      std::copy(g.begin(), g.end(), b);
      std::copy(u.begin(), u.end(), b + l.up_offset);
      std::copy(d.begin(), d.end(), b + l.down_offset);
    }
  }
  ops::Matrix gate(int e) const { return {l.gate_up, blob(e), l.intermediate, l.hidden}; }
  ops::Matrix up(int e) const { return {l.gate_up, blob(e) + l.up_offset, l.intermediate, l.hidden}; }
  ops::Matrix down(int e) const { return {l.down, blob(e) + l.down_offset, l.hidden, l.intermediate}; }
  const uint8_t* blob(int e) const { return bytes.data() + size_t(e) * l.bytes; }
};

// The device table of E experts, those with present(e) pointing into the device copy of the blobs.
template <typename P>
std::vector<const uint8_t*> table_of(const uint8_t* device_blobs, const cuda::ExpertLayout& l, int E, P present) {
  std::vector<const uint8_t*> t(static_cast<size_t>(E), nullptr);
  for (int e = 0; e < E; ++e) {
    if (present(e)) t[size_t(e)] = device_blobs + size_t(e) * l.bytes;
  }
  return t;
}

}  // namespace

// Uneven buckets (expert 0 with two tiles' worth of rows, expert 5 with none), an absent expert whose pairs stay
// poisoned, and shapes with partial tiles everywhere (I = 80: a partial gate/up column tile and, as down's k, a
// partial g64 block; H = 192: a partial down column tile). The seed codecs also at H = 200, I = 84: gate/up's k a
// partial s3 block and k-slice, down's k a partial p3/p4 block.
namespace {
// One case of the grouped products against the reference: c's experts of H x I, the products as the current kernel
// kind runs them, or carried to float32 (the float32 forward's).
void expect_grouped_near_reference(cuda::GemmKernel kernel, Codec c, int64_t H, int64_t I, bool float32) {
  const bool f16 = !float32 && runs_f16(kernel, c);
  // float32: x and the weights split into TF32 parts (gemm.h), each product within split(3)_bound
  const auto bound_of = [&](int64_t kk, double abs, double exact) {
    if (!float32) return tc_bound(kk, abs, exact);
    return c == Codec::BF16 || c == Codec::F16 ? split_bound(kk, abs, exact) : split3_bound(kk, abs, exact);
  };
  const int64_t m = 150;
  const int E = 6, k = 2, absent = 3;
  const ExpertBlobs blobs(c, H, I, E);
  std::vector<int> ids(size_t(m * k));
  for (int64_t i = 0; i < m; ++i) {
    ids[size_t(i * k)] = i < 140 ? 0 : 1;
    ids[size_t(i * k + 1)] = 2 + int(i % 3);
  }
  const std::vector<float> x = test::gaussian(size_t(m * H), 8);
  DeviceVec<uint8_t> db(blobs.bytes);
  DeviceVec<const uint8_t*> dt(table_of(db.get(), blobs.l, E, [&](int e) { return e != absent; }));
  DeviceVec<int> di(ids);
  DeviceVec<float> dx(x), dact(test::poisoned(size_t(m * k * I))), dout(test::poisoned(size_t(m * k * H)));
  DeviceVec<uint8_t> scratch(cuda::expert_gemm_scratch_bytes(m, k, E, blobs.l));
  cuda::expert_gate_up_tc(dx.get(), m, k, di.get(), dt.get(), E, blobs.l, dact.get(), scratch.get(), nullptr, {},
                          float32);
  cuda::expert_down_tc(dact.get(), m * k, di.get(), dt.get(), E, blobs.l, dout.get(), scratch.get(), nullptr, {},
                       float32);
  const std::vector<float> act = dact.download(), out = dout.download();
  Worst worst_act, worst_out;
  for (int64_t j = 0; j < m * k; ++j) {
    const int e = ids[size_t(j)];
    if (e == absent) {
      for (int64_t n = 0; n < I; ++n) ASSERT_EQ(act[size_t(j * I + n)], 1e30f) << "absent pair " << j;
      for (int64_t h = 0; h < H; ++h) ASSERT_EQ(out[size_t(j * H + h)], 1e30f) << "absent pair " << j;
      continue;
    }
    const ops::Matrix g = blobs.gate(e), u = blobs.up(e), d = blobs.down(e);
    const std::vector<float> gw = widened(g), uw = widened(u), dw = widened(d);
    const float* xr = x.data() + (j / k) * H;
    const std::vector<float> gv = reference(xr, 1, gw, I, H), uv = reference(xr, 1, uw, I, H);
    for (int64_t n = 0; n < I; ++n) {
      // act = silu(g) * u: |silu'| <= 1.1, |silu(g)| <= |g|, so errors eg, eu in g and u give at most
      // 1.1 eg |u| + |g| eu + 1.1 eg eu, and the float expf, divide and products 8 float ulps of the result.
      const double gx = gv[size_t(n)], ux = uv[size_t(n)];
      const float *gn = gw.data() + n * H, *un = uw.data() + n * H;
      const double eg = bound_of(H, abs_dot(xr, gn, H), gx) + (f16 ? f16_extra(xr, gn, H) : 0.0);
      const double eu = bound_of(H, abs_dot(xr, un, H), ux) + (f16 ? f16_extra(xr, un, H) : 0.0);
      const double want = gx / (1 + std::exp(-gx)) * ux;
      const double bound = 1.1 * eg * std::fabs(ux) + std::fabs(gx) * eu + 1.1 * eg * eu +
                           8 * std::ldexp(1.0, -24) * std::fabs(want) + 1e-30;
      const double err = std::fabs(act[size_t(j * I + n)] - want);
      worst_act.see(err, bound);
      ASSERT_LE(err, bound) << codec_name(c) << " pair " << j << " act " << n;
    }
    // down from the device's own activations, so only this product's rounding is measured.
    const float* aj = act.data() + j * I;
    const std::vector<float> dv = reference(aj, 1, dw, H, I);
    for (int64_t h = 0; h < H; ++h) {
      const float* dh = dw.data() + h * I;
      const double bound = bound_of(I, abs_dot(aj, dh, I), dv[size_t(h)]) + (f16 ? f16_extra(aj, dh, I) : 0.0);
      const double err = std::fabs(out[size_t(j * H + h)] - dv[size_t(h)]);
      worst_out.see(err, bound);
      ASSERT_LE(err, bound) << codec_name(c) << " pair " << j << " out " << h;
    }
  }
  std::printf("[ gemm ] grouped %s%s %s H %lld I %lld: worst error %.3f (gate_up) and %.3f (down) of the bound\n",
              kernel_name(kernel), float32 ? " float32" : "", std::string(codec_name(c)).c_str(), (long long)H,
              (long long)I, worst_act.ratio, worst_out.ratio);
}
}  // namespace

TEST(GemmTcGrouped, ExpertsMatchReferenceWithinTf32Bound) {
  SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<std::tuple<Codec, int64_t, int64_t>> cases;  // codec, H, I
  for (const Codec c : test::kCudaTcCodecs) cases.emplace_back(c, 192, 80);
  for (const Codec c : kSeedCodecs) cases.emplace_back(c, 200, 84);
  // GGUF's types at whole blocks: 192 x 96 for the 32-element ones (a partial down column tile, gate/up's outputs a
  // partial column tile, down's k a partial k-slice), 256 x 256 for the others.
  for (const Codec c : test::kGgmlCodecs) cases.emplace_back(c, test::whole_blocks(c, 192), test::whole_blocks(c, 80));
  for (const cuda::GemmKernel kernel : kKernels) {
    const UseKernel use(kernel);
    for (const auto& [c, H, I] : cases) {
      ASSERT_NO_FATAL_FAILURE(expect_grouped_near_reference(kernel, c, H, I, false));
    }
  }
}

// The same products carried to float32 (a hybrid model's prompt rows: forward_products.h), within split_bound (bf16,
// f16) or split3_bound (the others), on every tile.
TEST(GemmTcGrouped, ExpertsInFloat32MatchReferenceWithinTheSplitBounds) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const cuda::GemmKernel kernel : kKernels) {
    const UseKernel use(kernel);
    for (const Codec c : {Codec::BF16, Codec::F32, Codec::Q4_G64, Codec::P4, Codec::Q4_0, Codec::Q4_K}) {
      ASSERT_NO_FATAL_FAILURE(
          expect_grouped_near_reference(kernel, c, test::whole_blocks(c, 192), test::whole_blocks(c, 80), true));
    }
  }
}

namespace {
// m rows of k distinct experts of E each, shuffled by an mt19937 seeded with `seed`.
std::vector<int> distinct_routes(int64_t m, int k, int E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(size_t(m * k));
  for (int64_t i = 0; i < m; ++i) {
    std::vector<int> all(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int s = 0; s < k; ++s) ids[size_t(i * k + s)] = all[size_t(s)];
  }
  return ids;
}
}  // namespace

// gpt_oss's experts on tensor cores: the grouped GEMMs' epilogues add the tile's expert's gate/up biases before the
// clamped SwiGLU and its down bias after the product, against a double reference of the same formula. The bound:
// errors eg, eu in the gate and up sums (tc_bound) pass through (clamp(u) + 1) g' sigmoid(alpha g'), whose slopes are
// at most 1 + alpha |g| / 4 in g (times |u| + 1) and |g| in u, plus the float exp, divides and products.
TEST(GemmTcGrouped, ExpertBiasesAndClampedSwigluInTheEpiloguesMatchReference) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::BF16, Codec::Q4_G64}) {
    const int64_t H = 192, I = 80, m = 150;
    const int E = 6, k = 2;
    const ExpertBlobs blobs(c, H, I, E);
    const std::vector<int> ids = distinct_routes(m, k, E, 9);
    // x large enough that gate and up pass the clamp's limit (7) for some outputs.
    const std::vector<float> x = test::gaussian(size_t(m * H), 10, 8.0f), gb = test::gaussian(size_t(E * I), 11),
                             ub = test::gaussian(size_t(E * I), 12), db = test::gaussian(size_t(E * H), 13);
    DeviceVec<uint8_t> dblobs(blobs.bytes);
    DeviceVec<const uint8_t*> dt(table_of(dblobs.get(), blobs.l, E, [](int) { return true; }));
    DeviceVec<int> di(ids);
    DeviceVec<float> dx(x), dgb(gb), dub(ub), ddb(db), dact(test::poisoned(size_t(m * k * I))),
        dout(test::poisoned(size_t(m * k * H)));
    DeviceVec<uint8_t> scratch(cuda::expert_gemm_scratch_bytes(m, k, E, blobs.l));
    cuda::ExpertMath math;
    math.gate_bias = dgb.get();
    math.up_bias = dub.get();
    math.down_bias = ddb.get();
    math.clamped = true;
    cuda::expert_gemms_tc(dx.get(), m, k, di.get(), dt.get(), E, blobs.l, dact.get(), dout.get(), scratch.get(),
                          nullptr, math);
    const std::vector<float> act = dact.download(), out = dout.download();
    const bool f16 = runs_f16(cuda::GemmKernel::Mma, c);
    int clamped_outputs = 0;
    for (int64_t j = 0; j < m * k; ++j) {
      const int e = ids[size_t(j)];
      const std::vector<float> gw = widened(blobs.gate(e)), uw = widened(blobs.up(e)), dw = widened(blobs.down(e));
      const float* xr = x.data() + (j / k) * H;
      for (int64_t n = 0; n < I; ++n) {
        const float *gn = gw.data() + n * H, *un = uw.data() + n * H;
        double g = gb[size_t(e * I + n)], u = ub[size_t(e * I + n)];
        for (int64_t h = 0; h < H; ++h) {
          g += double(xr[h]) * gn[h];
          u += double(xr[h]) * un[h];
        }
        const double eg = tc_bound(H, abs_dot(xr, gn, H), g) + (f16 ? f16_extra(xr, gn, H) : 0.0) + 1e-6 * std::fabs(g);
        const double eu = tc_bound(H, abs_dot(xr, un, H), u) + (f16 ? f16_extra(xr, un, H) : 0.0) + 1e-6 * std::fabs(u);
        clamped_outputs += g > math.limit || std::fabs(u) > math.limit;
        const double gc = std::min(g, double(math.limit)), uc = std::clamp(u, -double(math.limit), double(math.limit));
        const double want = (uc + 1) * gc / (1 + std::exp(-math.alpha * gc));
        const double bound = (std::fabs(uc) + 1 + eu) * (1 + math.alpha * (std::fabs(gc) + eg) / 4) * eg +
                             (std::fabs(gc) + eg) * eu + 16 * std::ldexp(1.0, -24) * std::fabs(want) + 1e-30;
        ASSERT_LE(std::fabs(act[size_t(j * I + n)] - want), bound) << codec_name(c) << " pair " << j << " act " << n;
      }
      const float* aj = act.data() + j * I;
      const std::vector<float> dv = reference(aj, 1, dw, H, I);
      for (int64_t h = 0; h < H; ++h) {
        const float* dh = dw.data() + h * I;
        const double want = double(dv[size_t(h)]) + db[size_t(e * H + h)];
        const double bound = tc_bound(I, abs_dot(aj, dh, I), dv[size_t(h)]) + (f16 ? f16_extra(aj, dh, I) : 0.0) +
                             std::ldexp(1.0, -24) * (std::fabs(want) + std::fabs(dv[size_t(h)]));
        ASSERT_LE(std::fabs(out[size_t(j * H + h)] - want), bound) << codec_name(c) << " pair " << j << " out " << h;
      }
    }
    EXPECT_GT(clamped_outputs, 0) << "no output reached the clamp: the test would not see it";
  }
}

// expert_gemms_tc (gate/up then down, the pairs bucketed once when both take tiles of as many rows) gives the bits of
// expert_gate_up_tc then expert_down_tc, at sizes where the two picks agree and where they may not.
TEST(GemmTcGrouped, OneCallGivesTheTwoCallsBits) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const Codec c : {Codec::BF16, Codec::Q4_G64, Codec::P4}) {
    for (const int64_t m : {int64_t(100), int64_t(700)}) {
      const int64_t H = 256, I = 96;
      const int E = 16, k = 4;
      const ExpertBlobs blobs(c, H, I, E);
      const std::vector<int> ids = distinct_routes(m, k, E, 4);
      DeviceVec<uint8_t> db(blobs.bytes);
      DeviceVec<const uint8_t*> dt(table_of(db.get(), blobs.l, E, [](int) { return true; }));
      DeviceVec<int> di(ids);
      DeviceVec<float> dx(test::gaussian(size_t(m * H), 10));
      DeviceVec<uint8_t> scratch(cuda::expert_gemm_scratch_bytes(m, k, E, blobs.l));
      DeviceVec<float> act2(test::poisoned(size_t(m * k * I))), out2(test::poisoned(size_t(m * k * H)));
      DeviceVec<float> act1(test::poisoned(size_t(m * k * I))), out1(test::poisoned(size_t(m * k * H)));
      cuda::expert_gate_up_tc(dx.get(), m, k, di.get(), dt.get(), E, blobs.l, act2.get(), scratch.get(), nullptr);
      cuda::expert_down_tc(act2.get(), m * k, di.get(), dt.get(), E, blobs.l, out2.get(), scratch.get(), nullptr);
      cuda::expert_gemms_tc(dx.get(), m, k, di.get(), dt.get(), E, blobs.l, act1.get(), out1.get(), scratch.get(),
                            nullptr);
      const std::vector<float> a1 = act1.download(), a2 = act2.download(), o1 = out1.download(), o2 = out2.download();
      for (const float v : o1) ASSERT_NE(v, 1e30f) << codec_name(c) << " m " << m << ": a pair was not computed";
      ASSERT_EQ(a1, a2) << codec_name(c) << " m " << m;
      ASSERT_EQ(o1, o2) << codec_name(c) << " m " << m;
    }
  }
}

// The VRAM cache runs a layer's experts in passes over subsets of them: the even experts then the odd ones must give
// the very bits of one pass over all (and tiles there hold other rows than here).
TEST(GemmTcGrouped, PassesOverSubsetsOfExpertsGiveTheSameBits) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const cuda::GemmKernel kernel : kKernels) {
    const UseKernel use(kernel);
    for (const Codec c : {Codec::BF16, Codec::Q8_G32, Codec::Q4_G64, Codec::P3, Codec::P4, Codec::S3, Codec::Q8_0,
                          Codec::Q4_K, Codec::IQ4_XS}) {
      const int64_t H = 256, I = test::whole_blocks(c, 96), m = 300;
      const int E = 16, k = 4;
      const ExpertBlobs blobs(c, H, I, E);
      const std::vector<int> ids = distinct_routes(m, k, E, 3);
      const std::vector<float> x = test::gaussian(size_t(m * H), 9);
      DeviceVec<uint8_t> db(blobs.bytes);
      DeviceVec<int> di(ids);
      DeviceVec<float> dx(x);
      DeviceVec<uint8_t> scratch(cuda::expert_gemm_scratch_bytes(m, k, E, blobs.l));
      const auto run = [&](const std::vector<std::vector<const uint8_t*>>& passes) {
        DeviceVec<float> dact(test::poisoned(size_t(m * k * I))), dout(test::poisoned(size_t(m * k * H)));
        for (const auto& table : passes) {
          DeviceVec<const uint8_t*> dt(table);
          cuda::expert_gate_up_tc(dx.get(), m, k, di.get(), dt.get(), E, blobs.l, dact.get(), scratch.get(), nullptr);
          cuda::expert_down_tc(dact.get(), m * k, di.get(), dt.get(), E, blobs.l, dout.get(), scratch.get(), nullptr);
          cuda::check(cudaDeviceSynchronize(), "a pass");
        }
        return std::make_pair(dact.download(), dout.download());
      };
      const auto one = run({table_of(db.get(), blobs.l, E, [](int) { return true; })});
      const auto two = run({table_of(db.get(), blobs.l, E, [](int e) { return e % 2 == 0; }),
                            table_of(db.get(), blobs.l, E, [](int e) { return e % 2 == 1; })});
      for (const float v : one.first) ASSERT_NE(v, 1e30f) << "a pair was not computed";
      ASSERT_EQ(0, std::memcmp(one.first.data(), two.first.data(), one.first.size() * sizeof(float))) << codec_name(c);
      ASSERT_EQ(0, std::memcmp(one.second.data(), two.second.data(), one.second.size() * sizeof(float)))
          << codec_name(c);
    }
  }
}

}  // namespace seedling
