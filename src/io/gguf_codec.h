// io/gguf_codec.h - a GGUF tensor's ggml type as a Seedling codec: the one place a ggml type becomes computable.
//
// A ggml type runs when its blocks are a codec's blocks byte for byte, so a tensor is handed to the kernels as
// stored: F32, F16 and BF16 are the float codecs, Q4_1 ({f16 d, f16 m, u8 q[16]}, element i in the low nibble of
// q[i] and i + 16 in its high, value d * q + m) is q4_g32. Every other type is refused with its name; adding one is
// its line in ggml_codec (gguf_codec.cpp) once its codec exists.
#pragma once

#include <optional>
#include <string>

#include "core/codec_layout.h"
#include "io/gguf.h"

namespace seedling {

// The codec whose bytes a ggml type's blocks are, or nullopt for a type Seedling cannot compute on yet.
std::optional<Codec> ggml_codec(GgmlType t);
// "F32, F16, BF16, Q4_1": the ggml types ggml_codec maps, in the reader's table order.
std::string ggml_types_read();
// The codec of tensor `t` of `file`; an Error naming the file, the tensor, its type and the types read otherwise.
Codec gguf_tensor_codec(const GgufFile& file, const GgufTensor& t);

}  // namespace seedling
