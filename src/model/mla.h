// model/mla.h - multi-head latent attention (DeepSeek-V2/V3) on the CPU: the pieces Model::mla_attention
// (model/mla.cpp) is made of, and the expanded form it is tested against.
//
// The cache holds per position the normalised latent c (kv_lora_rank floats) and the rope key k_r after RoPE
// (qk_rope_head_dim floats). transformers expands them: head h's key is [W_UK[h] c, k_r] and its value W_UV[h] c,
// where W_UK[h] (nope x rank) and W_UV[h] (v x rank) are head h's rows of kv_b_proj. The forward absorbs instead:
// q_nope . W_UK[h] c = (W_UK[h]^T q_nope) . c, so the query becomes [W_UK[h]^T q_nope, q_rope] (rank + rope floats)
// and is dotted with the cache rows as stored; the softmax-weighted sum of the latents is multiplied by W_UV[h] last.
// Attention then reads rank + rope floats per position for every head, not heads x (nope + rope + v).
#pragma once

#include <vector>

#include "model/config.h"
#include "ops/matrix.h"
#include "ops/ops.h"

namespace seedling {

// kv_b's nope rows of each head, transposed into float32 [heads][rank][nope] (the query's absorption matrix).
std::vector<float> mla_absorbed_keys(const ops::Matrix& kv_b, int heads, const MlaPlan& m);

// The rope part (m.qk_rope_head_dim floats at x) rotated for position `pos` in transformers' layout: with
// rope_interleave the pairs (2i, 2i + 1) are rotated and written de-interleaved (the rotated evens, then the odds),
// as apply_rotary_pos_emb_interleave returns them; else rotate_half's pairs (i, i + half).
void mla_rope(float* x, int pos, const MlaPlan& m, const ops::Rope& rope);

// One query head in latent space over cache positions [first, last]: q_abs is [rank + rope] (the absorbed nope part,
// then the rope part), cache rows [pos][rank + rope]; out_lat [rank] = softmax(scale q_abs . row) weighted sum of
// the rows' latents. scratch: last - first + 1 floats.
void mla_latent_head(const float* q_abs, const float* cache, int first, int last, const MlaPlan& m, float* out_lat,
                     float* scratch);

// One query row, all heads, absorbed as the forward computes it: q [heads][nope + rope] (rope part rotated), the
// cache of positions [0, last]; out [heads][v].
void mla_absorbed_row(const float* q, const float* cache, int last, const ops::Matrix& kv_b,
                      const std::vector<float>& k_absorb, int heads, const MlaPlan& m, float* out);
// The same expanded as transformers computes it (keys and values from kv_b per position), in double: the reference
// the absorbed form is held to (tests/unit/engine/mla_test.cpp).
void mla_expanded_row(const float* q, const float* cache, int last, const ops::Matrix& kv_b, int heads,
                      const MlaPlan& m, float* out);

}  // namespace seedling
