// codec/gguf_codecs.h - which Seedling codec reads a GGUF tensor's bytes as stored (docs/formats/gguf.md).
//
// F32, F16, BF16: the float codecs; Q4_1: q4_g32 (the same block byte for byte); MXFP4: mxfp4_ggml (ggml's nibble
// order, not Seedling's mxfp4); Q8_0 ... IQ4_XS: the codec of the same name (codec/ggml_quants.h). Every other ggml
// type (Q8_1, Q8_K, the IQ1/IQ2/IQ3 types, the integer and F64 types) is refused by name.
#pragma once

#include <optional>
#include <string>

#include "core/codec_layout.h"
#include "io/gguf.h"

namespace seedling {

// The codec of ggml type t, or nullopt for a type Seedling does not decode.
std::optional<Codec> codec_of_ggml_type(GgmlType t);
// "F32, F16, Q4_0, Q4_1, ...": the ggml types codec_of_ggml_type maps, by type id.
std::string decoded_ggml_type_names();
// The codec of tensor t; throws Error naming the tensor, its type and the decoded types when there is none.
Codec gguf_tensor_codec(const GgufTensor& t);

}  // namespace seedling
