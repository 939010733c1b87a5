#include "model/expert_parts.h"

#include <cstring>

#include "core/error.h"

namespace seedling {

Codec stored_float_codec(const TensorInfo& t) {
  const std::optional<Codec> c = codec_of_dtype(t.dtype);
  if (!c) fail("{}: tensor '{}' has dtype {}, expected BF16, F16 or F32", t.file, t.name, dtype_name(t.dtype));
  return *c;
}

namespace {

void check_shape(const TensorInfo& t, const std::vector<int64_t>& want) {
  if (t.shape != want) {
    TensorInfo w;
    w.shape = want;
    fail("{}: tensor '{}' has shape {}, expected {} from config.json", t.file, t.name, t.shape_string(),
         w.shape_string());
  }
}

// A stacked part stored as MXFP4 the way gpt-oss releases it: `name_blocks` (experts, out, in / 32, 16) of FP4 codes
// and `name_scales` (experts, out, in / 32) of e8m0 scales, both U8, always (out, in) whatever the float layout. Each
// taken row becomes a row of mxfp4 blocks (scale, then its 16 code bytes), copied into `owned`.
ops::Matrix read_mxfp4_part(const Checkpoint& ck, const ExpertPart& part, int num_experts, int64_t rows, int64_t cols,
                            std::vector<std::vector<uint8_t>>* owned) {
  const std::string blocks_name = part.name + "_blocks", scales_name = part.name + "_scales";
  if (!ck.has(scales_name)) {
    fail("{}: tensor '{}' has no '{}' beside it (MXFP4 experts need both the codes and their e8m0 scales)", ck.dir(),
         blocks_name, scales_name);
  }
  const TensorInfo& b = ck.get(blocks_name);
  const TensorInfo& s = ck.get(scales_name);
  for (const TensorInfo* t : {&b, &s}) {
    if (t->dtype != DType::U8)
      fail("{}: tensor '{}' has dtype {}, expected U8", t->file, t->name, dtype_name(t->dtype));
  }
  if (part.stacked < 0) fail("{}: MXFP4 tensor '{}' is not a stacked expert tensor", b.file, blocks_name);
  if (cols % 32 != 0) fail("{}: MXFP4 tensor '{}' has {} inputs, not a multiple of 32", b.file, blocks_name, cols);
  const int64_t out = rows * part.row_step, nb = cols / 32;
  check_shape(b, {num_experts, out, nb, 16});
  check_shape(s, {num_experts, out, nb});
  std::vector<uint8_t>& dst = owned->emplace_back(size_t(rows * nb) * sizeof(BlockMxfp4));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src_row = int64_t(part.stacked) * out + part.row_offset + r * part.row_step;
    for (int64_t k = 0; k < nb; ++k) {
      const uint8_t e = s.data[size_t(src_row * nb + k)];
      if (e == 255) {
        fail("{}: tensor '{}' holds the e8m0 scale 255 (NaN) at expert {} row {} block {}", s.file, scales_name,
             part.stacked, part.row_offset + r * part.row_step, k);
      }
      uint8_t* block = dst.data() + size_t(r * nb + k) * sizeof(BlockMxfp4);
      block[0] = e;
      std::memcpy(block + 1, b.data + size_t(src_row * nb + k) * 16, 16);
    }
  }
  return {Codec::MXFP4, dst.data(), rows, cols};
}

}  // namespace

ops::Matrix read_expert_part(const Checkpoint& ck, const ExpertPart& part, int num_experts, int64_t rows, int64_t cols,
                             std::vector<std::vector<uint8_t>>* owned, const Fp8Blocks& fp8) {
  if (!ck.has(part.name) && ck.has(part.name + "_blocks")) {
    return read_mxfp4_part(ck, part, num_experts, rows, cols, owned);
  }
  const TensorInfo& t = ck.get(part.name);
  if (t.dtype == DType::F8_E4M3) {
    if (part.stacked >= 0)
      fail("{}: FP8 tensor '{}' stacks experts: not supported (FP8 experts one tensor each)", t.file, t.name);
    check_shape(t, {rows, cols});
    return read_fp8_matrix(ck, t, fp8, owned);
  }
  const Codec codec = stored_float_codec(t);
  const int64_t out = rows * part.row_step * part.row_blocks;
  std::vector<int64_t> want;
  if (part.stacked < 0) {
    want = {rows, cols};
  } else {
    want =
        part.transposed ? std::vector<int64_t>{num_experts, cols, out} : std::vector<int64_t>{num_experts, out, cols};
  }
  check_shape(t, want);
  SEEDLING_CHECK(
      part.stacked < num_experts && part.row_offset >= 0 && part.row_offset + (rows - 1) * part.row_step < out,
      "expert part '{}': expert {} offset {} step {}", part.name, part.stacked, part.row_offset, part.row_step);
  if (part.stacked < 0) return {codec, t.data, rows, cols};
  const size_t elem = codec_block_bytes(codec);
  const uint8_t* base = t.data + size_t(part.stacked) * size_t(out * cols) * elem;
  if (!part.transposed && part.row_step == 1) return {codec, base + size_t(part.row_offset * cols) * elem, rows, cols};
  std::vector<uint8_t>& dst = owned->emplace_back(size_t(rows * cols) * elem);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src_row = part.row_offset + r * part.row_step;
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t at = part.transposed ? k * out + src_row : src_row * cols + k;
      std::memcpy(dst.data() + size_t(r * cols + k) * elem, base + size_t(at) * elem, elem);
    }
  }
  return {codec, dst.data(), rows, cols};
}

std::vector<float> expert_part_rows(const std::vector<float>& stacked, const ExpertPart& part, int num_experts,
                                    int64_t rows) {
  const int64_t out = rows * part.row_step * part.row_blocks;
  SEEDLING_CHECK(int64_t(stacked.size()) == num_experts * out, "stacked vector of {} for {} experts of {}",
                 stacked.size(), num_experts, out);
  std::vector<float> v(size_t(num_experts * rows));
  for (int e = 0; e < num_experts; ++e) {
    for (int64_t r = 0; r < rows; ++r) {
      v[size_t(e * rows + r)] = stacked[size_t(e * out + part.row_offset + r * part.row_step)];
    }
  }
  return v;
}

}  // namespace seedling
