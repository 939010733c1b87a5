// cuda/forward_products.h - what the CUDA forward's blocks share (cuda_forward.cpp, mla_forward.cpp): scratch in
// device memory that only grows, and the choice between the CUDA-core and the tensor-core products by row count.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels.h"

namespace seedling::cuda {

// A device allocation that only grows (scratch whose old contents are not kept).
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  const void* ptr() const { return p_; }
  ~DeviceScratch() {
    if (p_) cudaFree(p_);
  }
  template <typename T>
  T* get(size_t count) {
    const size_t need = count * sizeof(T);
    if (need > bytes_) {
      if (p_) check(cudaFree(p_), "freeing scratch");
      p_ = nullptr;
      check(cudaMalloc(&p_, need), "allocating scratch");
      bytes_ = need;
    }
    return static_cast<T*>(p_);
  }
  // As get, but a fresh allocation is zeroed on `stream` (for buffers whose users keep parts of them at zero).
  template <typename T>
  T* get_zeroed(size_t count, cudaStream_t stream) {
    const void* before = p_;
    T* p = get<T>(count);
    if (p_ != before) check(cudaMemsetAsync(p_, 0, bytes_, stream), "zeroing scratch");
    return p;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Rows from which a forward's products run on tensor cores (cuda/gemm.h: TF32 or f16 inputs, float32 sums): below it
// the CUDA-core kernels are faster (docs/results/2026-11-30-cuda-prefill-gemm.md: 0.81x at 32 rows, 1.43x at 64).
// The router's and the head's products are the exceptions (cuda_forward.cpp's router_product, head_product): about
// float32's accuracy.
constexpr int64_t kTensorCoreRows = 64;

// Whether m rows of products with codec c run on tensor cores: from kTensorCoreRows rows, every codec but MXFP4 and
// mxfp4_ggml, which the tensor-core GEMMs do not read (gemm.h); their prompt rows take the CUDA-core products instead,
// which read every codec of has_kernel (slower for long prompts, the same contract).
bool on_tensor_cores(int64_t m, Codec c);

// y = x W^T (or y +=) for m rows, on tensor cores from kTensorCoreRows rows (every codec but MXFP4, the seed codecs
// too; the affine codecs on the f16 kernel, its operand in f16_scratch; the others, FP8 among them, on the TF32 one).
void product(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate, cudaStream_t stream,
             DeviceScratch& f16_scratch);

// product for count matrices of x (q, k, v): on tensor cores one stacked product (cuda::matmul_tc_stacked) when
// they share a codec, as packs write them, else one product each.
void products(const float* x, int64_t m, const DeviceMatrix* ws, float* const* ys, int count, cudaStream_t stream,
              DeviceScratch& f16_scratch);

}  // namespace seedling::cuda
