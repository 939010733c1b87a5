#include "model/fp8_weights.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace seedling {

ops::Matrix read_fp8_matrix(const Checkpoint& ck, const TensorInfo& t, const Fp8Blocks& blocks,
                            std::vector<std::vector<uint8_t>>* owned) {
  SEEDLING_CHECK(t.dtype == DType::F8_E4M3, "tensor '{}' is not F8_E4M3", t.name);
  if (blocks.rows <= 0 || blocks.cols <= 0) {
    fail(
        "{}: tensor '{}' is F8_E4M3 but config.json has no quantization_config with quant_method fp8 and "
        "weight_block_size",
        t.file, t.name);
  }
  if (t.shape.size() != 2)
    fail("{}: FP8 tensor '{}' has shape {}, expected a matrix", t.file, t.name, t.shape_string());
  const int64_t rows = t.shape[0], cols = t.shape[1];
  std::string scale_name = t.name;
  const std::string suffix = ".weight";
  if (scale_name.size() > suffix.size() &&
      scale_name.compare(scale_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    scale_name += "_scale_inv";
  } else {
    fail("{}: FP8 tensor '{}' is not a '*.weight' (its scales are '*.weight_scale_inv')", t.file, t.name);
  }
  if (!ck.has(scale_name)) {
    fail("{}: FP8 tensor '{}' has no '{}' beside it (its float32 block scales)", t.file, t.name, scale_name);
  }
  const TensorInfo& s = ck.get(scale_name);
  if (s.dtype != DType::F32) fail("{}: tensor '{}' has dtype {}, expected F32", s.file, s.name, dtype_name(s.dtype));
  const int64_t br = (rows + blocks.rows - 1) / blocks.rows, bc = (cols + blocks.cols - 1) / blocks.cols;
  if (s.shape != std::vector<int64_t>{br, bc}) {
    fail(
        "{}: tensor '{}' has shape {}, expected [{}, {}]: one scale per {} x {} block (quantization_config."
        "weight_block_size) of '{}' {}",
        s.file, s.name, s.shape_string(), br, bc, blocks.rows, blocks.cols, t.name, t.shape_string());
  }
  const int64_t groups = (cols + 31) / 32;
  std::vector<uint8_t>& dst = owned->emplace_back(size_t(rows * groups) * sizeof(BlockFp8G32));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* codes = t.data + size_t(r * cols);
    for (int64_t g = 0; g < groups; ++g) {
      float d;
      std::memcpy(&d, s.data + size_t((r / blocks.rows) * bc + (g * 32) / blocks.cols) * 4, 4);
      if (!std::isfinite(d)) {
        fail("{}: tensor '{}' has the non-finite scale {} at block ({}, {})", s.file, s.name, d, r / blocks.rows,
             (g * 32) / blocks.cols);
      }
      uint8_t* block = dst.data() + size_t(r * groups + g) * sizeof(BlockFp8G32);
      std::memcpy(block, &d, 4);
      const int64_t n = std::min<int64_t>(32, cols - g * 32);
      std::memset(block + 4, 0, 32);
      std::memcpy(block + 4, codes + g * 32, size_t(n));
      for (int64_t j = 0; j < n; ++j) {
        if ((block[4 + j] & 0x7F) == 0x7F) {
          fail("{}: tensor '{}' holds a NaN code at ({}, {})", t.file, t.name, r, g * 32 + j);
        }
      }
    }
  }
  return {Codec::FP8_G32, dst.data(), rows, cols};
}

}  // namespace seedling
