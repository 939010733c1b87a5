// codec/quantize.h - float rows -> stored rows of a codec (codec/codec.h gives the layout).
//
// Affine groups: m = min(group), d = (max - min) / (2^bits - 1), both rounded to float16 first; then
// q = clamp(round((x - m16) / d16), 0, 2^bits - 1), so the rounding of d and m is part of the error the codes see.
// Error bound per element (tested): |x - value| <= d16 / 2 + rounding of d16 * q + m16, about (max - min) / 2^(bits+1)
// relative plus float16's 2^-11 of |m| and of d * q.
#pragma once

#include <cstdint>
#include <string>

#include "codec/codec.h"
#include "core/dtype.h"

namespace seedling {

// Whether Seedling can write codec c (encode_row, or codec/seed_search.h for the seed tiers): every codec but
// ggml's types, which are read as a GGUF file stores them and never written.
bool codec_has_encoder(Codec c);
// The codecs with an encoder, for error messages ("f32, f16, ..., fp8_g32"): what pack and synth can write.
std::string encoder_codec_names();

// Encodes one row of `cols` float32 values into codec_row_bytes(c, cols) bytes at `out`. Throws Error when a value
// is not finite or a group's scale or minimum does not fit float16, or when c has no encoder (naming it).
void encode_row(Codec c, const float* x, int64_t cols, uint8_t* out);

// Encodes rows x cols elements stored as `src_dtype` (f32, f16 or bf16) into codec_matrix_bytes(c, rows, cols)
// bytes. A float codec equal to the source dtype copies the bytes (bf16 -> bf16 is exact passthrough).
void encode_matrix(Codec c, DType src_dtype, const void* src, int64_t rows, int64_t cols, uint8_t* out);

}  // namespace seedling
