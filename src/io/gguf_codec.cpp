// io/gguf_codec.cpp - ggml types -> codecs (see the header).
#include "io/gguf_codec.h"

#include <utility>

#include "core/error.h"

namespace seedling {

namespace {
// The ggml types Seedling computes on, and their codecs (codec/ggml_quants.h gives the values).
constexpr std::pair<GgmlType, Codec> kComputed[] = {
    {GgmlType::F32, Codec::F32},          {GgmlType::F16, Codec::F16},       {GgmlType::BF16, Codec::BF16},
    {GgmlType::Q8_0, Codec::Q8_0},        {GgmlType::Q4_0, Codec::Q4_0},     {GgmlType::Q4_1, Codec::Q4_G32},
    {GgmlType::Q5_0, Codec::Q5_0},        {GgmlType::Q5_1, Codec::Q5_1},     {GgmlType::Q2_K, Codec::Q2_K},
    {GgmlType::Q3_K, Codec::Q3_K},        {GgmlType::Q4_K, Codec::Q4_K},     {GgmlType::Q5_K, Codec::Q5_K},
    {GgmlType::Q6_K, Codec::Q6_K},        {GgmlType::IQ4_NL, Codec::IQ4_NL}, {GgmlType::IQ4_XS, Codec::IQ4_XS},
    {GgmlType::MXFP4, Codec::MXFP4_GGML},
};
}  // namespace

std::optional<Codec> ggml_codec(GgmlType t) {
  for (const auto& [type, codec] : kComputed) {
    if (type == t) return codec;  // Q4_1 is q4_g32, byte-identical blocks (tools/packed_to_gguf.py)
  }
  return std::nullopt;
}

std::string ggml_types_read() {
  std::string out;
  for (const GgmlTypeInfo& info : ggml_types()) {
    if (ggml_codec(info.type)) out += (out.empty() ? "" : ", ") + std::string(info.name);
  }
  return out;
}

Codec gguf_tensor_codec(const GgufFile& file, const GgufTensor& t) {
  const std::optional<Codec> c = ggml_codec(t.type);
  if (!c) {
    fail("{}: tensor '{}' is {}, which Seedling does not compute on yet (it reads {})", file.path(), t.name,
         ggml_type_name(t.type), ggml_types_read());
  }
  return *c;
}

}  // namespace seedling
