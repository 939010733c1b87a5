// io/gguf_codec.h - a GGUF tensor's ggml type as a Seedling codec: the one place a ggml type becomes computable.
//
// A ggml type runs when its blocks are a codec's blocks byte for byte, so a tensor is handed to the kernels as
// stored: F32, F16 and BF16 are the float codecs; Q4_1 ({f16 d, f16 m, u8 q[16]}, element i in the low nibble of
// q[i] and i + 16 in its high, value d * q + m) is q4_g32; MXFP4 is mxfp4_ggml (ggml's nibble order, not Seedling's
// mxfp4); Q8_0, Q4_0, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS are the codecs of the same name (codec/ggml_quants.h).
// Every other type (Q8_1, Q8_K, the IQ1/IQ2/IQ3 types, the integer and F64 types) is refused with its name.
#pragma once

#include <optional>
#include <string>

#include "core/codec_layout.h"
#include "io/gguf.h"

namespace seedling {

// The codec whose bytes a ggml type's blocks are, or nullopt for a type Seedling cannot compute on yet.
std::optional<Codec> ggml_codec(GgmlType t);
// "F32, F16, Q4_0, Q4_1, ...": the ggml types ggml_codec maps, in the reader's table order.
std::string ggml_types_read();
// The codec of tensor `t` of `file`; an Error naming the file, the tensor, its type and the types read otherwise.
Codec gguf_tensor_codec(const GgufFile& file, const GgufTensor& t);

}  // namespace seedling
