// codec/gguf_codecs.cpp - see gguf_codecs.h.
#include "codec/gguf_codecs.h"

#include <utility>

#include "core/error.h"

namespace seedling {

namespace {
// The decoded types and their codecs.
constexpr std::pair<GgmlType, Codec> kDecoded[] = {
    {GgmlType::F32, Codec::F32},          {GgmlType::F16, Codec::F16},       {GgmlType::BF16, Codec::BF16},
    {GgmlType::Q8_0, Codec::Q8_0},        {GgmlType::Q4_0, Codec::Q4_0},     {GgmlType::Q4_1, Codec::Q4_G32},
    {GgmlType::Q5_0, Codec::Q5_0},        {GgmlType::Q5_1, Codec::Q5_1},     {GgmlType::Q2_K, Codec::Q2_K},
    {GgmlType::Q3_K, Codec::Q3_K},        {GgmlType::Q4_K, Codec::Q4_K},     {GgmlType::Q5_K, Codec::Q5_K},
    {GgmlType::Q6_K, Codec::Q6_K},        {GgmlType::IQ4_NL, Codec::IQ4_NL}, {GgmlType::IQ4_XS, Codec::IQ4_XS},
    {GgmlType::MXFP4, Codec::MXFP4_GGML},
};
}  // namespace

std::optional<Codec> codec_of_ggml_type(GgmlType t) {
  for (const auto& [type, codec] : kDecoded) {
    if (type == t) return codec;
  }
  return std::nullopt;
}

std::string decoded_ggml_type_names() {
  std::string s;
  for (const GgmlTypeInfo& info : ggml_types()) {
    if (!codec_of_ggml_type(info.type)) continue;
    if (!s.empty()) s += ", ";
    s += info.name;
  }
  return s;
}

Codec gguf_tensor_codec(const GgufTensor& t) {
  const std::optional<Codec> c = codec_of_ggml_type(t.type);
  if (!c) {
    fail("tensor '{}': ggml type {} is not one Seedling decodes (it decodes {})", t.name, ggml_type_name(t.type),
         decoded_ggml_type_names());
  }
  return *c;
}

}  // namespace seedling
