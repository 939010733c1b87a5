// Helpers of the CUDA tests: skipping where there is no GPU (CI), device copies of host vectors, random matrices in
// each codec the kernels read, packed folders made by the seedling binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "codec/quantize.h"
#include "codec/seed_codec.h"
#include "cuda/device.h"
#include "cuda/device_layout.h"
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
  DeviceVec(DeviceVec&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  DeviceVec& operator=(DeviceVec&&) = delete;
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

// The codecs every CUDA kernel that reads weights takes (the tensor-core GEMMs and embed included).
inline constexpr Codec kCudaCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,   Codec::Q8_G32,
                                        Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64, Codec::FP8_G32};
// The codecs of cuda::has_kernel: the CUDA-core products (matmul, matvec, the expert kernels) also read seeds and
// MXFP4 (which the tensor-core GEMMs do not: kCudaTcCodecs).
inline constexpr Codec kCudaCoreCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,   Codec::Q8_G32,
                                            Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64, Codec::FP8_G32,
                                            Codec::P3,     Codec::P4,     Codec::S3,     Codec::MXFP4};
// The codecs the tensor-core GEMMs read (gemm.h): kCudaCoreCodecs but MXFP4.
inline constexpr Codec kCudaTcCodecs[] = {Codec::F32,    Codec::F16,    Codec::BF16,   Codec::Q8_G32,
                                          Codec::Q8_G64, Codec::Q4_G32, Codec::Q4_G64, Codec::FP8_G32,
                                          Codec::P3,     Codec::P4,     Codec::S3};

// A valid seed slice of random blocks: seeds 1..65535, coefficients -8..7, every exponent code 0..15 above `bias`
// (-19: weights up to about 0.3). Random, not searched: a search takes minutes at these sizes.
inline std::vector<uint8_t> random_seed_slice(Codec c, int64_t rows, int64_t cols, uint32_t seed, int32_t bias = -19) {
  const seed::SeedTier t = codec_seed_tier(c);
  std::vector<seed::SeedBlock> blocks(size_t(seed::seed_slice_layout(t, rows, cols).n_blocks));
  std::mt19937 rng(seed);
  for (seed::SeedBlock& b : blocks) {
    b.seed = uint16_t(1 + rng() % 65535);
    for (int p = 0; p < seed::seed_tier_spec(t).coefs; ++p) b.q[p] = int8_t(int(rng() % 16) - 8);
    b.code = uint8_t(rng() % 16);
  }
  return seed::write_seed_blob(t, rows, cols, bias, blocks);
}

// A matrix in `codec` made from random floats (float codecs keep the values, affine ones quantize them), or a
// random seed slice.
inline std::vector<uint8_t> encoded(Codec c, int64_t rows, int64_t cols, uint32_t seed) {
  if (codec_is_seed(c)) return random_seed_slice(c, rows, cols, seed);
  const std::vector<float> w = gaussian(size_t(rows * cols), seed, 0.05f);
  std::vector<uint8_t> out(codec_matrix_bytes(c, rows, cols));
  encode_matrix(c, DType::F32, w.data(), rows, cols, out.data());
  return out;
}

// A stored rows x cols matrix of codec c in VRAM as the kernels read it (cuda/device_layout.h: MXFP4 rearranged).
inline DeviceVec<uint8_t> device_weights(Codec c, const std::vector<uint8_t>& stored, int64_t rows, int64_t cols) {
  DeviceVec<uint8_t> in(stored), out(cuda::device_matrix_bytes(c, rows, cols));
  cuda::to_device_layout(c, in.get(), out.get(), rows, cols, nullptr);
  cuda::check(cudaDeviceSynchronize(), "test to_device_layout");
  return out;
}

// n expert blobs packed as `stored` (one after another) in VRAM as the kernels read them, `device` apart.
inline DeviceVec<uint8_t> device_blobs(const std::vector<uint8_t>& blobs, const cuda::ExpertLayout& stored, int n,
                                       const cuda::ExpertLayout& device) {
  DeviceVec<uint8_t> in(blobs), out(size_t(n) * device.bytes);
  for (int e = 0; e < n; ++e) {
    cuda::expert_to_device_layout(in.get() + size_t(e) * stored.bytes, stored, out.get() + size_t(e) * device.bytes,
                                  device, nullptr);
  }
  cuda::check(cudaDeviceSynchronize(), "test expert_to_device_layout");
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
