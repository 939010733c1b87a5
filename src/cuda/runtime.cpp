// cuda/runtime.cpp - CUDA runtime calls that need fmt (kept out of .cu files, which nvcc compiles without it).
#include <bit>

#include "codec/codec.h"
#include "core/error.h"
#include "cuda/ggml_pieces.h"
#include "cuda/kernels.h"
#include "cuda/seed_device.cuh"

namespace seedling::cuda {

using codec_ids::CodecId;
static_assert(codec_ids::F32 == Codec::F32 && int(CodecId::F32) == int(Codec::F32) &&
              int(CodecId::F16) == int(Codec::F16) && int(CodecId::BF16) == int(Codec::BF16) &&
              int(CodecId::Q8_G32) == int(Codec::Q8_G32) && int(CodecId::Q8_G64) == int(Codec::Q8_G64) &&
              int(CodecId::Q4_G32) == int(Codec::Q4_G32) && int(CodecId::Q4_G64) == int(Codec::Q4_G64) &&
              int(CodecId::P3) == int(Codec::P3) && int(CodecId::P4) == int(Codec::P4) &&
              int(CodecId::S3) == int(Codec::S3) && int(CodecId::MXFP4) == int(Codec::MXFP4) &&
              int(CodecId::FP8_G32) == int(Codec::FP8_G32) && int(CodecId::Q8_0) == int(Codec::Q8_0) &&
              int(CodecId::Q4_0) == int(Codec::Q4_0) && int(CodecId::Q5_0) == int(Codec::Q5_0) &&
              int(CodecId::Q5_1) == int(Codec::Q5_1) && int(CodecId::Q2_K) == int(Codec::Q2_K) &&
              int(CodecId::Q3_K) == int(Codec::Q3_K) && int(CodecId::Q4_K) == int(Codec::Q4_K) &&
              int(CodecId::Q5_K) == int(Codec::Q5_K) && int(CodecId::Q6_K) == int(Codec::Q6_K) &&
              int(CodecId::IQ4_NL) == int(Codec::IQ4_NL) && int(CodecId::IQ4_XS) == int(Codec::IQ4_XS) &&
              int(CodecId::MXFP4_GGML) == int(Codec::MXFP4_GGML));
static_assert(codec_ids::kQ8G32Bytes == sizeof(BlockQ8G32) && codec_ids::kQ8G64Bytes == sizeof(BlockQ8G64) &&
              codec_ids::kQ4G32Bytes == sizeof(BlockQ4G32) && codec_ids::kQ4G64Bytes == sizeof(BlockQ4G64) &&
              codec_ids::kMxfp4Bytes == sizeof(BlockMxfp4) && codec_ids::kMxfp4Bytes == sizeof(BlockMxfp4Ggml) &&
              codec_ids::kFp8G32Bytes == sizeof(BlockFp8G32));

// The ggml blocks as the kernels read them (ggml_pieces.h): elements and bytes of each, the IQ4 levels.
constexpr bool same_ggml_blocks() {
  for (const Codec c : kAllCodecs) {
    const CodecId id = CodecId(uint8_t(c));
    if (ggml_dev::is_ggml_piece(id) != (c >= Codec::Q8_0 && c < Codec::MXFP4_GGML)) return false;  // mxfp4's kernels
    if (!ggml_dev::is_ggml_piece(id)) continue;
    if (ggml_dev::block_elems(id) != codec_group(c)) return false;
  }
  for (int i = 0; i < 16; ++i) {
    if (ggml_dev::kIq4Levels[i] != ggml::kIq4nlValues[i]) return false;
  }
  return true;
}
static_assert(same_ggml_blocks());
static_assert(ggml_dev::block_bytes(CodecId::Q8_0) == sizeof(BlockQ8_0) &&
              ggml_dev::block_bytes(CodecId::Q4_0) == sizeof(BlockQ4_0) &&
              ggml_dev::block_bytes(CodecId::Q5_0) == sizeof(BlockQ5_0) &&
              ggml_dev::block_bytes(CodecId::Q5_1) == sizeof(BlockQ5_1) &&
              ggml_dev::block_bytes(CodecId::Q2_K) == sizeof(BlockQ2_K) &&
              ggml_dev::block_bytes(CodecId::Q3_K) == sizeof(BlockQ3_K) &&
              ggml_dev::block_bytes(CodecId::Q4_K) == sizeof(BlockQ4_K) &&
              ggml_dev::block_bytes(CodecId::Q5_K) == sizeof(BlockQ5_K) &&
              ggml_dev::block_bytes(CodecId::Q6_K) == sizeof(BlockQ6_K) &&
              ggml_dev::block_bytes(CodecId::IQ4_NL) == sizeof(BlockIq4Nl) &&
              ggml_dev::block_bytes(CodecId::IQ4_XS) == sizeof(BlockIq4Xs));

// The device's FP4 values are codec.h's, sign of zero included.
constexpr bool same_fp4_values() {
  for (uint32_t c = 0; c < 16; ++c) {
    if (std::bit_cast<uint32_t>(codec_ids::fp4_value(c)) != std::bit_cast<uint32_t>(kFp4Values[c])) return false;
  }
  return true;
}
static_assert(same_fp4_values());

// The device's seed decode reads the tiers as the format defines them.
constexpr bool same_tier(const seeddev::Geom& g, seed::SeedTier t) {
  const seed::SeedTierSpec sp = seed::seed_tier_spec(t);
  return g.C == sp.block && g.P == sp.coefs && g.apart == sp.codes_apart;
}
static_assert(same_tier(seeddev::kP3, seed::SeedTier::P3) && same_tier(seeddev::kP4, seed::SeedTier::P4) &&
              same_tier(seeddev::kS3, seed::SeedTier::S3));

std::string kernel_codec_names() {
  std::string names;
  for (const Codec c : kAllCodecs) {
    if (!has_kernel(c)) continue;
    if (!names.empty()) names += ", ";
    names += codec_name(c);
  }
  return names;
}

int sm_count() {
  int dev = 0, sms = 0;
  check(cudaGetDevice(&dev), "finding the current device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "reading the device's SM count");
  return sms;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {}", what, cudaGetErrorString(e));
}

}  // namespace seedling::cuda
