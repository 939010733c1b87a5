// FP8 block-scaled weights (codec fp8_g32, model/fp8_weights.h): the e4m3 values and rounding, the released layout
// read back bit for bit, and bad FP8 input refused naming the tensor or key. The kernel against the reference is
// codec_test.cpp's Fp8Shapes; the model against transformers is golden_test.cpp's deepseek_v3_fp8.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "codec/quantize.h"
#include "core/error.h"
#include "experts/resident_experts.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "test_util.h"

namespace seedling {

namespace {

const std::string kFp8 = "models/deepseek_v3_fp8";

std::string load_error(const std::string& dir) {
  try {
    Model::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// hub/ into `dst` with the tensors of `replace` (name -> (dtype, shape, bytes)) in place of the stored ones, one file.
struct Replacement {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void copy_hub(const std::string& dst, const std::map<std::string, Replacement>& replace, const nlohmann::json& config) {
  const std::string src = test::data_path(kFp8 + "/hub");
  const Checkpoint ck(src);
  SafetensorsWriter w;
  for (const auto& [name, t] : ck.all()) {
    const auto it = replace.find(name);
    if (it != replace.end()) {
      const Replacement& r = it->second;
      w.add(name, r.dtype, r.shape,
            [&r](uint8_t* out, size_t off, size_t n) { std::memcpy(out, r.bytes.data() + off, n); });
    } else {
      const TensorInfo* ti = t;
      w.add(name, ti->dtype, ti->shape,
            [ti](uint8_t* out, size_t off, size_t n) { std::memcpy(out, ti->data + off, n); });
    }
  }
  w.write(dst + "/model.safetensors");
  test::write_file(dst + "/config.json", config.dump());
}

nlohmann::json hub_config() {
  return test::read_json(test::data_path(kFp8 + "/hub/config.json"));
}

}  // namespace

TEST(Fp8, E4m3ValuesAreTheFloat8E4m3fnOnes) {
  EXPECT_EQ(e4m3_value(0x00), 0.0f);
  EXPECT_EQ(e4m3_value(0x38), 1.0f);           // exponent 7 = bias
  EXPECT_EQ(e4m3_value(0x7E), 448.0f);         // the largest finite: 2^8 * 1.75
  EXPECT_EQ(e4m3_value(0x08), 0x1.0p-6f);      // the smallest normal
  EXPECT_EQ(e4m3_value(0x01), 0x1.0p-9f);      // the smallest subnormal: 1/8 * 2^-6
  EXPECT_EQ(e4m3_value(0x07), 7 * 0x1.0p-9f);  // the largest subnormal
  EXPECT_EQ(e4m3_value(0xB9), -1.125f);
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_value(0xFF)));
  for (int c = 1; c < 0x7F; ++c) EXPECT_LT(e4m3_value(uint8_t(c - 1)), e4m3_value(uint8_t(c))) << c;
}

// The block: float32 scale then 32 codes; scale max / 448; nearest value, ties to the even code.
TEST(Fp8, EncodeUsesTheMaxOver448ScaleAndRoundsToNearestEven) {
  std::vector<float> x(40, 0.0f);
  x[0] = 448.0f;   // the max: scale 1
  x[1] = -1.0f;    // 0xB8
  x[2] = 1.0625f;  // between 1 (0x38) and 1.125 (0x39): the tie goes to the even code 0x38
  x[3] = 1.1875f;  // between 1.125 (0x39) and 1.25 (0x3A): to 0x3A
  x[4] = 1.1f;     // nearer 1.125
  x[33] = 3.0f;    // second group: max 3, scale 3 / 448, 3 -> 448 (0x7E)
  std::vector<uint8_t> b(codec_row_bytes(Codec::FP8_G32, 40));
  ASSERT_EQ(b.size(), 72u);
  encode_row(Codec::FP8_G32, x.data(), 40, b.data());
  float d;
  std::memcpy(&d, b.data(), 4);
  EXPECT_EQ(d, 1.0f);
  EXPECT_EQ(b[4 + 0], 0x7E);
  EXPECT_EQ(b[4 + 1], 0xB8);
  EXPECT_EQ(b[4 + 2], 0x38);
  EXPECT_EQ(b[4 + 3], 0x3A);
  EXPECT_EQ(b[4 + 4], 0x39);
  std::memcpy(&d, b.data() + 36, 4);
  EXPECT_EQ(d, 3.0f / 448.0f);
  EXPECT_EQ(b[36 + 4 + 1], 0x7E);
  EXPECT_EQ(codec_value(Codec::FP8_G32, b.data(), 33), 448.0f * (3.0f / 448.0f));
  EXPECT_EQ(codec_value(Codec::FP8_G32, b.data(), 3), 1.25f);
}

// Rounding error: e4m3 keeps 3 mantissa bits, so a normal value is off by at most 2^-4 of itself, a subnormal one by
// half the subnormal step d * 2^-10; the group's largest value is exact (448 d, up to d's own rounding).
TEST(Fp8, EncodeErrorIsWithinHalfAStepOfE4m3) {
  const std::vector<float> x = test::gaussian(32 * 50, 5, 2.0f);
  std::vector<uint8_t> b(codec_row_bytes(Codec::FP8_G32, int64_t(x.size())));
  encode_row(Codec::FP8_G32, x.data(), int64_t(x.size()), b.data());
  for (size_t g = 0; g < x.size() / 32; ++g) {
    float d;
    std::memcpy(&d, b.data() + g * 36, 4);
    for (size_t j = 0; j < 32; ++j) {
      const size_t k = g * 32 + j;
      const double err = std::fabs(double(codec_value(Codec::FP8_G32, b.data(), int64_t(k))) - double(x[k]));
      const double bound = std::max(std::fabs(double(x[k])) * 0x1.0p-4, double(d) * 0x1.0p-10) * (1 + 1e-6);
      ASSERT_LE(err, bound) << k << " " << x[k];
    }
  }
}

// hub/ holds every Linear of the layers as F8_E4M3 + F32 block scales (40 x 64 with 32 x 32 blocks: partial edge
// blocks); hf/ the same weights dequantized, exact in bf16. Every value read from hub/ is hf/'s bit for bit.
TEST(Fp8, ReleasedWeightsReadBackAsTheDequantizedOnesBitForBit) {
  auto hub = Model::load(test::data_path(kFp8 + "/hub"));
  auto hf = Model::load(test::data_path(kFp8 + "/hf"));
  const ModelConfig& c = hub->config();
  EXPECT_EQ(c.fp8_block_rows, 32);
  EXPECT_EQ(c.fp8_block_cols, 32);
  int fp8 = 0;
  auto same = [&](const ops::Matrix& a, const ops::Matrix& b, const std::string& what) {
    ASSERT_EQ(a.rows, b.rows) << what;
    ASSERT_EQ(a.cols, b.cols) << what;
    if (a.codec == Codec::FP8_G32) ++fp8;
    for (int64_t r = 0; r < a.rows; ++r) {
      for (int64_t k = 0; k < a.cols; ++k) ASSERT_EQ(a.at(r, k), b.at(r, k)) << what << " (" << r << ", " << k << ")";
    }
  };
  for (int l = 0; l < c.num_layers; ++l) {
    for (const TensorSpec& t : layer_tensors(c, hub->family(), l)) {
      const ops::Matrix* a = hub->weights().layers[size_t(l)].matrix_of(t.role);
      if (a != nullptr) same(*a, *hf->weights().layers[size_t(l)].matrix_of(t.role), t.name);
    }
    if (!c.has_experts(l)) continue;
    const auto& ea = dynamic_cast<const ResidentExperts&>(hub->experts()).table()[size_t(l)];
    const auto& eb = dynamic_cast<const ResidentExperts&>(hf->experts()).table()[size_t(l)];
    for (int e = 0; e < c.num_experts; ++e) {
      same(ea[size_t(e)].gate, eb[size_t(e)].gate, "gate");
      same(ea[size_t(e)].up, eb[size_t(e)].up, "up");
      same(ea[size_t(e)].down, eb[size_t(e)].down, "down");
    }
  }
  // 3 layers x (q_a, q_b, kv_a, kv_b, o) + the dense MLP's 3 + 2 MoE layers x the shared expert's 3. The routed
  // experts of this golden are bf16: transformers 5 holds them as 3-D parameters, which the generator's
  // is_fp8_linear (2-D only) left unquantized; FP8 experts of their own are AQwen3MoeFp8ReleaseIsReadByTheSameReader's.
  EXPECT_EQ(fp8, 15 + 3 + 2 * 3);
  EXPECT_EQ(hub->weights().layers[1].router.codec, Codec::BF16);  // the router stays bf16, as released
}

TEST(Fp8, BadScalesAndBlockSizesAreRefusedNamingTheTensorOrKey) {
  const std::string scale = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv";  // [2, 2] of 40 x 64
  {  // a scale tensor of the wrong shape
    test::ScratchDir dir("fp8shape");
    copy_hub(dir.str(), {{scale, {DType::F32, {1, 2}, std::vector<uint8_t>(8, 0)}}}, hub_config());
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("'" + scale + "' has shape [1, 2], expected [2, 2]"), std::string::npos) << e;
  }
  {  // a scale tensor of another dtype
    test::ScratchDir dir("fp8dtype");
    copy_hub(dir.str(), {{scale, {DType::BF16, {2, 2}, std::vector<uint8_t>(8, 0)}}}, hub_config());
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("'" + scale + "' has dtype BF16, expected F32"), std::string::npos) << e;
  }
  {  // weight_block_size other than the stored blocks: the first FP8 tensor's scales do not fit
    test::ScratchDir dir("fp8block");
    nlohmann::json cfg = hub_config();
    cfg["quantization_config"]["weight_block_size"] = {64, 64};
    copy_hub(dir.str(), {}, cfg);
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("weight_block_size"), std::string::npos) << e;
    EXPECT_NE(e.find("weight_scale_inv' has shape"), std::string::npos) << e;
  }
  {  // a block width the fp8_g32 groups cannot carry
    test::ScratchDir dir("fp8width");
    nlohmann::json cfg = hub_config();
    cfg["quantization_config"]["weight_block_size"] = {32, 16};
    copy_hub(dir.str(), {}, cfg);
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("'quantization_config.weight_block_size'"), std::string::npos) << e;
  }
  {  // FP8 tensors without quantization_config
    test::ScratchDir dir("fp8noconfig");
    nlohmann::json cfg = hub_config();
    cfg.erase("quantization_config");
    copy_hub(dir.str(), {}, cfg);
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("is F8_E4M3 but config.json has no quantization_config"), std::string::npos) << e;
  }
  {  // a missing scale tensor, and a NaN code
    test::ScratchDir dir("fp8nan");
    const std::string w = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
    std::vector<uint8_t> codes(40 * 64, 0x38);
    codes[65] = 0x7F;
    copy_hub(dir.str(), {{w, {DType::F8_E4M3, {40, 64}, codes}}}, hub_config());
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("'" + w + "' holds a NaN code at (1, 1)"), std::string::npos) << e;
  }
}

TEST(Fp8, AQwen3MoeFp8ReleaseIsReadByTheSameReader) {
  // The reader is the checkpoint's, not the family's: one qwen3_moe_a expert rounded to FP8 (a scale per 32 x 32
  // block: its max / 448) and stored the released way (Qwen3-30B-A3B-FP8's naming) loads as the rounded values.
  const std::string src = test::data_path("models/qwen3_moe_a/hf");
  const Checkpoint ck(src);
  test::ScratchDir dir("qwenfp8");
  SafetensorsWriter w;
  std::vector<std::vector<uint8_t>> keep;
  const std::string name = "model.layers.0.mlp.experts.3.up_proj.weight";
  const TensorInfo& t = ck.get(name);
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const ops::Matrix orig{t.dtype, t.data, rows, cols};
  // One scale per 32 x 32 block: the block's max / 448; codes rounded by the encoder at that scale.
  const int64_t br = (rows + 31) / 32, bc = (cols + 31) / 32;
  std::vector<float> scales(size_t(br * bc), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      float& s = scales[size_t((r / 32) * bc + k / 32)];
      s = std::max(s, std::fabs(orig.at(r, k)) / 448.0f);
    }
  }
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  std::vector<float> want(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k0 = 0; k0 < cols; k0 += 32) {
      const float s = scales[size_t((r / 32) * bc + k0 / 32)];
      const int64_t n = std::min<int64_t>(32, cols - k0);
      for (int64_t j = 0; j < n; ++j) {  // the nearest code of orig / s, s the block's scale
        const float v = orig.at(r, k0 + j) / s;
        int best = 0;
        for (int c = 0; c < 256; ++c) {
          if (std::isnan(e4m3_value(uint8_t(c)))) continue;
          if (std::fabs(e4m3_value(uint8_t(c)) - v) < std::fabs(e4m3_value(uint8_t(best)) - v)) best = c;
        }
        codes[size_t(r * cols + k0 + j)] = uint8_t(best);
        want[size_t(r * cols + k0 + j)] = e4m3_value(uint8_t(best)) * s;
      }
    }
  }
  for (const auto& [n, ti] : ck.all()) {
    if (n == name) continue;
    const TensorInfo* p = ti;
    w.add(n, p->dtype, p->shape, [p](uint8_t* out, size_t off, size_t b) { std::memcpy(out, p->data + off, b); });
  }
  w.add(name, DType::F8_E4M3, {rows, cols},
        [&](uint8_t* out, size_t off, size_t b) { std::memcpy(out, codes.data() + off, b); });
  w.add(name + "_scale_inv", DType::F32, {br, bc}, [&](uint8_t* out, size_t off, size_t b) {
    std::memcpy(out, reinterpret_cast<const uint8_t*>(scales.data()) + off, b);
  });
  w.write(dir / "model.safetensors");
  nlohmann::json cfg = test::read_json(src + "/config.json");
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {32, 32}}};
  test::write_file(dir / "config.json", cfg.dump());
  auto m = Model::load(dir.str());
  const ops::Matrix& up = dynamic_cast<const ResidentExperts&>(m->experts()).table()[0][3].up;
  ASSERT_EQ(up.codec, Codec::FP8_G32);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(up.at(r, k), want[size_t(r * cols + k)]) << r << " " << k;
  }
}

}  // namespace seedling
