// cuda/launch.cuh - the host side of launching the CUDA-core kernels: the shared memory a launch may stage into,
// the decode kernels' blocks per SM, the alignment checks that pick a kernel's load form, and launch_pdl (a launch
// that may overlap the one before it by programmatic dependent launch). launch.cu holds what is not inline.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/codec_device.cuh"
#include "cuda/kernels.h"

namespace seedling::cuda {

// Dynamic shared memory a launch may stage into: what a launch gets without raising its limit. With the kernel's
// static shared memory that can pass the default limit (48 KB in all); launch_pdl raises the limit then.
constexpr size_t kStageSharedBytes = 48 * 1024;
// Resident blocks per SM the decode products are compiled for (registers capped to fit: 64 for the products, 85 for
// gate/up, 64 for down + combine): a Qwen3-30B-A3B q/k/v product at two rows a warp is 320 blocks, one wave on an
// H200's 132 SMs at 4 an SM. At 5 an SM (48 registers, 8 bytes spilled in the staged q4 product) device-only decode
// was 1.4% slower at 48 layers (docs/results/2026-11-30-cuda-decode-session6.md). Gate/up (384 blocks of two outputs
// a warp) and down + combine (512 blocks) are one wave at their caps.
constexpr int kMatvecBlocksPerSm = 4, kGateUpBlocksPerSm = 3, kDownBlocksPerSm = 4;

// The bytes of one row of cols values in codec c (the seed codecs' too).
inline size_t row_bytes(Codec c, int64_t cols) {
  size_t b = 0;
  dispatch_codec<true, true>(c, [&]<CodecId C>() { b = row_bytes_of<C>(cols); });
  return b;
}

// Whether a codec's rows are contiguous bytes, which 16-byte loads (V) and staging (S) need: not the seed codecs.
// Their launches pass kBytes<C> where the others pass true, so a seed kernel is instantiated once, V and S off.
template <CodecId C>
constexpr bool kBytes = !is_seed(C);

// Every row of the matrix starts 16-byte aligned: float units may be read as one 16-byte load.
inline bool aligned16(const void* data, size_t row_bytes) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && row_bytes % 16 == 0;
}

// Throws Error naming `what` when the launch just queued failed.
inline void launched(const char* what) {
  check(cudaGetLastError(), what);
}

// Blocks of `per` that cover n.
inline int blocks_for(int64_t n, int per) {
  return int((n + per - 1) / per);
}

// Throws Error (invalid argument, naming `what`) unless router_route's kernel takes policy p over rows of e logits:
// at most 4096 experts, k <= e, n_group dividing e and 1 <= topk_group <= n_group.
void check_route_policy(int64_t e, int k, const RouterPolicy& p, const char* what);

// Whether the environment variable `name` is set to something other than empty or "0" (the A/B switches).
bool env_flag(const char* name);

// Whether launches on the current device may overlap by programmatic dependent launch: compute capability 9.0 or
// later, and not switched off by SEEDLING_NO_PDL=1 (for A/B measurements). Asked once per device.
bool pdl_enabled();

// A launch of `kernel` with `dynamic` bytes of dynamic shared memory is refused (invalid argument) when they and the
// kernel's static shared memory pass the default 48 KB: a matvec staging exactly kStageSharedBytes (q4_g32 rows of
// 2,048) did. So such a kernel's limit is raised first. Each host thread keeps the (device, kernel, size)s it has
// seen in a small table, so a launch that needs nothing new costs a scan of it (raising a limit again is harmless);
// launches of at most kSmemUnchecked bytes skip even that, since no kernel here has 16 KB of static shared memory.
constexpr size_t kSmemUnchecked = 32 * 1024;
void allow_dynamic_smem(const void* kernel, size_t dynamic);

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch where pdl_enabled(): the kernel
// must call pdl_wait before reading what earlier launches wrote (see pdl_trigger).
template <typename... P, typename... A>
void launch_pdl(const char* what, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                A&&... args) {
  if (smem > kSmemUnchecked) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...), what);
}

}  // namespace seedling::cuda
