// cuda/device_scratch.h - VRAM scratch of the CUDA forward (cuda_forward.cpp, linear_attention.cpp, mla_forward.cpp):
// a buffer that only grows, its old contents not kept.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

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

}  // namespace seedling::cuda
