// cuda/runtime.cpp - CUDA runtime calls that need fmt (kept out of .cu files, which nvcc compiles without it).
#include "codec/codec.h"
#include "core/error.h"
#include "cuda/kernels.h"

namespace seedling::cuda {

using codec_ids::CodecId;
static_assert(codec_ids::F32 == Codec::F32 && int(CodecId::F32) == int(Codec::F32) &&
              int(CodecId::F16) == int(Codec::F16) && int(CodecId::BF16) == int(Codec::BF16) &&
              int(CodecId::Q8_G32) == int(Codec::Q8_G32) && int(CodecId::Q8_G64) == int(Codec::Q8_G64) &&
              int(CodecId::Q4_G32) == int(Codec::Q4_G32) && int(CodecId::Q4_G64) == int(Codec::Q4_G64));
static_assert(codec_ids::kQ8G32Bytes == sizeof(BlockQ8G32) && codec_ids::kQ8G64Bytes == sizeof(BlockQ8G64) &&
              codec_ids::kQ4G32Bytes == sizeof(BlockQ4G32) && codec_ids::kQ4G64Bytes == sizeof(BlockQ4G64));

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {}", what, cudaGetErrorString(e));
}

}  // namespace seedling::cuda
