// Fuzz target: config.json through read_model_config (model/model.h), so every family's config reader runs on it.
// The input up to its first NUL byte is config.json; what follows the NUL, if there is one, is generation_config.json.
// Any input must end in a ModelConfig or a seedling::Error, never a crash, leak, hang or sanitizer report. Built and
// run by tests/cli/fuzz_config.sh.
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "fuzz_files.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = seedling::fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::filesystem::path dir = seedling::fuzz::scratch_dir();
  seedling::fuzz::write_file("config.json", input.substr(0, nul));
  std::error_code ec;
  std::filesystem::remove(dir / "generation_config.json", ec);
  if (nul != std::string_view::npos) seedling::fuzz::write_file("generation_config.json", input.substr(nul + 1));
  try {
    const seedling::Family* family = nullptr;
    const seedling::ModelConfig c = seedling::read_model_config(dir.string(), &family);
    // What the loader relies on once a config is accepted: one plan per layer, and products of sizes that fit.
    if (c.layers.size() != size_t(c.num_layers) || c.layer_has_experts.size() != size_t(c.num_layers)) std::abort();
    if (c.num_layers <= 0 || c.hidden_size <= 0 || c.vocab_size <= 0 || c.head_dim <= 0) std::abort();
    (void)c.q_dim();
    (void)c.kv_dim();
    (void)c.rotary_dim();
  } catch (const seedling::Error&) {
  }
  return 0;
}
