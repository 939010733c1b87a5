// bench/cuda_attention_bench.cu - prompt attention (cuda::attention_prompt) at issue 8's head shape (Qwen3-30B-A3B:
// 32 query heads, 4 KV heads, head_dim 128) for one layer of a 2,048- and a 16,384-token prompt, timed by CUDA
// events: TFLOP/s (median, min, max over the repeats) against the H200's float32 CUDA-core and dense TF32 ceilings.
// Flops count the causal half: n (n + 1) / 2 query-key pairs x head_dim x 2 (QK^T and PV) x 2 (multiply, add) per
// head; the same figure in every arm, so TFLOP/s compare directly.
// Usage: build/bench/cuda_attention_bench [repeats] [n ...]   (default 5 repeats, n = 2048 16384; needs a GPU)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "cuda/kernels.h"

using namespace seedling;

namespace {

constexpr double kFp32Ceiling = 67.0;   // TFLOP/s, H200 float32 FMA on CUDA cores (assumed, datasheet)
constexpr double kTf32Ceiling = 495.0;  // TFLOP/s, H200 dense TF32 tensor cores (assumed, datasheet)

// n standard normal floats, on the host (v) and on the device (the return value).
float* device_gaussian(size_t n, uint32_t seed, std::vector<float>& v) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  v.resize(n);
  for (float& x : v) x = nd(rng);
  void* p = nullptr;
  cuda::check(cudaMalloc(&p, n * sizeof(float)), "bench alloc");
  cuda::check(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice), "bench upload");
  return static_cast<float*>(p);
}

// max |out - exact| over every head of query row i (position i, keys 0..i), the exact one in double on the CPU: the
// figures are of a kernel that computed the right thing.
double row_error(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                 const std::vector<float>& out, int i, const cuda::AttentionShape& s) {
  const int hd = s.head_dim, kv_dim = s.n_kv_heads * hd, group = s.n_heads / s.n_kv_heads;
  double worst = 0;
  std::vector<double> p(size_t(i) + 1);
  for (int h = 0; h < s.n_heads; ++h) {
    const float* qr = q.data() + (size_t(i) * size_t(s.n_heads) + size_t(h)) * size_t(hd);
    const size_t off = size_t(h / group) * size_t(hd);
    double mx = -1e300, sum = 0;
    for (int j = 0; j <= i; ++j) {
      double d = 0;
      for (int e = 0; e < hd; ++e) d += double(qr[e]) * k[size_t(j) * size_t(kv_dim) + off + size_t(e)];
      p[size_t(j)] = d * s.scale;
      mx = std::max(mx, p[size_t(j)]);
    }
    for (int j = 0; j <= i; ++j) sum += p[size_t(j)] = std::exp(p[size_t(j)] - mx);
    for (int e = 0; e < hd; ++e) {
      double o = 0;
      for (int j = 0; j <= i; ++j) o += p[size_t(j)] * v[size_t(j) * size_t(kv_dim) + off + size_t(e)];
      const float got = out[(size_t(i) * size_t(s.n_heads) + size_t(h)) * size_t(hd) + size_t(e)];
      worst = std::max(worst, std::isfinite(got) ? std::fabs(double(got) - o / sum) : INFINITY);
    }
  }
  return worst;
}

int run(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<int> sizes;
  for (int a = 2; a < argc; ++a) sizes.push_back(std::atoi(argv[a]));
  if (sizes.empty()) sizes = {2048, 16384};
  const cuda::AttentionShape s{32, 4, 128, 1.0f / std::sqrt(128.0f)};
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, 0), "device properties");
  std::printf("device: %s; shape: %d q heads, %d kv heads, head_dim %d; one layer, p0 = 0, no window\n", prop.name,
              s.n_heads, s.n_kv_heads, s.head_dim);
  std::printf("ceilings assumed (H200): %.0f TFLOP/s float32 CUDA cores, %.0f TFLOP/s TF32 dense\n", kFp32Ceiling,
              kTf32Ceiling);
  cudaStream_t stream;
  cuda::check(cudaStreamCreate(&stream), "stream");
  cudaEvent_t a, b;
  cuda::check(cudaEventCreate(&a), "event");
  cuda::check(cudaEventCreate(&b), "event");
  for (const int n : sizes) {
    if (n <= 0) {
      std::fprintf(stderr, "cuda_attention_bench: n must be positive, got %d\n", n);
      return 1;
    }
    const size_t kv = size_t(n) * size_t(s.n_kv_heads * s.head_dim), qn = size_t(n) * size_t(s.n_heads * s.head_dim);
    std::vector<float> hq, hk, hv;
    float* q = device_gaussian(qn, 1, hq);
    float* k = device_gaussian(kv, 2, hk);
    float* v = device_gaussian(kv, 3, hv);
    float* out = nullptr;
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&out), qn * sizeof(float)), "bench alloc");
    cuda::attention_prompt(q, n, 0, k, v, 0, s, out, stream);  // warm-up
    cuda::check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<double> tflops;
    const double flops = double(n) * double(n + 1) / 2.0 * s.head_dim * 2.0 * 2.0 * s.n_heads;
    for (int r = 0; r < repeats; ++r) {
      cuda::check(cudaEventRecord(a, stream), "event");
      cuda::attention_prompt(q, n, 0, k, v, 0, s, out, stream);
      cuda::check(cudaEventRecord(b, stream), "event");
      cuda::check(cudaEventSynchronize(b), "bench run");
      float ms = 0;
      cuda::check(cudaEventElapsedTime(&ms, a, b), "event");
      tflops.push_back(flops / (double(ms) * 1e-3) / 1e12);
    }
    std::vector<float> hout(qn);
    cuda::check(cudaMemcpy(hout.data(), out, qn * sizeof(float), cudaMemcpyDeviceToHost), "bench download");
    double err = 0;
    for (const int i : {0, n / 3, n - 1}) err = std::max(err, row_error(hq, hk, hv, hout, i, s));
    std::sort(tflops.begin(), tflops.end());
    const double med = tflops[tflops.size() / 2];
    std::printf(
        "n = %5d: %.3f ms per layer (%.2f s for 48 layers), %.2f TFLOP/s (min %.2f, max %.2f) = %.1f%% of "
        "float32, %.1f%% of TF32; max |error| %.2g on rows 0, n/3, n-1\n",
        n, flops / (med * 1e12) * 1e3, 48.0 * flops / (med * 1e12), med, tflops.front(), tflops.back(),
        100.0 * med / kFp32Ceiling, 100.0 * med / kTf32Ceiling, err);
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(out);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_attention_bench: %s\n", e.what());
    return 1;
  }
}
