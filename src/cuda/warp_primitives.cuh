// cuda/warp_primitives.cuh - the warp-level building blocks of the CUDA-core kernels (products.cu, experts.cu,
// row_ops.cu, attention_decode.cu): their block shape (warps of 32, 8 a block), the shuffle reductions, cp.async
// copies into shared memory, and programmatic dependent launch's trigger and wait. Each reduction is one fixed
// shuffle tree, so every kernel that calls it adds in the same order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seedling::cuda {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ int64_t min_i64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): a warp stages whole weight
// rows with every copy in flight at once, then widens them from shared memory.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
// 4- and 8-byte forms (.ca: through L1), for a table's pointers and a row's routing weights.
template <int N>
__device__ __forceinline__ void cp_async_small(void* smem, const void* gmem) {
  static_assert(N == 4 || N == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// Groups: the copies a thread issued since its last commit form a group; wait_group<N> returns once at most N of its
// groups are still in flight.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The warp's lanes copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst.
__device__ __forceinline__ void warp_stage(uint8_t* dst, const uint8_t* src, size_t bytes) {
  for (size_t c = size_t(threadIdx.x % 32) * 16; c < bytes; c += 32 * 16) cp_async16(dst + c, src + c);
}

// Programmatic dependent launch (sm_90 and later; launch.cuh's launch_pdl). A decode launch lets the next one start
// once each of its blocks is past its main loop (pdl_trigger), and waits for the previous launch to finish, its writes
// visible (pdl_wait), only before it touches activations, the cache or counters: weights never change, so a
// matrix-vector product copies its weight rows (and its norm's weights) in while the launch before it still runs.
// Expert tables are written only by copies queued on the stream between launches (never by a kernel), and a launch
// after a copy starts only once the copy is done, so the expert kernels copy their table in before the wait too.
// Every kernel launched by launch_pdl calls pdl_wait before any other memory access but those reads. Elsewhere (older
// GPUs, or SEEDLING_NO_PDL=1) both are no-ops and the launches run one after another as usual. Measured on the H200
// (docs/results/2026-11-30-cuda-decode-pdl.md): triggering after the main loop 1.04x decode, triggering first thing
// in the kernel 0.96x.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace seedling::cuda
