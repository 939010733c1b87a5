// model/fp8_weights.h - FP8 block-scaled weights as DeepSeek-V3 and the Qwen3 "-FP8" checkpoints release them, read
// into the fp8_g32 codec (codec/codec.h) without requantizing.
//
// A release stores each quantized Linear as `NAME.weight` (F8_E4M3, (out, in)) beside `NAME.weight_scale_inv` (F32,
// (ceil(out / Br), ceil(in / Bc))) for quantization_config's weight_block_size [Br, Bc]: weight[r][k] =
// e4m3(code[r][k]) * scale_inv[r / Br][k / Bc], edge blocks partial (transformers' finegrained_fp8 dequantizes so).
// The loader writes each row as 32-wide groups, each with the scale of the block it lies in (Bc a multiple of 32), so
// every value is the released one bit for bit. Memory: 36 bytes per 32 weights, a copy the model owns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "ops/matrix.h"

namespace seedling {

struct Fp8Blocks {
  int rows = 0, cols = 0;  // weight_block_size; 0: the checkpoint has no FP8 weights
};

// The F8_E4M3 tensor `t` (a (rows, cols) matrix; the caller checked its shape) and its `_scale_inv` beside it, as an
// fp8_g32 matrix appended to `owned`. An Error naming the tensor (and weight_block_size where it is the cause) for: no
// FP8 quantization_config, a missing or non-F32 scale tensor, a scale shape other than the blocks', a non-finite
// scale, a NaN code.
ops::Matrix read_fp8_matrix(const Checkpoint& ck, const TensorInfo& t, const Fp8Blocks& blocks,
                            std::vector<std::vector<uint8_t>>* owned);

}  // namespace seedling
