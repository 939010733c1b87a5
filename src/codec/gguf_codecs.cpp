// codec/gguf_codecs.cpp - see gguf_codecs.h.
#include "codec/gguf_codecs.h"

#include "core/error.h"

namespace seedling {

std::optional<Codec> codec_of_ggml_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return Codec::F32;
    case GgmlType::F16:
      return Codec::F16;
    case GgmlType::BF16:
      return Codec::BF16;
    case GgmlType::Q8_0:
      return Codec::Q8_0;
    case GgmlType::Q4_0:
      return Codec::Q4_0;
    case GgmlType::Q4_1:
      return Codec::Q4_G32;
    case GgmlType::Q5_0:
      return Codec::Q5_0;
    case GgmlType::Q5_1:
      return Codec::Q5_1;
    case GgmlType::Q2_K:
      return Codec::Q2_K;
    case GgmlType::Q3_K:
      return Codec::Q3_K;
    case GgmlType::Q4_K:
      return Codec::Q4_K;
    case GgmlType::Q5_K:
      return Codec::Q5_K;
    case GgmlType::Q6_K:
      return Codec::Q6_K;
    case GgmlType::IQ4_NL:
      return Codec::IQ4_NL;
    case GgmlType::IQ4_XS:
      return Codec::IQ4_XS;
    case GgmlType::MXFP4:
      return Codec::MXFP4_GGML;
    default:
      return std::nullopt;
  }
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
