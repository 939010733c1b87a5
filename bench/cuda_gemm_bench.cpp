// bench/cuda_gemm_bench.cpp - the tensor-core GEMMs (cuda/gemm.h) (N: mma.sync as the default runs it, picking its
// tile, f16 for these q4_g64 weights; L and S: the same forced to 128 x 128 and 64 x 64 tiles; O: the TF32 mma
// kernel, SEEDLING_GEMM=tf32, the f16 kernel's baseline),
// against the CUDA-core kernels (C: cuda/kernels.h) at issue 8's prompt shapes (Qwen3-30B-A3B, q4_g64), in one run:
// arms interleaved N L S O C C O S L N, TFLOP/s (median, min, max) against the tensor-core ceiling of the device,
// N's speed over O's, and how far N's and O's outputs are from C's. Then the grouped experts with seed weights on
// the default kernel (p3, p4, s3 against q4_g64, and p4 on CUDA cores, the path seed experts took before the
// tensor-core GEMMs read seeds): arms interleaved Q P3 P4 S3 Pc Pc S3 P4 P3 Q, TFLOP/s and each seed arm's time
// over Q's, and how far each seed arm's output is from its codec's CUDA-core output.
// Usage: build/bench/cuda_gemm_bench [repeats] [all|seeds]   (default 5, all; needs a CUDA device)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "codec/quantize.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda_bench_util.h"

using namespace seedling;
using bench::gaussian;
using bench::matrix_bytes;
using bench::stats;
using bench::Stats;
using bench::timed;

namespace {

std::vector<uint8_t> q4_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = gaussian(size_t(rows * cols), seed, 0.05f);
  std::vector<uint8_t> out(codec_matrix_bytes(Codec::Q4_G64, rows, cols));
  encode_matrix(Codec::Q4_G64, DType::F32, w.data(), rows, cols, out.data());
  return out;
}

template <typename T>
T* device_copy(const std::vector<T>& v) {
  void* p = nullptr;
  cuda::check(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)), "bench alloc");
  cuda::check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "bench upload");
  return static_cast<T*>(p);
}

float* device_floats(size_t n) {
  void* p = nullptr;
  cuda::check(cudaMalloc(&p, n * sizeof(float)), "bench alloc");
  cuda::check(cudaMemset(p, 0, n * sizeof(float)), "bench clear");
  return static_cast<float*>(p);
}

// max |a - b| / max |b| over two device arrays of n floats.
double rel_diff(const float* a, const float* b, size_t n) {
  std::vector<float> ha(n), hb(n);
  cuda::check(cudaMemcpy(ha.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost), "bench download");
  cuda::check(cudaMemcpy(hb.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost), "bench download");
  double d = 0, s = 0;
  for (size_t i = 0; i < n; ++i) {
    d = std::max(d, double(std::fabs(ha[i] - hb[i])));
    s = std::max(s, double(std::fabs(hb[i])));
  }
  return d / s;
}

// Whether two arms write the same bits into y (n floats): L and S must (gemm.h).
bool same_bits(const std::function<void()>& a, const std::function<void()>& b, const float* y, size_t n,
               cudaStream_t s) {
  std::vector<float> ha(n), hb(n);
  a();
  cuda::check(cudaStreamSynchronize(s), "bench run");
  cuda::check(cudaMemcpy(ha.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost), "bench download");
  b();
  cuda::check(cudaStreamSynchronize(s), "bench run");
  cuda::check(cudaMemcpy(hb.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost), "bench download");
  return std::memcmp(ha.data(), hb.data(), n * sizeof(float)) == 0;
}

// The arms of a row, in the order N L S O C (see the file comment).
struct Arms {
  std::function<void()> n, l, s, o, c;
};

// The arms interleaved N L S O C C O S L N `repeats` times after one warm-up each; TFLOP/s, and N's speed over O's
// per repeat.
void compare(const char* name, double flops, const Arms& arms, int repeats, double peak_tf32, cudaStream_t s,
             double diff_n, double diff_o, bool l_is_s) {
  const std::function<void()>* order[] = {&arms.n, &arms.l, &arms.s, &arms.o, &arms.c};
  for (const auto* f : order) timed(*f, s);
  std::vector<double> t[5], ratio;
  for (int r = 0; r < repeats; ++r) {
    double sec[2][5];
    for (int i = 0; i < 5; ++i) sec[0][i] = timed(*order[i], s);
    for (int i = 4; i >= 0; --i) sec[1][i] = timed(*order[i], s);
    for (int i = 0; i < 5; ++i) {
      for (int h = 0; h < 2; ++h) t[i].push_back(flops / sec[h][i] / 1e12);
    }
    ratio.push_back((sec[0][3] + sec[1][3]) / (sec[0][0] + sec[1][0]));
  }
  const Stats n = stats(t[0]), l = stats(t[1]), sm = stats(t[2]), o = stats(t[3]), c = stats(t[4]), sr = stats(ratio);
  std::printf(
      "%-34s | %7.2f (%6.2f-%6.2f) %5.1f%% | %7.2f | %7.2f | %7.2f (%6.2f-%6.2f) %5.1f%% | %6.3f | %5.2fx "
      "(%4.2f-%4.2f) | %.1e | %.1e | %s\n",
      name, n.med, n.lo, n.hi, 100 * n.med / peak_tf32, l.med, sm.med, o.med, o.lo, o.hi, 100 * o.med / peak_tf32,
      c.med, sr.med, sr.lo, sr.hi, diff_n, diff_o, l_is_s ? "same" : "DIFFERENT");
}

// E experts in codec c (gate and up I x H, down H x I, parts 256-aligned) on the device: `distinct` experts made by
// make(rows, cols, seed), copied round to E (the products' work does not depend on the values), and the device
// table of their blobs.
struct DeviceExperts {
  cuda::ExpertLayout l;
  uint8_t* blobs = nullptr;
  const uint8_t* const* table = nullptr;
};
DeviceExperts device_experts(Codec c, int64_t H, int64_t I, int E, int distinct,
                             const std::function<std::vector<uint8_t>(int64_t, int64_t, uint32_t)>& make) {
  DeviceExperts d;
  cuda::ExpertLayout& l = d.l;
  l.gate_up = l.down = c;
  l.hidden = H;
  l.intermediate = I;
  l.up_offset = (codec_matrix_bytes(c, I, H) + 255) / 256 * 256;
  l.down_offset = 2 * l.up_offset;
  l.bytes = (l.down_offset + codec_matrix_bytes(c, H, I) + 255) / 256 * 256;
  cuda::check(cudaMalloc(&d.blobs, size_t(E) * l.bytes), "bench alloc");
  for (int e = 0; e < distinct; ++e) {
    std::vector<uint8_t> b(l.bytes, 0);
    const auto g = make(I, H, uint32_t(10 + e)), u = make(I, H, uint32_t(20 + e)), dn = make(H, I, uint32_t(30 + e));
    std::copy(g.begin(), g.end(), b.begin());
    std::copy(u.begin(), u.end(), b.begin() + long(l.up_offset));
    std::copy(dn.begin(), dn.end(), b.begin() + long(l.down_offset));
    cuda::check(cudaMemcpy(d.blobs + size_t(e) * l.bytes, b.data(), l.bytes, cudaMemcpyHostToDevice), "upload");
  }
  for (int e = distinct; e < E; ++e) {
    cuda::check(cudaMemcpy(d.blobs + size_t(e) * l.bytes, d.blobs + size_t(e % distinct) * l.bytes, l.bytes,
                           cudaMemcpyDeviceToDevice),
                "copy");
  }
  std::vector<const uint8_t*> table(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) table[size_t(e)] = d.blobs + size_t(e) * l.bytes;
  d.table = device_copy(table);
  return d;
}

// Random routes on the device: m rows of k distinct experts of E (the same routes every run).
const int* device_routes(int64_t m, int k, int E) {
  std::mt19937 rng(5);
  std::vector<int> ids(size_t(m * k)), all(static_cast<size_t>(E));
  for (int64_t i = 0; i < m; ++i) {
    for (int e = 0; e < E; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < k; ++j) ids[size_t(i * k + j)] = all[size_t(j)];
  }
  return device_copy(ids);
}

// The grouped experts with seed weights (see the file comment) at 512 and 2048 rows, top-8 of 128 experts, H 2048,
// I 768: arms Q (q4_g64), P3, P4, S3 on the default tensor-core kernel and Pc (p4 on CUDA cores), interleaved
// Q P3 P4 S3 Pc Pc S3 P4 P3 Q `repeats` times after a warm-up each.
void bench_seed_experts(const float* x, int repeats, double peak_tf32, cudaStream_t s) {
  const int64_t H = 2048, I = 768, most = 2048;
  const int E = 128, k = 8, distinct = 4;
  const Codec codecs[] = {Codec::Q4_G64, Codec::P3, Codec::P4, Codec::S3};
  DeviceExperts ex[4];
  for (int i = 0; i < 4; ++i) {
    ex[i] = device_experts(codecs[i], H, I, E, distinct, [&](int64_t rows, int64_t cols, uint32_t seed) {
      std::mt19937 rng(seed);
      return matrix_bytes(codecs[i], rows, cols, rng);
    });
  }
  float* act = device_floats(size_t(most * k * I));
  float* y = device_floats(size_t(most * k * H));
  float* act_c = device_floats(size_t(most * k * I));
  float* y_c = device_floats(size_t(most * k * H));
  void* scratch = nullptr;
  cuda::check(cudaMalloc(&scratch, cuda::expert_gemm_scratch_bytes(most, k, E, ex[0].l)), "bench alloc");
  cuda::use_gemm_kernel(cuda::GemmKernel::Mma);
  std::printf(
      "\nseed experts on tensor cores (mma.sync, its own tile pick): %d x (Q P3 P4 S3 Pc Pc S3 P4 P3 Q); TFLOP/s "
      "median (min-max) and share of the TF32 ceiling; Q = q4_g64; Pc = p4 on CUDA cores (float32); time over Q's "
      "per repeat, median (min-max); seed vs CUDA cores: max|TC-C|/max|C| of the same codec's output\n\n",
      repeats);
  std::printf("%-30s | %-4s | %-29s | %-18s | %s\n", "shape", "arm", "TFLOP/s", "time over Q", "vs CUDA cores");
  for (const int64_t m : {int64_t(512), most}) {
    const int* di = device_routes(m, k, E);
    std::function<void()> arms[5];
    for (int i = 0; i < 4; ++i) {
      arms[i] = [&, i] {
        cuda::expert_gate_up_tc(x, m, k, di, ex[i].table, E, ex[i].l, act, scratch, s);
        cuda::expert_down_tc(act, m * k, di, ex[i].table, E, ex[i].l, y, scratch, s);
      };
    }
    const auto cores = [&](int i) {
      cuda::expert_gate_up(x, m, k, di, ex[i].table, E, ex[i].l, act_c, s);
      cuda::expert_down(act_c, m * k, di, ex[i].table, ex[i].l, y_c, s);
    };
    arms[4] = [&] { cores(2); };
    // Each seed arm's output against its codec's CUDA-core output (untimed).
    double diff[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) {
      arms[i]();
      cores(i);
      cuda::check(cudaStreamSynchronize(s), "bench run");
      diff[i] = rel_diff(y, y_c, size_t(m * k * H));
    }
    for (const auto& f : arms) timed(f, s);
    std::vector<double> t[5], over[5];
    for (int r = 0; r < repeats; ++r) {
      double sec[2][5];
      for (int i = 0; i < 5; ++i) sec[0][i] = timed(arms[i], s);
      for (int i = 4; i >= 0; --i) sec[1][i] = timed(arms[i], s);
      const double flops = double(m * k) * 6.0 * double(H) * double(I);
      for (int i = 0; i < 5; ++i) {
        for (int h = 0; h < 2; ++h) t[i].push_back(flops / sec[h][i] / 1e12);
        over[i].push_back((sec[0][i] + sec[1][i]) / (sec[0][0] + sec[1][0]));
      }
    }
    const char* names[] = {"Q", "P3", "P4", "S3", "Pc"};
    for (int i = 0; i < 5; ++i) {
      const Stats a = stats(t[i]), o = stats(over[i]);
      char shape[64];
      std::snprintf(shape, sizeof shape, "experts gate_up+down, %lld x top-8", (long long)m);
      std::printf("%-30s | %-4s | %7.2f (%6.2f-%6.2f) %5.1f%% | %5.2fx (%4.2f-%4.2f) | ", shape, names[i], a.med, a.lo,
                  a.hi, 100 * a.med / peak_tf32, o.med, o.lo, o.hi);
      if (i < 4) {
        std::printf("%.1e\n", diff[i]);
      } else {
        std::printf("-\n");
      }
    }
    cudaFree(const_cast<int*>(di));
  }
  for (const DeviceExperts& d : ex) {
    cudaFree(d.blobs);
    cudaFree(const_cast<const uint8_t**>(d.table));
  }
  for (float* p : {act, y, act_c, y_c}) cudaFree(p);
  cudaFree(scratch);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string what = argc > 2 ? argv[2] : "all";
  if (repeats < 1 || (what != "all" && what != "seeds")) {
    std::fprintf(stderr, "usage: cuda_gemm_bench [repeats >= 1] [all|seeds]\n");
    return 2;
  }
  int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
  cuda::check(cudaGetDevice(&dev), "no CUDA device");
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "device attribute");
  cuda::check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev), "device attribute");
  cuda::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "device attribute");
  cuda::check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "device attribute");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, dev), "device properties");
  // Dense tensor-core flop per clock per SM: Hopper (sm_90) 2048 TF32 and 4096 BF16; Ampere sm_80 1024 and 2048.
  const double tf32_per_clk = major == 9 ? 2048 : 1024, bf16_per_clk = 2 * tf32_per_clk;
  const double clk = double(khz) * 1e3;
  const double peak_tf32 = sms * clk * tf32_per_clk / 1e12, peak_bf16 = sms * clk * bf16_per_clk / 1e12;
  std::printf("device: %s (sm_%d%d), %d SMs at %.0f MHz (max clock)\n", prop.name, major, minor, sms, clk / 1e6);
  std::printf("ceiling (SMs x clock x dense tensor flop/clk/SM): TF32 %.0f TFLOP/s, BF16 %.0f TFLOP/s\n", peak_tf32,
              peak_bf16);
  std::printf(
      "repeats: %d x (N L S O C C O S L N); TFLOP/s median (min-max) and share of the TF32 ceiling; N = tensor "
      "cores, mma.sync kernel, its own tile pick (f16); L, S = the same with 128 x 128 and 64 x 64 tiles; O = tensor "
      "cores, mma.sync TF32 kernel; C = CUDA cores (float32); last two columns: max|N-C|/max|C| and "
      "max|O-C|/max|C|\n\n",
      repeats);
  std::printf("%-34s | %-31s | %-7s | %-7s | %-31s | %-6s | %-19s | %-7s | %s\n", "shape", "N TFLOP/s", "L", "S",
              "O TFLOP/s", "C", "N over O", "N vs C", "O vs C | L, S bits");

  cudaStream_t s;
  cuda::check(cudaStreamCreate(&s), "stream");

  // Dense products of a layer: q/o projections and the like, 4096x2048, 2048x4096, 512x2048 (kv).
  const int64_t max_m = 16384, max_k = 4096, max_n = 4096;
  float* x = device_copy(gaussian(size_t(max_m * max_k), 1, 1.0f));
  if (what == "seeds") {
    bench_seed_experts(x, repeats, peak_tf32, s);
    return 0;
  }
  float* yn = device_floats(size_t(max_m * max_n));
  float* yo = device_floats(size_t(max_m * max_n));
  float* yc = device_floats(size_t(max_m * max_n));
  void* f16_scratch = nullptr;  // matmul_tc's scratch for the f16 kernel
  cuda::check(cudaMalloc(&f16_scratch, cuda::matmul_tc_scratch_bytes(max_m, max_k)), "bench alloc");
  // A tensor-core arm: f run with kernel kind k.
  const auto with = [](cuda::GemmKernel k, std::function<void()> f) {
    return [k, f] {
      cuda::use_gemm_kernel(k);
      f();
    };
  };
  const int64_t shapes[][2] = {{4096, 2048}, {2048, 4096}, {512, 2048}};
  for (const auto& sh : shapes) {
    const int64_t n = sh[0], k = sh[1];
    uint8_t* w = device_copy(q4_matrix(n, k, 2));
    const cuda::DeviceMatrix dm{Codec::Q4_G64, w, n, k};
    std::vector<int64_t> ms = {512, 2048, 16384};
    if (n == 4096) ms = {1, 8, 32, 64, 128, 256, 512, 2048, 16384};  // where the tensor cores start to pay
    for (const int64_t m : ms) {
      const auto tc = [&](float* y) { return [&, y] { cuda::matmul_tc(x, m, dm, y, false, s, f16_scratch); }; };
      const Arms arms{with(cuda::GemmKernel::Mma, tc(yn)), with(cuda::GemmKernel::MmaLarge, tc(yn)),
                      with(cuda::GemmKernel::MmaSmall, tc(yn)), with(cuda::GemmKernel::MmaTf32, tc(yo)),
                      [&] { cuda::matmul(x, m, dm, yc, false, s); }};
      arms.o();
      arms.c();
      arms.n();  // last, so yn holds N's output
      cuda::check(cudaStreamSynchronize(s), "bench run");
      char name[96];
      std::snprintf(name, sizeof name, "matmul q4_g64 %lldx%lld, m %lld", (long long)n, (long long)k, (long long)m);
      const double dn = rel_diff(yn, yc, size_t(m * n)), dof = rel_diff(yo, yc, size_t(m * n));
      const bool ls = same_bits(arms.l, arms.s, yn, size_t(m * n), s);
      compare(name, 2.0 * double(m) * double(n) * double(k), arms, m <= 64 ? 2 * repeats : repeats, peak_tf32, s, dn,
              dof, ls);
    }
    cudaFree(w);
  }

  // Grouped experts: 512 and 2048 rows, top-8 of 128 experts, H 2048, I 768, q4_g64, random routes (distinct per row).
  {
    const int64_t H = 2048, I = 768;
    const int E = 128, k = 8, distinct = 4;  // 4 distinct experts' weights, copied into the 128 blobs
    const DeviceExperts ex = device_experts(Codec::Q4_G64, H, I, E, distinct, q4_matrix);
    const cuda::ExpertLayout& l = ex.l;
    const uint8_t* const* dt = ex.table;
    const int64_t most = 2048;
    float* act_n = device_floats(size_t(most * k * I));
    float* act_o = device_floats(size_t(most * k * I));
    float* act_c = device_floats(size_t(most * k * I));
    void* scratch = nullptr;
    const size_t scratch_bytes = cuda::expert_gemm_scratch_bytes(most, k, E, l);
    cuda::check(cudaMalloc(&scratch, scratch_bytes), "bench alloc");
    for (const int64_t m : {int64_t(512), most}) {
      const int* di = device_routes(m, k, E);
      const auto tc = [&](float* act, float* y) {
        return [&, act, y] {
          cuda::expert_gate_up_tc(x, m, k, di, dt, E, l, act, scratch, s);
          cuda::expert_down_tc(act, m * k, di, dt, E, l, y, scratch, s);
        };
      };
      const Arms arms{with(cuda::GemmKernel::Mma, tc(act_n, yn)), with(cuda::GemmKernel::MmaLarge, tc(act_n, yn)),
                      with(cuda::GemmKernel::MmaSmall, tc(act_n, yn)), with(cuda::GemmKernel::MmaTf32, tc(act_o, yo)),
                      [&] {
                        cuda::expert_gate_up(x, m, k, di, dt, E, l, act_c, s);
                        cuda::expert_down(act_c, m * k, di, dt, l, yc, s);
                      }};
      arms.o();
      arms.c();
      arms.n();
      cuda::check(cudaStreamSynchronize(s), "bench run");
      const double flops = double(m * k) * 6.0 * double(H) * double(I);
      char name[96];
      std::snprintf(name, sizeof name, "experts gate_up+down, %lld x top-8", (long long)m);
      const double dn = rel_diff(yn, yc, size_t(m * k * H)), dof = rel_diff(yo, yc, size_t(m * k * H));
      const bool ls = same_bits(arms.l, arms.s, yn, size_t(m * k * H), s);
      compare(name, flops, arms, repeats, peak_tf32, s, dn, dof, ls);
      cudaFree(const_cast<int*>(di));
    }
    std::printf("\ngrouped scratch: %zu bytes for %lld pairs of %d experts\n", scratch_bytes, (long long)(most * k), E);
  }
  bench_seed_experts(x, repeats, peak_tf32, s);
  return 0;
}
