// model/gguf_source.h - the tensors of a GGUF file as Model::load asks for them (a WeightSource).
//
// Model::load asks by the family's (Hugging Face) tensor names; the source knows each one's role and layer from the
// family's schema (layer_tensors) and reads the GGUF tensor gguf_tensor_name gives (model/gguf_config.h). GGUF
// dimensions are ne0 (the contiguous row) first: reversed, they are our (rows, cols); size-1 dimensions the
// converter squeezed away (qwen2moe's shared-expert gate) are put back. The bytes are handed out as stored, in the
// codec gguf_tensor_codec names (io/gguf_codec.h), as views into the mapping; the exceptions are copies made once:
// llama's q and k rows back in the Hugging Face order, and gpt-oss's gate and up expert biases joined as the family
// lays them out. A stacked expert tensor ([E x I x H]) gives each expert its rows as one contiguous slice. After the
// load, a tensor of the file that no role read is an Error naming it, so nothing is silently dropped.
#pragma once

#include <memory>
#include <vector>

#include "io/gguf.h"
#include "model/gguf_config.h"
#include "model/weight_source.h"

namespace seedling {

// `owned` holds the copies and must outlive the weights; `g` must too.
std::unique_ptr<WeightSource> make_gguf_source(const GgufFile& g, const GgufModel& m,
                                               std::vector<std::vector<uint8_t>>* owned);

}  // namespace seedling
