// Helpers of the CUDA tests: skipping where there is no GPU (CI), device copies of host vectors, random matrices in
// each codec the kernels read, packed folders made by the seedling binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/ggml_quants.h"
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
// GGUF's ggml types that every CUDA kernel reading weights takes (the tensor-core GEMMs and embed included), read in
// pieces (cuda/ggml_pieces.h); the CUDA-core products also read mxfp4_ggml (kGgmlCoreCodecs), as MXFP4. Their rows
// are whole blocks (whole_blocks), as a GGUF's are and as the CPU requires.
inline constexpr Codec kGgmlCodecs[] = {Codec::Q8_0, Codec::Q4_0, Codec::Q5_0, Codec::Q5_1,   Codec::Q2_K,  Codec::Q3_K,
                                        Codec::Q4_K, Codec::Q5_K, Codec::Q6_K, Codec::IQ4_NL, Codec::IQ4_XS};
inline constexpr Codec kGgmlCoreCodecs[] = {Codec::Q8_0, Codec::Q4_0,   Codec::Q5_0,   Codec::Q5_1,
                                            Codec::Q2_K, Codec::Q3_K,   Codec::Q4_K,   Codec::Q5_K,
                                            Codec::Q6_K, Codec::IQ4_NL, Codec::IQ4_XS, Codec::MXFP4_GGML};
// The ggml codecs whose values the f16 GEMM kernel forms (gemm.cu's f16_weights: d q (+ m) of float16 fields); the
// others take the TF32 kernel.
inline bool ggml_on_f16_kernel(Codec c) {
  return c == Codec::Q8_0 || c == Codec::Q4_0 || c == Codec::Q5_0 || c == Codec::Q5_1 || c == Codec::IQ4_NL;
}

// cols rounded up to whole blocks of a ggml codec (32 or 256 elements); other codecs' cols as they are.
inline int64_t whole_blocks(Codec c, int64_t cols) {
  if (!codec_is_ggml(c)) return cols;
  const int64_t g = codec_group(c);
  return (cols + g - 1) / g * g;
}

// n random blocks of ggml codec c: random code and sub-block scale bytes; each float16 field (d, dmin, m) a random
// float16 of either sign and of magnitude up to `scale` over the type's largest |code x sub-block scale| (so values
// stay within about `scale`; the K types' d is often a float16 subnormal); mxfp4_ggml's e8m0 byte in 116..123.
inline std::vector<uint8_t> random_ggml_blocks(Codec c, size_t n, uint32_t seed, float scale = 0.1f) {
  std::mt19937 rng(seed);
  const size_t bytes = codec_block_bytes(c);
  std::vector<uint8_t> out(n * bytes);
  for (uint8_t& b : out) b = uint8_t(rng());
  // The largest |code x sub-block scale| of each type (codec/ggml_quants.h), and of |min| for dmin.
  const float reach = c == Codec::Q8_0 || c == Codec::IQ4_NL ? 128.0f
                      : c == Codec::Q4_0                     ? 8.0f
                      : c == Codec::Q5_0                     ? 16.0f
                      : c == Codec::Q5_1                     ? 32.0f
                      : c == Codec::Q2_K                     ? 45.0f
                      : c == Codec::Q3_K                     ? 128.0f
                      : c == Codec::Q4_K                     ? 945.0f
                      : c == Codec::Q5_K                     ? 1953.0f
                                                             : 4096.0f;  // Q6_K, IQ4_XS
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* b = out.data() + i * bytes;
    if (c == Codec::MXFP4_GGML) {
      b[0] = uint8_t(116 + rng() % 8);
      continue;
    }
    const std::vector<size_t> fields = ggml::ggml_f16_fields(c);
    for (size_t f = 0; f < fields.size(); ++f) {
      // d: scale / reach; dmin (Q2_K, Q4_K, Q5_K: times mins up to 15 or 63) and Q5_1's m: about scale.
      const float over = f == 0 ? reach : c == Codec::Q5_1 ? 1.0f : c == Codec::Q2_K ? 15.0f : 63.0f;
      const float v = (rng() % 2 == 0 ? 1.0f : -1.0f) * mag(rng) * scale / over;
      const uint16_t h = f32_to_f16(v);
      std::memcpy(b + fields[f], &h, 2);
    }
  }
  return out;
}

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
// random seed slice, or random ggml blocks (random_ggml_blocks; cols whole blocks).
inline std::vector<uint8_t> encoded(Codec c, int64_t rows, int64_t cols, uint32_t seed) {
  if (codec_is_seed(c)) return random_seed_slice(c, rows, cols, seed);
  if (codec_is_ggml(c))
    return random_ggml_blocks(c, size_t(rows) * codec_row_bytes(c, cols) / codec_block_bytes(c), seed);
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
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << cmd
      << (env == nullptr ? " (a test binary carried to another machine finds seedling through SEEDLING_BINARY)" : "");
}

}  // namespace seedling::test
