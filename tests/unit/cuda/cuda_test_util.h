// Helpers of the CUDA tests: skipping where there is no GPU (CI), device copies of host vectors.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "cuda/device.h"
#include "cuda/kernels.h"

namespace seedling::test {

// CI compiles the CUDA tests on a machine without a GPU: there they skip, saying why.
#define SKIP_WITHOUT_CUDA_DEVICE()                                                         \
  do {                                                                                     \
    const CudaDevices devices_ = cuda_devices();                                           \
    if (devices_.devices.empty()) GTEST_SKIP() << "no CUDA device: " << devices_.why_none; \
  } while (0)

// A device array of T, filled from (and read back into) host vectors.
template <typename T>
class DeviceVec {
 public:
  explicit DeviceVec(size_t n) : n_(n) {
    cuda::check(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)), "test alloc");
  }
  explicit DeviceVec(const std::vector<T>& v) : DeviceVec(v.size()) { upload(v); }
  ~DeviceVec() { cudaFree(p_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  void upload(const std::vector<T>& v) {
    cuda::check(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "test upload");
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    cuda::check(cudaDeviceSynchronize(), "test kernels");
    cuda::check(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "test download");
    return v;
  }
  T* get() { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  size_t n_;
};

// A float vector that holds a poison value, so an unwritten output is seen.
inline std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, 1e30f);
}

}  // namespace seedling::test
