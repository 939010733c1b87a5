// experts/expert_weights.cpp - an expert's weights from a packed blob, and the check every provider applies to them
// before a kernel reads them: a seed part is only ever handed to a kernel after seed::validate_seed_blob accepted it.
#include <fmt/format.h>

#include "codec/seed_codec.h"
#include "experts/expert_provider.h"
#include "io/packed_model.h"

namespace seedling {

void validate_expert_weights(const ExpertWeights& w, const std::string& file, int layer, int expert) {
  const ops::Matrix* parts[3] = {&w.gate, &w.up, &w.down};
  const char* names[3] = {"gate", "up", "down"};
  for (int p = 0; p < 3; ++p) {
    const ops::Matrix& m = *parts[p];
    if (!codec_is_seed(m.codec)) continue;
    const std::string tensor =
        fmt::format("{}: layer {} expert {} {} ({})", file, layer, expert, names[p], codec_name(m.codec));
    seed::validate_seed_blob(codec_seed_tier(m.codec), m.data, m.nbytes(), m.rows, m.cols, tensor);
  }
}

ExpertWeights decode_expert_blob(const PackedModel& packed, const uint8_t* blob, int layer, int expert) {
  const PackedExpertLayer& pl = packed.expert_layer(layer);
  (void)packed.expert_blob(layer, expert);  // range check
  auto view = [&](const PackedExpertPart& p) { return ops::Matrix{p.codec, blob + p.offset, p.rows, p.cols}; };
  return {view(pl.parts[0]), view(pl.parts[1]), view(pl.parts[2])};
}

}  // namespace seedling
