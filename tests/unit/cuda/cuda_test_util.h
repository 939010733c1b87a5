// Helpers of the CUDA tests: skipping where there is no GPU (CI), device copies of host vectors, random matrices in
// each codec the kernels read, packed folders made by the seedling binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "codec/quantize.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "test_util.h"

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

// The codecs the CUDA kernels read (cuda::has_kernel).
inline constexpr Codec kCudaCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,  Codec::Q8_G32,
                                        Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64};

// A matrix in `codec` made from random floats (float codecs keep the values, affine ones quantize them).
inline std::vector<uint8_t> encoded(Codec c, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = gaussian(size_t(rows * cols), seed, 0.05f);
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
  encode_matrix(c, DType::F32, w.data(), rows, cols, out.data());
  return out;
}

// Packs the checkpoint `hf` into `out` with `seedling pack` (flags appended). The binary is SEEDLING_BINARY from the
// environment when set (a test binary carried to a GPU machine), else the one of this build.
inline void pack_checkpoint(const std::string& hf, const std::string& out, const std::string& flags) {
  const char* env = std::getenv("SEEDLING_BINARY");
  const std::string bin = env != nullptr ? env : SEEDLING_BINARY;
  const std::string cmd = bin + " pack -m " + hf + " -o " + out + " --force " + flags + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace seedling::test
