// model/linear_attention.h - what the hybrid linear-attention families (qwen3_next, qwen3_5_moe) share when they read
// config.json: Gated DeltaNet layers beside gated full attention, zero-centred norms and a gated shared expert.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace seedling {

// Reads the Qwen3-Next dialect into `c` (the caller has read the common and MoE fields): `moe[l]` says whether
// layer l routes experts; `grouped` whether the linear projections are qwen3_next's grouped in_proj_qkvz/in_proj_ba;
// `renormalize` the router's. Each layer's mixer from layer_types ("linear_attention" | "full_attention") or, when
// absent, full_attention_interval (default 4, as transformers: every interval-th layer is full attention); the
// linear_* sizes with transformers' defaults; full attention gated, with per-head (1 + w) q/k norms and partial
// rotary (partial_rotary_factor, default 0.25 as transformers sets it). Errors name the key.
void read_gated_delta_config(const ConfigReader& r, ModelConfig* c, const std::vector<uint8_t>& moe, bool grouped,
                             bool renormalize);

}  // namespace seedling
