// The Gated DeltaNet kernels (cuda/gated_delta.cu) against the CPU ops they twin (ops/gated_delta.h: the conv step,
// l2_normalize, delta_gates, ops::ref::gated_delta_rule, ops::gated_delta_chunked), over several sequences in one
// launch, each with its own state, states carried from one call to the next; and gated attention's query split and
// sigmoid gate (row_ops.cu).
//
// Tolerances come from the arithmetic: the conv and the gates run in double on both sides (one float rounding apart,
// and the device's exp/log1p within an ulp of the C library's); the norms and the delta rule sum in float32 on the
// device and in double on the CPU, so they differ by float32 rounding of sums of at most key_dim + value_dim + 64
// terms, relative to the largest value (the state and outputs are sums of such terms).
#include "ops/gated_delta.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace seedling {

namespace {

using test::DeviceVec;
using test::relative_error;

constexpr double kU = 1.0 / 16777216.0;  // 2^-24, float32 unit roundoff

// relative_error over the entries the CPU wrote; where it wrote nothing (the poison stands) the kernel must not have
// written either.
double written_error(const std::vector<float>& got, const std::vector<float>& want) {
  std::vector<float> g, w;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == test::poisoned(1)[0]) {
      EXPECT_EQ(got[i], want[i]) << "written where the CPU wrote nothing, at " << i;
      continue;
    }
    g.push_back(got[i]);
    w.push_back(want[i]);
  }
  return relative_error(g, w);
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Sequences with their state arrays (a layer's state from s.state_offset, the floats before it a stand-in for other
// layers' states, which no kernel may touch), on the host (the CPU ops' copy) and on the device.
struct Sequences {
  cuda::DeltaShape s;
  size_t floats;
  std::vector<std::vector<float>> host;
  std::vector<DeviceVec<float>> device;
  Sequences(const cuda::DeltaShape& shape, int count, uint32_t seed)
      : s(shape),
        floats(shape.state_offset + shape.conv_floats() + size_t(shape.value_heads) * shape.key_dim * shape.value_dim) {
    for (int i = 0; i < count; ++i) {
      host.push_back(test::gaussian(floats, seed + uint32_t(i), 0.3f));  // a state left by earlier tokens
      device.emplace_back(host.back());
    }
  }
  float* conv_window(int seq) { return host[size_t(seq)].data() + s.state_offset; }
  float* head_state(int seq, int h) {
    return host[size_t(seq)].data() + s.state_offset + s.conv_floats() + size_t(h) * s.key_dim * s.value_dim;
  }
  // The device rows of a forward whose runs (in row order) belong to sequences seq[r] with lengths n[r].
  std::vector<cuda::DeltaRow> rows(const std::vector<int>& seq, const std::vector<int>& n) {
    std::vector<cuda::DeltaRow> out;
    for (size_t r = 0; r < seq.size(); ++r) {
      const int first = int(out.size());
      for (int t = 0; t < n[r]; ++t) out.push_back({device[size_t(seq[r])].get(), first, n[r]});
    }
    return out;
  }
  // Every state array, device and host, equal within tol relative to the largest, and the floats outside this
  // layer's state exactly as they were on the host (both sides leave them alone).
  void expect_states_near(double tol, const std::string& what) {
    for (size_t i = 0; i < host.size(); ++i) {
      const std::vector<float> got = device[i].download();
      for (size_t j = 0; j < s.state_offset; ++j) ASSERT_EQ(got[j], host[i][j]) << what << " seq " << i << " at " << j;
      EXPECT_LE(relative_error(got, host[i]), tol) << what << " seq " << i;
    }
  }
};

// qkv rows as the mixer makes them: q and k L2-normalised per key head (q also scaled), v as it comes; gates as
// delta_gates makes them (g <= 0 with decays in (0.6, 1], so the state remembers across chunks; beta in (0, 1)).
struct DeltaInputs {
  std::vector<float> qkv, g, beta;
  DeltaInputs(const cuda::DeltaShape& s, int64_t m, uint32_t seed) {
    const int64_t C = s.channels(), KW = int64_t(s.key_heads) * s.key_dim;
    qkv = test::gaussian(size_t(m * C), seed);
    for (int64_t i = 0; i < m; ++i) {
      for (int h = 0; h < s.key_heads; ++h) {
        ops::l2_normalize(qkv.data() + i * C + h * s.key_dim, s.key_dim, 1e-6f, 1.0f / std::sqrt(float(s.key_dim)));
        ops::l2_normalize(qkv.data() + i * C + KW + h * s.key_dim, s.key_dim, 1e-6f, 1.0f);
      }
    }
    g = uniform(size_t(m * s.value_heads), seed + 1, -0.5f, 0.0f);
    beta = uniform(size_t(m * s.value_heads), seed + 2, 0.0f, 1.0f);
  }
  // Value head h of rows [first, first + n) as the CPU ops read them, out into `out` (m x value width).
  ops::DeltaRun run(const cuda::DeltaShape& s, int h, int first, int n, float* out) const {
    const int64_t C = s.channels(), KW = int64_t(s.key_heads) * s.key_dim;
    const int kh = h / (s.value_heads / s.key_heads);
    ops::DeltaRun r;
    r.q = qkv.data() + first * C + kh * s.key_dim;
    r.k = qkv.data() + first * C + KW + kh * s.key_dim;
    r.v = qkv.data() + first * C + 2 * KW + int64_t(h) * s.value_dim;
    r.g = g.data() + first * s.value_heads + h;
    r.beta = beta.data() + first * s.value_heads + h;
    r.out = out + first * int64_t(s.value_heads) * s.value_dim + int64_t(h) * s.value_dim;
    r.q_stride = r.k_stride = r.v_stride = C;
    r.gb_stride = s.value_heads;
    r.out_stride = int64_t(s.value_heads) * s.value_dim;
    r.n = n;
    return r;
  }
  // The decode kernel (chunked: the chunked one, value_cols as gated_delta_chunked's; any_dims as
  // gated_delta_decode's) over these inputs on the device, for the listed rows (chunked: the first rows of the runs) of
  // `rows`: its output (rows x value width), poisoned where it wrote nothing.
  std::vector<float> on_device(bool chunked, const std::vector<int>& listed, const std::vector<cuda::DeltaRow>& rows,
                               const cuda::DeltaShape& s, int value_cols = 0, bool any_dims = false) const {
    DeviceVec<float> dqkv(qkv), dg(g), dbeta(beta), dout(test::poisoned(rows.size() * s.value_heads * s.value_dim));
    DeviceVec<cuda::DeltaRow> drows(rows);
    DeviceVec<int> dids(listed);
    const int64_t n = int64_t(listed.size());
    if (chunked) {
      cuda::gated_delta_chunked(dqkv.get(), dg.get(), dbeta.get(), dids.get(), n, drows.get(), s, dout.get(), nullptr,
                                value_cols);
    } else {
      cuda::gated_delta_decode(dqkv.get(), dg.get(), dbeta.get(), dids.get(), n, drows.get(), s, dout.get(), nullptr,
                               any_dims);
    }
    return dout.download();
  }
};

// Runs of `lengths` rows of three sequences (first rows `firsts`) through the decode (every length 1) or the chunked
// kernel, all in one launch and the middle one alone, from the same states: the middle one's output and state bits
// are the same.
void expect_same_bits_alone_and_batched(bool chunked, const cuda::DeltaShape& s, const std::vector<int>& lengths,
                                        const std::vector<int>& firsts) {
  const int64_t VW = int64_t(s.value_heads) * s.value_dim;
  Sequences batched(s, 3, 5), alone(s, 3, 5);
  const int m = std::accumulate(lengths.begin(), lengths.end(), 0);
  const DeltaInputs in(s, m, 9);
  const std::vector<float> b = in.on_device(chunked, firsts, batched.rows({0, 1, 2}, lengths), s),
                           a = in.on_device(chunked, {firsts[1]}, alone.rows({0, 1, 2}, lengths), s);
  EXPECT_TRUE(
      std::equal(b.begin() + firsts[1] * VW, b.begin() + (firsts[1] + lengths[1]) * VW, a.begin() + firsts[1] * VW));
  EXPECT_EQ(batched.device[1].download(), alone.device[1].download());
}

// A vector's bytes, to compare bits (NaN poison included).
std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

cuda::DeltaShape shape_of(int key_dim, int value_dim, size_t offset) {
  return {.key_heads = 2,
          .value_heads = 4,
          .key_dim = key_dim,
          .value_dim = value_dim,
          .conv_kernel = 4,
          .state_offset = offset};
}

}  // namespace

// Runs shorter than, as long as and longer than the window (kernel - 1 = 3), twice, so each second call starts from
// the window the first left: each row is the CPU's step on its own sequence's window, and the windows end the same.
TEST(CudaGatedDelta, ConvOfEachRunThroughItsSequencesWindowIsTheCpuStepRowByRow) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t C = 37;
  const int K = 4;
  const cuda::DeltaShape s{
      .key_heads = 1, .value_heads = 1, .key_dim = 9, .value_dim = 19, .conv_kernel = K, .state_offset = 5};
  ASSERT_EQ(s.channels(), C);
  Sequences seqs(s, 5, 11);
  const std::vector<float> w = test::gaussian(size_t(C * K), 1, 0.5f);
  DeviceVec<float> dw(w);
  const std::vector<int> order = {3, 0, 4, 1, 2}, lengths = {1, 2, 3, 5, 1};
  for (int call = 0; call < 2; ++call) {
    const std::vector<cuda::DeltaRow> rows = seqs.rows(order, lengths);
    const int64_t M = int64_t(rows.size());
    const std::vector<float> x = test::gaussian(size_t(M * C), uint32_t(20 + call), 2.0f);
    std::vector<float> want(x.size());
    int64_t i = 0;
    for (size_t r = 0; r < order.size(); ++r) {
      for (int t = 0; t < lengths[r]; ++t, ++i) {
        ops::causal_conv1d_silu_step(x.data() + i * C, seqs.conv_window(order[r]), w.data(), int(C), K,
                                     want.data() + i * C);
      }
    }
    DeviceVec<float> dx(x), dout(test::poisoned(x.size()));
    DeviceVec<cuda::DeltaRow> drows(rows);
    cuda::causal_conv1d_silu(dx.get(), M, dw.get(), drows.get(), C, K, s.state_offset, dout.get(), nullptr);
    const std::vector<float> got = dout.download();
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_NEAR(got[j], want[j], 2 * kU * std::fabs(want[j]) + 1e-12) << "call " << call << " at " << j;
    }
    for (size_t q = 0; q < seqs.host.size(); ++q) {
      ASSERT_EQ(seqs.device[q].download(), seqs.host[q]) << "call " << call << ": the window of sequence " << q;
    }
  }
}

TEST(CudaGatedDelta, L2NormOfQAndKHeadsIsTheCpuOpAndLeavesVAlone) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const int dim : {16, 128}) {
    const int NK = 3, heads = 2 * NK;
    const int64_t rows = 4, stride = int64_t(heads) * dim + 40;  // 40 floats of v after q and k
    const float scale = 1.0f / std::sqrt(float(dim));
    const std::vector<float> x = test::gaussian(size_t(rows * stride), 3, 2.0f);
    std::vector<float> want = x;
    for (int64_t i = 0; i < rows; ++i) {
      for (int h = 0; h < heads; ++h)
        ops::l2_normalize(want.data() + i * stride + h * dim, dim, 1e-6f, h < NK ? scale : 1);
    }
    DeviceVec<float> dx(x);
    cuda::l2_normalize_heads(dx.get(), rows, stride, heads, dim, NK, scale, 1e-6f, nullptr);
    const std::vector<float> got = dx.download();
    for (size_t j = 0; j < got.size(); ++j) {
      if (int64_t(j) % stride >= int64_t(heads) * dim) {
        ASSERT_EQ(got[j], x[j]) << "v, at " << j;
        continue;
      }
      // The sum of squares in float (relative dim * u), its root and inverse, two products.
      ASSERT_NEAR(got[j], want[j], (dim + 8) * kU * std::fabs(want[j])) << "dim " << dim << " at " << j;
    }
  }
}

TEST(CudaGatedDelta, GatesAreTheCpuOps) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t rows = 7;
  const int heads = 6;
  std::vector<float> b = test::gaussian(size_t(rows * heads), 1, 3.0f),
                     a = test::gaussian(size_t(rows * heads), 2, 3.0f);
  const std::vector<float> a_log = test::gaussian(size_t(heads), 3), dt_bias = test::gaussian(size_t(heads), 4);
  a[0] = 25.0f;  // softplus past 20: the value itself
  std::vector<float> beta(b.size()), g(b.size());
  ops::delta_gates(b.data(), a.data(), a_log.data(), dt_bias.data(), rows, heads, beta.data(), g.data());
  DeviceVec<float> db(b), da(a), dl(a_log), dd(dt_bias), dbeta(test::poisoned(b.size())), dg(test::poisoned(b.size()));
  cuda::delta_gates(db.get(), da.get(), dl.get(), dd.get(), rows, heads, dbeta.get(), dg.get(), nullptr);
  const std::vector<float> got_beta = dbeta.download(), got_g = dg.download();
  for (size_t i = 0; i < b.size(); ++i) {
    ASSERT_NEAR(got_beta[i], beta[i], 4 * kU * std::fabs(beta[i])) << i;  // expf within 2 ulp, a sum, a quotient
    ASSERT_NEAR(got_g[i], g[i], 2 * kU * std::fabs(g[i])) << i;           // double on both sides, one rounding
  }
}

// qwen3_next's grouped rows put in order as ops::ungroup_qkvz_ba puts them (the values encode their source, so a
// misplaced one is seen), every output written.
TEST(CudaGatedDelta, UngroupPutsQwen3NextsGroupedRowsInOrderAsTheCpuOp) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::DeltaShape s{.key_heads = 2, .value_heads = 6, .key_dim = 4, .value_dim = 5, .conv_kernel = 4};
  const int64_t m = 3, C = s.channels(), VW = 30, NV = 6;
  std::vector<float> qkvz(size_t(m * (C + VW))), ba(size_t(m * 2 * NV));
  for (size_t i = 0; i < qkvz.size(); ++i) qkvz[i] = float(i);
  for (size_t i = 0; i < ba.size(); ++i) ba[i] = -1.0f - float(i);
  std::vector<float> mixed(size_t(m * C)), z(size_t(m * VW)), b(size_t(m * NV)), a(size_t(m * NV));
  ops::ungroup_qkvz_ba(qkvz.data(), ba.data(), m, s.key_heads, s.value_heads, s.key_dim, s.value_dim, mixed.data(),
                       z.data(), b.data(), a.data());
  DeviceVec<float> dqkvz(qkvz), dba(ba), dmixed(test::poisoned(mixed.size())), dz(test::poisoned(z.size())),
      db(test::poisoned(b.size())), da(test::poisoned(a.size()));
  cuda::gated_delta_ungroup(dqkvz.get(), dba.get(), m, s, dmixed.get(), dz.get(), db.get(), da.get(), nullptr);
  EXPECT_EQ(dmixed.download(), mixed);
  EXPECT_EQ(dz.download(), z);
  EXPECT_EQ(db.download(), b);
  EXPECT_EQ(da.download(), a);
}

// Decode rows, each its own sequence (listed in another order than their sequences), four steps: each row's output
// and state are the recurrent rule's on that sequence's state; on the last step one row only is listed, and the
// others' outputs and states are left alone. Head dims: the tiny checkpoints' 16, uneven ones, Qwen3-Next's 128.
TEST(CudaGatedDelta, DecodeStepOfEachRowIsTheRecurrentRuleOnItsOwnState) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [dk, dv] : {std::pair{16, 16}, std::pair{16, 24}, std::pair{64, 40}, std::pair{128, 128}}) {
    const cuda::DeltaShape s = shape_of(dk, dv, 7);
    const int NV = s.value_heads;
    const int64_t VW = int64_t(NV) * dv;
    Sequences seqs(s, 3, uint32_t(dk + dv));
    const std::vector<int> order = {2, 0, 1};  // row i belongs to sequence order[i]
    const std::vector<cuda::DeltaRow> rows = seqs.rows(order, {1, 1, 1});
    for (int step = 0; step < 4; ++step) {
      const std::vector<int> listed = step < 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{1};
      const DeltaInputs in(s, 3, uint32_t(100 + step));
      std::vector<float> want = test::poisoned(size_t(3 * VW));
      for (const int row : listed) {
        for (int h = 0; h < NV; ++h) {
          ops::ref::gated_delta_rule(in.run(s, h, row, 1, want.data()), dk, dv, seqs.head_state(order[size_t(row)], h));
        }
      }
      const std::vector<float> got = in.on_device(false, listed, rows, s);
      const std::string what =
          "dk " + std::to_string(dk) + " dv " + std::to_string(dv) + " step " + std::to_string(step);
      for (int row = 0; row < 3; ++row) {
        const std::vector<float> g(got.begin() + row * VW, got.begin() + (row + 1) * VW),
            w(want.begin() + row * VW, want.begin() + (row + 1) * VW);
        if (std::find(listed.begin(), listed.end(), row) == listed.end()) {
          EXPECT_EQ(g, w) << what << ": row " << row << " is not listed, its output must stay unwritten";
          continue;
        }
        // Float32 sums of key_dim terms, a few steps of state carried (measured in a CPU emulation of the kernel: 3e-7
        // at key_dim 16 and 128).
        EXPECT_LE(relative_error(g, w), 2 * (dk + 8) * kU * (step + 1)) << what << " row " << row;
      }
      seqs.expect_states_near(2 * (dk + 8) * kU * (step + 1), what);
    }
  }
}

// A row decoded in a batch of three and alone, from the same states: the same output and state bits.
TEST(CudaGatedDelta, DecodeRowGivesTheSameBitsAloneAndBatched) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_same_bits_alone_and_batched(false, shape_of(128, 128, 0), {1, 1, 1}, {0, 1, 2});
}

// 128 x 128 heads: the kernel that holds a state column in registers and the kernel for any dims, from the same
// states, four steps (the last with one row listed): every output and state bit the same.
TEST(CudaGatedDelta, DecodeOf128HeadsGivesTheBitsOfTheKernelForAnyDims) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::DeltaShape s = shape_of(128, 128, 5);
  Sequences fast(s, 3, 31), any(s, 3, 31);
  const std::vector<int> order = {2, 0, 1};
  for (int step = 0; step < 4; ++step) {
    const DeltaInputs in(s, 3, uint32_t(40 + step));
    const std::vector<int> listed = step < 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{1};
    const std::vector<float> a = in.on_device(false, listed, fast.rows(order, {1, 1, 1}), s),
                             b = in.on_device(false, listed, any.rows(order, {1, 1, 1}), s, 0, true);
    EXPECT_TRUE(bytes_of(a) == bytes_of(b)) << "outputs at step " << step;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(bytes_of(fast.device[i].download()) == bytes_of(any.device[i].download()))
          << "state of sequence " << i << " at step " << step;
    }
  }
}

// The chunked form over runs of n = 1, 63, 64, 65 and 200 rows (within a chunk, exactly one, one past, several) beside
// runs of other sequences (65 and 3 rows) and a decode row of a fourth that is not listed (its output stays unwritten,
// its state untouched), then a second call from the states the first left (runs of 37, n and 64): every output and
// state is ops::gated_delta_chunked's (chunks of 64) on the same states.
TEST(CudaGatedDelta, ChunkedIsTheCpuChunkedFormAcrossChunkBoundariesAndCarriedStates) {
  SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [dk, dv] : {std::pair{16, 24}, std::pair{128, 128}}) {
    if (!cuda::gated_delta_chunked_fits(dk, dv)) GTEST_SKIP() << "this GPU's shared memory holds no chunk of " << dk;
    for (const int n : {1, 63, 64, 65, 200}) {
      const cuda::DeltaShape s = shape_of(dk, dv, 3);
      const int NV = s.value_heads;
      Sequences seqs(s, 4, uint32_t(n));
      for (int call = 0; call < 2; ++call) {
        const std::vector<int> order = {0, 3, 1, 2};
        const std::vector<int> lengths = call == 0 ? std::vector<int>{n, 1, 65, 3} : std::vector<int>{37, 1, n, 64};
        const std::vector<cuda::DeltaRow> rows = seqs.rows(order, lengths);
        const int64_t M = int64_t(rows.size());
        std::vector<int> runs;  // the first rows of the runs of sequences 0, 1, 2 (not the decode row of sequence 3)
        const DeltaInputs in(s, M, uint32_t(1000 * call + n));
        std::vector<float> want = test::poisoned(size_t(M * NV * dv));
        for (size_t r = 0, first = 0; r < order.size(); first += size_t(lengths[r]), ++r) {
          if (order[r] == 3) continue;
          runs.push_back(int(first));
          for (int h = 0; h < NV; ++h) {
            ops::gated_delta_chunked(in.run(s, h, int(first), lengths[r], want.data()), dk, dv,
                                     seqs.head_state(order[r], h), cuda::kDeltaChunk);
          }
        }
        const std::vector<float> got = in.on_device(true, runs, rows, s);
        const std::string what =
            "dk " + std::to_string(dk) + " n " + std::to_string(n) + " call " + std::to_string(call);
        // Float32 sums of at most dk + dv + 64 terms in each of the chunk's stages (a CPU emulation of the kernel
        // measured 6e-7 at most, key_dim 16 to 128); the unlisted row's output stays unwritten.
        const double tol = 2 * (dk + dv + cuda::kDeltaChunk) * kU;
        EXPECT_LE(written_error(got, want), tol) << what;
        seqs.expect_states_near(tol, what);
      }
    }
  }
}

// A run computed beside others and alone, from the same states: the same output and state bits.
TEST(CudaGatedDelta, ChunkedRunGivesTheSameBitsAloneAndBatched) {
  SKIP_WITHOUT_CUDA_DEVICE();
  expect_same_bits_alone_and_batched(true, shape_of(16, 24, 0), {70, 130, 9}, {0, 70, 200});
}

// A head's value columns in one block, in blocks of 32 (what a single prompt on a large GPU gets), of 48 (the last
// block narrower) and of 1: every output and state bit the same (each column's sums read only that column, and each
// block computes the chunk's A, QK and W in the same order).
TEST(CudaGatedDelta, ChunkedGivesTheSameBitsWhateverTheValueColumnsOfABlock) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const cuda::DeltaShape s = shape_of(128, 128, 5);
  if (!cuda::gated_delta_chunked_fits(s.key_dim, s.value_dim)) GTEST_SKIP() << "no chunk of 128 fits";
  const std::vector<int> lengths = {200, 65, 3};
  const DeltaInputs in(s, 268, 21);
  std::vector<std::string> first;
  for (const int cols : {128, 32, 48, 1}) {
    Sequences seqs(s, 3, 11);
    std::vector<std::string> got = {
        bytes_of(in.on_device(true, {0, 200, 265}, seqs.rows({0, 1, 2}, lengths), s, cols))};
    for (auto& d : seqs.device) got.push_back(bytes_of(d.download()));
    if (first.empty()) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i] == first[i]) << (i == 0 ? "output" : "state of sequence " + std::to_string(i - 1)) << " at "
                                      << cols << " columns a block";
    }
  }
}

// Gated attention: q_proj's rows split per head into the query and its gate, and the attention output times
// sigmoid(gate) as decoder.cpp computes it.
TEST(CudaGatedDelta, GatedAttentionSplitsTheQueryAndGatesTheOutputAsTheCpu) {
  SKIP_WITHOUT_CUDA_DEVICE();
  const int64_t m = 3;
  const int heads = 4, hd = 32, Q = heads * hd;
  const std::vector<float> qg = test::gaussian(size_t(m * 2 * Q), 1, 2.0f), att = test::gaussian(size_t(m * Q), 2);
  std::vector<float> q(size_t(m * Q)), gate(q.size()), gated(q.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int h = 0; h < heads; ++h) {
      const float* src = qg.data() + i * 2 * Q + int64_t(h) * 2 * hd;
      std::copy_n(src, hd, q.data() + i * Q + h * hd);
      std::copy_n(src + hd, hd, gate.data() + i * Q + h * hd);
    }
  }
  for (size_t i = 0; i < att.size(); ++i) gated[i] = att[i] * ops::sigmoid(gate[i]);
  DeviceVec<float> dqg(qg), dq(test::poisoned(q.size())), dgate(test::poisoned(q.size())), datt(att);
  cuda::split_gated_query(dqg.get(), m, heads, hd, dq.get(), dgate.get(), nullptr);
  EXPECT_EQ(dq.download(), q);
  EXPECT_EQ(dgate.download(), gate);
  cuda::mul_sigmoid(datt.get(), dgate.get(), m * Q, nullptr);
  const std::vector<float> got = datt.download();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], gated[i], 4 * kU * std::fabs(gated[i])) << i;
}

}  // namespace seedling
