// Fuzz target: imatrix files (model/imatrix.h, docs/formats/imatrix.md) through Imatrix::load against the config of
// tests/data/models/qwen3_moe_a (compiled in as SEEDLING_FUZZ_MODEL; the environment variable of that name overrides
// it, for a binary run from another checkout), then every accessor on every layer, input and expert. Any input must end
// in energies or a seedling::Error, never a crash, leak, hang or sanitizer report. Built and run by
// tests/cli/fuzz_imatrix.sh.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "fuzz_files.h"
#include "model/imatrix.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using seedling::MatrixInput;
  static const seedling::ModelConfig config = [] {
    const char* model = std::getenv("SEEDLING_FUZZ_MODEL");
    return seedling::read_model_config(model != nullptr && *model != '\0' ? model : SEEDLING_FUZZ_MODEL);
  }();
  const std::string path = seedling::fuzz::write_file("imatrix.safetensors", seedling::fuzz::as_text(data, size));
  constexpr MatrixInput kInputs[] = {MatrixInput::AttnQkv,    MatrixInput::AttnO,     MatrixInput::ExpertGateUp,
                                     MatrixInput::ExpertDown, MatrixInput::MlpGateUp, MatrixInput::MlpDown};
  try {
    const seedling::Imatrix im = seedling::Imatrix::load(path, config);
    for (int l = 0; l < config.num_layers; ++l) {
      for (MatrixInput which : kInputs) {
        if (seedling::imatrix_width(config, l, which) == 0) continue;
        const bool expert = which == MatrixInput::ExpertGateUp || which == MatrixInput::ExpertDown;
        for (int e = expert ? 0 : -1; e < (expert ? config.num_experts : 0); ++e) {
          for (float v : im.sum_sq(l, which, e)) {
            if (!std::isfinite(v) || v < 0) std::abort();  // load promised finite energies >= 0
          }
          if (im.rows(l, which, e) < 0) std::abort();
          (void)im.mean_energy(l, which, e);
          if (expert) (void)im.expert_search_weights(l, e, which);
        }
      }
    }
  } catch (const seedling::Error&) {
  }
  return 0;
}
