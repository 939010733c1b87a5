// engine/generate.h - one sequence from prompt to stop: prefill, then sample and decode token by token.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"

namespace seedling {

struct GenerateOptions {
  int max_new_tokens = 32;
  SamplerParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated, stop id included when one ended it
  double prompt_seconds = 0;
  double decode_seconds = 0;  // from the first sampled token to the last
  std::string stop_reason;    // "eos", "length", or "callback"
};

// on_token is called with each generated id; returning false stops generation.
// This form runs on a fresh sequence that is freed at the end.
GenerateResult generate(Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<bool(int32_t)>& on_token = {});

// Continues sequence `seq`: feeds `prompt` (the tokens after what the sequence already holds), then generates.
// `context` holds every id the sequence has seen (for the repetition penalty) and gets the generated ids appended.
// On return the sequence holds every generated id but the last, which was sampled and never fed.
GenerateResult generate_on(Engine& engine, int seq, std::span<const int32_t> prompt, const GenerateOptions& options,
                           const std::function<bool(int32_t)>& on_token, std::vector<int32_t>& context);

}  // namespace seedling
