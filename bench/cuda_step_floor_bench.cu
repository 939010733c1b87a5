// bench/cuda_step_floor_bench.cu - the floor under one dependent GPU step: a chain of S dependent kernel launches
// (default 288 = 48 layers x 6 launches, batch-1 decode) captured once into a CUDA graph and replayed, timed by CUDA
// events, in arms that do (almost) nothing: empty kernels, a 2,048-float RMS-norm exchange (every block reads the
// whole vector the previous step wrote and writes its slice of the next), the same plus W MiB of weights streamed
// before the dependency wait, each with and without programmatic dependent launch (PDL); and one persistent kernel
// doing the same steps between grid-wide barriers. Prints us per step (median, min, max over the replays) and the
// ceiling tok/s it implies for 288 steps a token; then a chain shaped as a decode token (48 layers of six steps, each
// streaming its launch's bytes, and the head), and the same bytes in 4, 3, 2 and 1 steps a layer, and the six steps
// staged into shared memory with the expert bytes fetched only after the wait (without arithmetic, with the q4 float32
// arithmetic, with int8 inputs and dp4a); then the vector step with a last-block tail (the fused epilogues' pattern);
// first the device, its clock and its device-to-device copy rate.
// Usage: build/bench/cuda_step_floor_bench [--steps S] [--repeats R] [--blocks B]
//        (defaults S = 288, R = 20 after 3 warm-up replays, B = 2 x SM count blocks of 256 threads; needs a GPU)
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda/kernels.h"

using namespace seedling;

namespace {

constexpr int kThreads = 256;      // threads a block
constexpr int kHidden = 2048;      // floats in the vector a step hands to the next
constexpr int kDecodeSteps = 288;  // dependent launches a token: 48 layers x 6
constexpr int kWarmups = 3;        // untimed replays before the timed ones
constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kWeightPool = 256 * kMiB;      // the weight regions cycle through this much (> L2)
constexpr size_t kCopyBytes = size_t(1) << 30;  // the device-to-device copy's buffer
constexpr const char* kName = "cuda_step_floor_bench";

// Programmatic dependent launch: wait for the previous grid (and its memory), let the next grid start launching.
// Both are no-ops on a launch without the PDL attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The sum of v over the block, in every thread; red holds a float per warp.
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < kThreads / 32 ? red[threadIdx.x % 32] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // red is free again
  return v;
}

// One step's exchange: every block reads all of `in` (L2, not L1: in the persistent kernel other blocks rewrote it)
// for the sum of squares, then writes its grid-stride share of out = in * rsqrt(mean square + 1e-6) + extra * 1e-30.
__device__ void norm_step(const float* in, float* out, int h, float extra, float* red) {
  float ss = 0.0f;
  for (int i = int(threadIdx.x); i < h; i += kThreads) {
    const float v = __ldcg(in + i);
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss, red) / float(h) + 1e-6f);
  for (int i = int(blockIdx.x * kThreads + threadIdx.x); i < h; i += int(gridDim.x) * kThreads) {
    out[i] = __ldcg(in + i) * scale + extra * 1e-30f;
  }
}

__global__ void __launch_bounds__(kThreads) empty_step(int) {
  pdl_wait();
  pdl_launch_dependents();
}

// The vector step; with kWeights it first streams w[0, n) (16-byte loads, issued before the wait so they overlap the
// previous step) and folds their sum into the output, so the loads are live.
template <bool kWeights>
__global__ void __launch_bounds__(kThreads) vector_step(const float* in, float* out, int h, const uint4* w, size_t n) {
  __shared__ float red[kThreads / 32];
  unsigned acc = 0;
  if constexpr (kWeights) {
    const size_t stride = size_t(gridDim.x) * kThreads;
#pragma unroll 4
    for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
      const uint4 q = __ldg(w + i);
      acc += q.x ^ q.y ^ q.z ^ q.w;
    }
  }
  pdl_wait();
  pdl_launch_dependents();
  float extra = 0.0f;
  if constexpr (kWeights) extra = block_sum(float(acc), red);
  norm_step(in, out, h, extra, red);
}

// The vector step, then the last-block pattern of the fused decode epilogues (router top-k, RoPE, the router folded
// into o's launch): every block writes a row of kTailCols partials, fences and counts itself in; the last block to
// arrive (kTail 1) reads one float4 a thread of them, or (kTail 2) adds up all gridDim.x rows as the fold's tail
// did: thread (sub, c) adds float4 c of rows sub, sub + subsets, ..., then one sum a column. kTail 0: no tail.
constexpr int kTailCols = 132;  // 128 experts' logits and sum x^2, in whole float4s
static_assert(kThreads / (kTailCols / 4) * kTailCols <= 1024, "tail_step's sums hold every subset's row");
template <int kTail>
__global__ void __launch_bounds__(kThreads)
    tail_step(const float* in, float* out, int h, float* partials, int* counter, float* result) {
  __shared__ float red[kThreads / 32];
  __shared__ float sums[1024];
  __shared__ int last;
  pdl_wait();
  pdl_launch_dependents();
  norm_step(in, out, h, 0.0f, red);
  for (int q = int(threadIdx.x); q < kTailCols; q += kThreads) {
    partials[size_t(blockIdx.x) * kTailCols + q] = __ldcg(in + q) * float(blockIdx.x);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == int(gridDim.x) - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  if (!last || kTail == 0) return;
  __threadfence();
  if (kTail == 1) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(partials) + threadIdx.x % (kTailCols / 4));
    result[threadIdx.x] = v.x + v.y + v.z + v.w;
    return;
  }
  const int chunks = kTailCols / 4, subsets = kThreads / chunks;
  const int c = int(threadIdx.x) % chunks, sub = int(threadIdx.x) / chunks;
  if (sub < subsets) {
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int b = sub; b < int(gridDim.x); b += subsets) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(partials + size_t(b) * kTailCols) + c);
      a.x += v.x;
      a.y += v.y;
      a.z += v.z;
      a.w += v.w;
    }
    float* o = sums + sub * kTailCols + 4 * c;
    o[0] = a.x;
    o[1] = a.y;
    o[2] = a.z;
    o[3] = a.w;
  }
  __syncthreads();
  if (threadIdx.x < kTailCols) {
    float t = 0.0f;
    for (int u = 0; u < subsets; ++u) t += sums[u * kTailCols + threadIdx.x];
    result[threadIdx.x] = t;
  }
}

// A decode step as a kernel could best do it, for the staged arms of the decode-shaped chain: the block's contiguous
// share of the step's bytes (per_block 16-byte words, taken as q4 codes: 32 4-bit codes a word) all in flight at once
// by cp.async into shared memory, then each word used. kMode 0: the copies issued before the wait (a dense step: its
// weights do not depend on the step before); 1: after it, at an address read from the step before's vector (an
// expert step: ids, then weights); 2: no staging, each thread streams its share after the wait, kUnroll words in
// flight (the head, whose 175 MB do not fit in shared memory). kArith 0: the words only xor-ed; 1: each code widened as
// the decode kernels widen them (code_float_byte: a byte permute and a subtraction) and multiplied into float32 sums;
// 2: the input vector first rounded to int8 (one scale: a block max), then four codes a dp4a instruction (what
// llama.cpp's MMVQ kernels do). Code e of word i meets input e * 64 + i % 64; a thread's words all have the same
// i % 64 (256 threads), so its 32 inputs sit in registers, read once after the wait (through shared memory), as a
// matrix-vector kernel keeps its slice of x across rows; kUnroll words at a time, each into its own sum. The result is
// folded into the output x 1e-30; with zero weights it is 0, so the chain's final vector is the vector arm's.
constexpr int kCodeStride = 64;  // inputs between a word's consecutive codes
constexpr int kUnroll = 4;       // words a thread works on at once
static_assert(32 * kCodeStride == kHidden, "a word's 32 codes span the vector");
static_assert(kThreads % kCodeStride == 0, "a thread's words share their inputs");

__device__ __forceinline__ float q4_word_dot_f32(uint4 q, const float (&x)[32]) {
  const uint32_t c[4] = {q.x, q.y, q.z, q.w};
  float a = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t lo = c[k] & 0x0f0f0f0fu, hi = (c[k] >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float ql = __fsub_rn(__uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7650u | unsigned(b))), 8388608.0f);
      const float qh = __fsub_rn(__uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7650u | unsigned(b))), 8388608.0f);
      a = fmaf(ql, x[8 * k + b], a);
      a = fmaf(qh, x[8 * k + 4 + b], a);
    }
  }
  return a;
}

// xq[2k + h]: the four int8 inputs that meet sub-word k's low (h 0) or high (h 1) nibbles.
__device__ __forceinline__ int q4_word_dot_dp4a(uint4 q, const int (&xq)[8]) {
  const uint32_t c[4] = {q.x, q.y, q.z, q.w};
  int a = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    a = __dp4a(int(c[k] & 0x0f0f0f0fu), xq[2 * k], a);
    a = __dp4a(int((c[k] >> 4) & 0x0f0f0f0fu), xq[2 * k + 1], a);
  }
  return a;
}

template <int kMode, int kArith>
__global__ void __launch_bounds__(kThreads)
    q4_step(const float* in, float* out, int h, const uint4* w, size_t per_block, unsigned chase) {
  extern __shared__ __align__(16) uint4 stage[];
  __shared__ float red[kThreads / 32];
  const uint4* mine = w + size_t(blockIdx.x) * per_block;
  const auto stage_all = [&] {
    for (size_t i = threadIdx.x; i < per_block; i += kThreads) {
      const unsigned dst = unsigned(__cvta_generic_to_shared(stage + i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(mine + i) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  if constexpr (kMode == 0) stage_all();
  pdl_wait();
  pdl_launch_dependents();
  if constexpr (kMode == 1) {
    mine += __float_as_uint(__ldcg(in)) & chase;  // chase is 0: the address waits for the load all the same
    stage_all();
  }
  float x[32] = {}, scale = 0.0f;
  int xq[8] = {};
  if constexpr (kArith != 0) {  // the vector into shared memory once (16-byte loads), then a thread's 32 from there
    __shared__ __align__(16) float xs[kHidden];
    for (int i = int(threadIdx.x); i < kHidden / 4; i += kThreads) {
      reinterpret_cast<float4*>(xs)[i] = __ldcg(reinterpret_cast<const float4*>(in) + i);
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < 32; ++e) x[e] = xs[e * kCodeStride + threadIdx.x % kCodeStride];
  }
  if constexpr (kArith == 2) {  // int8 inputs, one scale for the vector (each block finds the same max)
    float m = 0.0f;
#pragma unroll
    for (int e = 0; e < 32; ++e) m = fmaxf(m, fabsf(x[e]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.0f;
    for (int j = 0; j < kThreads / 32; ++j) m = fmaxf(m, red[j]);
    __syncthreads();  // red is free again
    scale = m > 0.0f ? m / 127.0f : 1.0f;
    const float inv = 1.0f / scale;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        int packed = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b) packed |= (__float2int_rn(x[8 * k + 4 * hh + b] * inv) & 0xff) << (8 * b);
        xq[2 * k + hh] = packed;
      }
    }
  }
  float acc[kUnroll] = {};
  int iacc[kUnroll] = {};
  unsigned bits = 0;
  const auto use = [&](const uint4(&q)[kUnroll]) {  // a zero word (past the share) adds nothing
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if constexpr (kArith == 1) {
        acc[u] += q4_word_dot_f32(q[u], x);
      } else if constexpr (kArith == 2) {
        iacc[u] = q4_word_dot_dp4a(q[u], xq) + iacc[u];
      } else {
        bits ^= q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
      }
    }
  };
  const auto run = [&](auto load) {
    size_t i = threadIdx.x;
    for (; i < per_block; i += kUnroll * kThreads) {
      uint4 q[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) q[u] = i + u * kThreads < per_block ? load(i + u * kThreads) : uint4{};
      use(q);
    }
  };
  if constexpr (kMode == 2) {
    run([&](size_t i) { return __ldcs(mine + i); });
  } else {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    run([&](size_t i) { return stage[i]; });
  }
  float total = float(bits);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) total += acc[u] + float(iacc[u]) * scale;
  const float extra = block_sum(total, red);
  norm_step(in, out, h, extra, red);
}

// A grid-wide barrier: bar[0] counts arrivals, bar[1] is the generation the last arrival advances (the others spin on
// it). Every block of the grid must be resident.
__device__ void grid_sync(unsigned* bar, unsigned blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = bar + 1;
    const unsigned g = *gen;
    __threadfence();  // the block's writes and the read of the generation before the arrival
    if (atomicAdd(bar, 1u) == blocks - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// The vector steps in one persistent kernel: step s reads buf[s % 2] and writes buf[(s + 1) % 2], a barrier between.
__global__ void __launch_bounds__(kThreads) barrier_steps(float* a, float* b, int h, int steps, unsigned* bar) {
  __shared__ float red[kThreads / 32];
  for (int s = 0; s < steps; ++s) {
    norm_step(s % 2 ? b : a, s % 2 ? a : b, h, 0.0f, red);
    if (s + 1 < steps) grid_sync(bar, gridDim.x);
  }
}

struct Options {
  int steps = kDecodeSteps, repeats = 20, blocks = 0;  // blocks 0: 2 x SM count
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: %s [--steps S] [--repeats R] [--blocks B]\n"
               "  S dependent steps per graph (default %d = 48 layers x 6), R timed replays (default 20, after %d "
               "warm-ups),\n  B blocks of %d threads (default 2 x SM count)\n",
               kName, kDecodeSteps, kWarmups, kThreads);
}

// argv[i + 1] as an integer in [lo, hi], or exit 2 with the usage.
int int_arg(int argc, char** argv, int i, int lo, int hi) {
  const char* s = i + 1 < argc ? argv[i + 1] : "";  // a missing value reads as ''
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s wants an integer in [%d, %d], got '%s'\n", kName, argv[i], lo, hi, s);
    usage(stderr);
    std::exit(2);
  }
  return int(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--steps") {
      o.steps = int_arg(argc, argv, i, 1, 100000);
    } else if (a == "--repeats") {
      o.repeats = int_arg(argc, argv, i, 1, 100000);
    } else if (a == "--blocks") {
      o.blocks = int_arg(argc, argv, i, 1, 65535);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", kName, argv[i]);
      usage(stderr);
      std::exit(2);
    }
  }
  return o;
}

std::vector<double> sorted(std::vector<double> v) {  // median: v[size / 2] (the upper one of an even count)
  std::sort(v.begin(), v.end());
  return v;
}

// Seconds of each of `repeats` runs of `launch` on s, by events, after kWarmups untimed runs. (cuda_bench_util.h's
// timed() does the same for the .cpp benches; this file is CUDA, and nvcc cannot compile the fmt that header's codec
// includes bring.)
std::vector<double> time_runs(const std::function<void()>& launch, cudaStream_t s, int repeats) {
  for (int w = 0; w < kWarmups; ++w) launch();
  cuda::check(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t a, b;
  cuda::check(cudaEventCreate(&a), "event");
  cuda::check(cudaEventCreate(&b), "event");
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    cuda::check(cudaEventRecord(a, s), "event");
    launch();
    cuda::check(cudaEventRecord(b, s), "event");
    cuda::check(cudaEventSynchronize(b), "bench run");
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, a, b), "event");
    t.push_back(double(ms) * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t;
}

// Launches kernel on s (blocks x kThreads, smem bytes of dynamic shared memory), with the
// programmatic-stream-serialization attribute when pdl.
template <typename... P, typename... A>
void launch_smem(bool pdl, int blocks, size_t smem, cudaStream_t s, void (*kernel)(P...), A... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = pdl ? &attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  cuda::check(cudaLaunchKernelEx(&cfg, kernel, args...), "step launch");
}

template <typename... P, typename... A>
void launch(bool pdl, int blocks, cudaStream_t s, void (*kernel)(P...), A... args) {
  launch_smem(pdl, blocks, 0, s, kernel, args...);
}

// What `enqueue` puts on s, captured into a graph and instantiated.
cudaGraphExec_t capture(cudaStream_t s, const std::function<void()>& enqueue) {
  cudaGraph_t g;
  cuda::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  enqueue();
  cuda::check(cudaStreamEndCapture(s, &g), "end capture");
  cudaGraphExec_t e;
  cuda::check(cudaGraphInstantiate(&e, g, 0), "graph instantiate");
  cudaGraphDestroy(g);
  return e;
}

// One arm's line: us per step, the ceiling it implies, and the weights' rate when weight_bytes > 0.
void report(const char* arm, const std::vector<double>& seconds, int steps, double weight_bytes) {
  std::vector<double> us;
  for (const double t : seconds) us.push_back(t * 1e6 / steps);
  us = sorted(us);
  const double med = us[us.size() / 2];
  std::printf("  %-28s %8.3f us/step (min %.3f, max %.3f)  ceiling %7.0f tok/s for %d steps", arm, med, us.front(),
              us.back(), 1e6 / (kDecodeSteps * med), kDecodeSteps);
  if (weight_bytes > 0) std::printf(", weights %.0f GB/s", weight_bytes / (med * 1e-6) / 1e9);
  std::printf("\n");
}

// The vector after `steps` steps of norm_step (no weights) from x, on the CPU in double.
std::vector<float> cpu_steps(std::vector<float> x, int steps) {
  std::vector<float> y(x.size());
  for (int s = 0; s < steps; ++s) {
    double ss = 0;
    for (const float v : x) ss += double(v) * double(v);
    const double scale = 1.0 / std::sqrt(ss / double(x.size()) + 1e-6);
    for (size_t i = 0; i < x.size(); ++i) y[i] = float(double(x[i]) * scale);
    std::swap(x, y);
  }
  return x;
}

// Whether the device vector d matches want within 1e-4 relative (and is finite); prints the verdict.
bool check_vector(const char* arm, const float* d, const std::vector<float>& want) {
  std::vector<float> got(want.size());
  cuda::check(cudaMemcpy(got.data(), d, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "download");
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i])) / std::max(std::fabs(double(want[i])), 1e-6);
    worst = std::isfinite(got[i]) ? std::max(worst, err) : INFINITY;
  }
  const bool ok = worst <= 1e-4;
  std::printf("  %s: %s (max relative error %.2g against the CPU's steps)\n", arm, ok ? "check ok" : "check FAILED",
              worst);
  return ok;
}

int run(const Options& opt) {
  int n_dev = 0;
  const cudaError_t e = cudaGetDeviceCount(&n_dev);
  if (e != cudaSuccess || n_dev == 0) {
    std::fprintf(stderr, "%s: no CUDA device (cudaGetDeviceCount: %s); this benchmark needs a GPU\n", kName,
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 1;
  }
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, 0), "device properties");
  int sms = 0, clock_khz = 0, l2 = 0;
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  cuda::check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate");
  cuda::check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
  const int steps = opt.steps, blocks = opt.blocks > 0 ? opt.blocks : 2 * sms;
  std::printf("device: %s, %d SMs, SM clock %.0f MHz (peak), L2 %.0f MiB\n", prop.name, sms, clock_khz / 1e3,
              double(l2) / double(kMiB));
  cudaStream_t s;
  cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");

  void *src = nullptr, *dst = nullptr;
  cuda::check(cudaMalloc(&src, kCopyBytes), "copy alloc");
  cuda::check(cudaMalloc(&dst, kCopyBytes), "copy alloc");
  cuda::check(cudaMemsetAsync(src, 1, kCopyBytes, s), "copy memset");
  const auto copy = [&] { cuda::check(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, s), "copy"); };
  const double copy_s = sorted(time_runs(copy, s, 5))[2];
  std::printf(
      "device-to-device copy of 1 GiB: %.0f GB/s (median of 5; counts 2 x bytes / time, the read and the "
      "write once each)\n",
      2.0 * double(kCopyBytes) / copy_s / 1e9);
  cuda::check(cudaFree(src), "free");
  cuda::check(cudaFree(dst), "free");

  std::printf(
      "%d dependent steps a graph, %d blocks x %d threads, vector of %d floats, %d timed replays after %d "
      "warm-ups:\n",
      steps, blocks, kThreads, kHidden, opt.repeats, kWarmups);
  std::vector<float> x0(kHidden);
  for (int i = 0; i < kHidden; ++i) x0[size_t(i)] = std::sin(float(i));
  const std::vector<float> want = cpu_steps(x0, steps);
  float* buf[2] = {nullptr, nullptr};
  for (float*& b : buf) cuda::check(cudaMalloc(reinterpret_cast<void**>(&b), kHidden * sizeof(float)), "alloc");
  const auto upload = [&] {  // on s, since s does not wait for the legacy default stream
    cuda::check(cudaMemcpyAsync(buf[0], x0.data(), kHidden * sizeof(float), cudaMemcpyHostToDevice, s), "upload");
    cuda::check(cudaStreamSynchronize(s), "upload");
  };
  upload();
  uint4* weights = nullptr;
  cuda::check(cudaMalloc(reinterpret_cast<void**>(&weights), kWeightPool), "weight alloc");
  cuda::check(cudaMemsetAsync(weights, 0, kWeightPool, s), "weight memset");
  bool ok = true;

  // One arm: a graph of `steps` launches (step(k) enqueues launch k), replayed and reported; with `check`, run once
  // more from x0 and its final vector held to the CPU's.
  const auto step_arm = [&](const char* arm, const std::function<void(int)>& step, double weight_bytes, bool check) {
    cudaGraphExec_t g = capture(s, [&] {
      for (int k = 0; k < steps; ++k) step(k);
    });
    const auto replay = [&] { cuda::check(cudaGraphLaunch(g, s), "graph launch"); };
    report(arm, time_runs(replay, s, opt.repeats), steps, weight_bytes);
    if (check) {
      upload();
      replay();
      cuda::check(cudaStreamSynchronize(s), "check run");
      ok = check_vector(arm, buf[steps % 2], want) && ok;
    }
    cuda::check(cudaGraphExecDestroy(g), "graph destroy");
  };

  // Arms 1-5: work 0 empty, 1 vector, 2 vector + weight_mib of weights.
  const auto graph_arm = [&](const char* arm, bool pdl, int work, size_t weight_mib) {
    const size_t region = weight_mib * kMiB / sizeof(uint4),
                 regions = kWeightPool / std::max<size_t>(weight_mib * kMiB, 1);
    step_arm(
        arm,
        [&](int k) {
          float *in = buf[k % 2], *out = buf[(k + 1) % 2];
          if (work == 0) launch(pdl, blocks, s, empty_step, 0);
          if (work == 1) launch(pdl, blocks, s, vector_step<false>, in, out, kHidden, weights, size_t(0));
          if (work == 2)
            launch(pdl, blocks, s, vector_step<true>, in, out, kHidden, weights + size_t(k) % regions * region, region);
        },
        double(weight_mib * kMiB), work == 1);
  };
  graph_arm("empty, PDL", true, 0, 0);
  graph_arm("empty, no PDL", false, 0, 0);
  graph_arm("vector, PDL", true, 1, 0);
  graph_arm("vector, no PDL", false, 1, 0);
  for (const size_t w : {size_t(1), size_t(4), size_t(16)}) {
    char arm[64];
    std::snprintf(arm, sizeof arm, "vector + %zu MiB weights, PDL", w);
    graph_arm(arm, true, 2, w);
  }
  std::printf("  (weights: a distinct W MiB region a step, cycling through %zu MiB; GB/s = W MiB / step time)\n",
              kWeightPool / kMiB);

  // Arm 6: a decode token's shape. Per layer the six launches of batch-1 decode, each streaming the bytes its
  // launch reads on the 48-layer Qwen3-30B-A3B shape in q4_g64 (36 bytes a 64 weights; norms and router bf16) at a
  // 512-token context, then the head once: the same bytes in the same chain of dependent steps, each step only the
  // exchange and the stream. Its tok/s is the ceiling of this launch structure on this GPU. Then the same bytes in
  // fewer steps a layer, consecutive launches merged (4: q/k/v + attention, o + router, gate/up, down; 3: q/k/v +
  // attention + o, router + gate/up, down; 2; 1): the ceiling of a structure with fewer dependent steps.
  {
    constexpr double kQ4 = 36.0 / 64.0;
    const size_t step_bytes[6] = {
        size_t((4096 + 512 + 512) * 2048 * kQ4),  // q, k, v
        size_t(513) * 512 * 2 * sizeof(float),    // attention: 513 keys and values of 4 heads x 128, float32
        size_t(2048 * 4096 * kQ4),                // o
        size_t(128) * 2048 * 2,                   // router (bf16)
        size_t(8 * 2 * 768 * 2048 * kQ4),         // gate and up of 8 experts
        size_t(8 * 2048 * 768 * kQ4)};            // down of 8 experts
    const size_t head_bytes = size_t(151936 * 2048 * kQ4);
    size_t total = head_bytes, at = 0;
    for (const size_t b : step_bytes) total += 48 * b;
    const auto region = [&](size_t bytes) {  // the next distinct region of the pool, wrapping
      const size_t n = bytes / sizeof(uint4);
      if (at + n > kWeightPool / sizeof(uint4)) at = 0;
      const uint4* w = weights + at;
      at += n;
      return w;
    };
    // One token-shaped arm: the graph of the launches enqueue() puts on s (it returns how many), replayed and
    // reported a token at a time; with check, run once more from x0 and its final vector held to the CPU's.
    const auto token_arm = [&](const std::string& arm, const std::function<int()>& enqueue, bool check) {
      int launches = 0;
      cudaGraphExec_t g = capture(s, [&] { launches = enqueue(); });
      const auto replay = [&] { cuda::check(cudaGraphLaunch(g, s), "graph launch"); };
      std::vector<double> t = sorted(time_runs(replay, s, opt.repeats));
      const double med = t[t.size() / 2];
      std::printf("  %s: %.1f us a token (min %.1f, max %.1f) = %.0f tok/s, %.0f GB/s\n", arm.c_str(), med * 1e6,
                  t.front() * 1e6, t.back() * 1e6, 1.0 / med, double(total) / med / 1e9);
      if (check) {
        upload();
        replay();
        cuda::check(cudaStreamSynchronize(s), "check run");
        ok = check_vector(arm.c_str(), buf[launches % 2], cpu_steps(x0, launches)) && ok;
      }
      cuda::check(cudaGraphExecDestroy(g), "graph destroy");
    };
    // merged[i]: how many of the six launches, in order, step i of a layer streams.
    const auto chain_arm = [&](const std::vector<int>& merged) {
      char arm[96];
      std::snprintf(arm, sizeof arm, "decode-shaped chain (48 x %zu steps + head, %.1f MB a token, PDL)", merged.size(),
                    double(total) / 1e6);
      token_arm(
          arm,
          [&] {
            int k = 0;
            const auto step = [&](size_t b) {
              launch(true, blocks, s, vector_step<true>, buf[k % 2], buf[(k + 1) % 2], kHidden, region(b),
                     b / sizeof(uint4));
              ++k;
            };
            for (int layer = 0; layer < 48; ++layer) {
              size_t next = 0;
              for (const int count : merged) {
                size_t b = 0;
                for (int c = 0; c < count; ++c) b += step_bytes[next++];
                step(b);
              }
            }
            step(head_bytes);
            return k;
          },
          false);
    };
    for (const std::vector<int>& merged : {std::vector<int>{1, 1, 1, 1, 1, 1}, std::vector<int>{2, 2, 1, 1},
                                           std::vector<int>{3, 2, 1}, std::vector<int>{4, 2}, std::vector<int>{6}}) {
      chain_arm(merged);
    }

    // The six-step chain again, each step as q4_step does it: a block's share staged into shared memory all at
    // once, the dense steps' copies issued before the wait and the expert steps' (gate/up, down) after it, at an
    // address read from the vector; the head streamed after the wait. Then the same with the q4 arithmetic. Each
    // arm's final vector is held to the CPU's (the weights are zero, so the steps are the vector arm's).
    size_t max_share = 0;
    for (const size_t b : step_bytes) max_share = std::max(max_share, (b / sizeof(uint4) + blocks - 1) / blocks);
    int smem_optin = 0;
    cuda::check(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "shared memory");
    const size_t smem = max_share * sizeof(uint4);
    if (smem + kHidden * sizeof(float) + 1024 > size_t(smem_optin)) {
      std::fprintf(stderr, "%s: staged chain skipped: a block's share of a step (%zu bytes) does not fit\n", kName,
                   smem);
    } else {
      const auto staged_arm = [&]<int kArith>(const char* arm) {
        for (auto* k : {q4_step<0, kArith>, q4_step<1, kArith>}) {
          cuda::check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), "smem");
        }
        token_arm(
            arm,
            [&] {
              int k = 0;
              const auto step = [&](int mode, size_t bytes) {
                const size_t per_block = (bytes / sizeof(uint4) + blocks - 1) / blocks;
                const uint4* w = region(per_block * size_t(blocks) * sizeof(uint4));
                float *in = buf[k % 2], *out = buf[(k + 1) % 2];
                if (mode == 0)
                  launch_smem(true, blocks, smem, s, q4_step<0, kArith>, in, out, kHidden, w, per_block, 0u);
                if (mode == 1)
                  launch_smem(true, blocks, smem, s, q4_step<1, kArith>, in, out, kHidden, w, per_block, 0u);
                if (mode == 2) launch(true, blocks, s, q4_step<2, kArith>, in, out, kHidden, w, per_block, 0u);
                ++k;
              };
              for (int layer = 0; layer < 48; ++layer) {
                for (int i = 0; i < 6; ++i) step(i < 4 ? 0 : 1, step_bytes[i]);
              }
              step(2, head_bytes);
              return k;
            },
            true);
      };
      staged_arm.template operator()<0>("6 steps staged, experts after the wait");
      staged_arm.template operator()<1>("6 steps staged, experts after the wait, q4 float32 arithmetic");
      staged_arm.template operator()<2>("6 steps staged, experts after the wait, q4 x int8 dp4a arithmetic");
    }
  }

  // Arm 7: the vector step with the last-block pattern (tail_step), to price a one-block tail apart from any other
  // work: the fold's tail cost 16-18 us a layer inside decode (docs/results/2026-12-01-cuda-session10-decode.md).
  {
    float *partials = nullptr, *result = nullptr;
    int* counter = nullptr;
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&partials), size_t(blocks) * kTailCols * sizeof(float)), "alloc");
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&result), kThreads * sizeof(float)), "alloc");
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&counter), sizeof(int)), "alloc");
    cuda::check(cudaMemsetAsync(counter, 0, sizeof(int), s), "counter memset");
    const auto tail_arm = [&](const char* arm, auto kernel) {
      step_arm(
          arm,
          [&](int k) {
            launch(true, blocks, s, kernel, buf[k % 2], buf[(k + 1) % 2], kHidden, partials, counter, result);
          },
          0, true);
    };
    tail_arm("vector + count, no tail", tail_step<0>);
    tail_arm("+ tail: one float4 a thread", tail_step<1>);
    tail_arm("+ tail: add all rows", tail_step<2>);
    std::printf("  (count: every block writes %d partials, fences and counts itself; tail: the last block's work)\n",
                kTailCols);
    for (void* p : {static_cast<void*>(partials), static_cast<void*>(result), static_cast<void*>(counter)}) {
      cuda::check(cudaFree(p), "free");
    }
  }

  // Arm 8: one persistent kernel, the steps between grid barriers; every block must be resident.
  int per_sm = 0;
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier_steps, kThreads, 0), "occupancy");
  if (per_sm * sms < blocks) {
    std::fprintf(stderr, "%s: grid barrier skipped: %d blocks, but only %d x %d SMs can be resident at once\n", kName,
                 blocks, per_sm, sms);
  } else {
    unsigned* bar = nullptr;
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&bar), 2 * sizeof(unsigned)), "barrier alloc");
    cuda::check(cudaMemsetAsync(bar, 0, 2 * sizeof(unsigned), s), "barrier memset");
    int h = kHidden, n = steps;
    void* args[] = {&buf[0], &buf[1], &h, &n, &bar};
    const auto persistent = [&] {
      cuda::check(cudaLaunchCooperativeKernel(barrier_steps, dim3(unsigned(blocks)), dim3(kThreads), args, 0, s),
                  "persistent launch");
    };
    report("grid barrier (1 kernel)", time_runs(persistent, s, opt.repeats), steps, 0);
    upload();
    persistent();
    cuda::check(cudaStreamSynchronize(s), "check run");
    ok = check_vector("grid barrier (1 kernel)", buf[steps % 2], want) && ok;
    cuda::check(cudaFree(bar), "free");
  }
  cuda::check(cudaFree(weights), "free");
  for (float* b : buf) cuda::check(cudaFree(b), "free");
  cuda::check(cudaStreamDestroy(s), "stream");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kName, e.what());
    return 1;
  }
}
