// io/gguf_codec.cpp - ggml types -> codecs (see the header).
#include "io/gguf_codec.h"

#include "core/error.h"

namespace seedling {

std::optional<Codec> ggml_codec(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return Codec::F32;
    case GgmlType::F16:
      return Codec::F16;
    case GgmlType::BF16:
      return Codec::BF16;
    case GgmlType::Q4_1:
      return Codec::Q4_G32;  // byte-identical blocks (tools/packed_to_gguf.py)
    default:
      return std::nullopt;
  }
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
