// cli/sampling_flags.h - the sampling flags `run` and `chat` share.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/sampler.h"

namespace seedling::cli {

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, writing into *p (whose values are the defaults).
void add_sampling_flags(CLI::App* cmd, SamplerParams* p);

}  // namespace seedling::cli
