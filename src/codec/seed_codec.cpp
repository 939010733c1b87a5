// codec/seed_codec.cpp - the seed format's scalar spec: expansion, block decode, words, blobs, validation.
#include "codec/seed_codec.h"

#include "codec/lfsr.h"
#include "core/error.h"

namespace seedling::seed {

std::string_view seed_tier_name(SeedTier t) {
  switch (t) {
    case SeedTier::P3:
      return "p3";
    case SeedTier::P4:
      return "p4";
    case SeedTier::S3:
      return "s3";
  }
  return "?";
}

std::optional<SeedTier> parse_seed_tier(std::string_view s) {
  for (SeedTier t : kAllSeedTiers) {
    if (seed_tier_name(t) == s) return t;
  }
  return std::nullopt;
}

void expand_seed(SeedTier t, uint16_t seed, int32_t* S) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int n = sp.block * sp.coefs;
  uint16_t states[kMaxStates];
  lfsr_states(seed, n, states);
  for (int k = 0; k < n; ++k) S[k] = int32_t(states[k]) - 32768;
}

void expand_seed_fast(SeedTier t, uint16_t seed, int32_t* S) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int n = sp.block * sp.coefs;
  const uint64_t stream = lfsr_stream(seed);
  for (int k = 0; k < n; ++k) S[k] = int32_t(lfsr_stream_state(stream, k + 1)) - 32768;
}

void decode_block(SeedTier t, const SeedBlock& b, int e, float* out) {
  const SeedTierSpec sp = seed_tier_spec(t);
  int32_t S[kMaxStates];
  expand_seed(t, b.seed, S);
  const float scale = seed_scale(e);
  for (int c = 0; c < sp.block; ++c) {
    int32_t isum = 0;
    for (int p = 0; p < sp.coefs; ++p) isum += S[c * sp.coefs + p] * int32_t(b.q[p]);
    out[c] = round_bf16(float(isum) * scale);
  }
}

uint16_t pack_word(SeedTier t, const SeedBlock& b) {
  const SeedTierSpec sp = seed_tier_spec(t);
  uint32_t w = 0;
  const int shift0 = sp.codes_apart ? 0 : 4;
  if (!sp.codes_apart) w = b.code & 0xFu;
  for (int p = 0; p < sp.coefs; ++p) w |= (uint32_t(uint8_t(b.q[p])) & 0xFu) << (shift0 + 4 * p);
  return uint16_t(w);
}

void unpack_word(SeedTier t, uint16_t word, SeedBlock* b) {
  const SeedTierSpec sp = seed_tier_spec(t);
  const int shift0 = sp.codes_apart ? 0 : 4;
  if (!sp.codes_apart) b->code = uint8_t(word & 0xFu);
  for (int p = 0; p < sp.coefs; ++p) {
    const int nib = (word >> (shift0 + 4 * p)) & 0xF;
    b->q[p] = int8_t(nib >= 8 ? nib - 16 : nib);  // int4 two's complement
  }
  for (int p = sp.coefs; p < kMaxCoefs; ++p) b->q[p] = 0;
}

double seed_bits_per_weight(SeedTier t, int64_t rows, int64_t cols) {
  return double(seed_slice_layout(t, rows, cols).bytes) * 8.0 / double(rows * cols);
}

int32_t seed_blob_bias(const uint8_t* blob) {
  int32_t b;
  std::memcpy(&b, blob, 4);
  return b;
}

SeedBlock seed_blob_block(SeedTier t, const uint8_t* blob, const SeedSliceLayout& L, int64_t i) {
  SeedBlock b;
  uint16_t word;
  std::memcpy(&b.seed, blob + L.seeds_offset + 2 * size_t(i), 2);
  std::memcpy(&word, blob + L.words_offset + 2 * size_t(i), 2);
  unpack_word(t, word, &b);
  if (seed_tier_spec(t).codes_apart) b.code = uint8_t((blob[L.codes_offset + size_t(i) / 2] >> (4 * (i & 1))) & 0xF);
  return b;
}

std::vector<uint8_t> write_seed_blob(SeedTier t, int64_t rows, int64_t cols, int32_t exp_bias,
                                     const std::vector<SeedBlock>& blocks) {
  const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
  SEEDLING_CHECK(int64_t(blocks.size()) == L.n_blocks, "{} blocks for a {} x {} slice of {}", blocks.size(), rows, cols,
                 L.n_blocks);
  std::vector<uint8_t> out(L.bytes, 0);
  std::memcpy(out.data(), &exp_bias, 4);
  const bool apart = seed_tier_spec(t).codes_apart;
  for (int64_t i = 0; i < L.n_blocks; ++i) {
    const SeedBlock& b = blocks[size_t(i)];
    const uint16_t word = pack_word(t, b);
    std::memcpy(out.data() + L.seeds_offset + 2 * size_t(i), &b.seed, 2);
    std::memcpy(out.data() + L.words_offset + 2 * size_t(i), &word, 2);
    if (apart) out[L.codes_offset + size_t(i) / 2] |= uint8_t((b.code & 0xF) << (4 * (i & 1)));
  }
  validate_seed_blob(t, out.data(), out.size(), rows, cols, "write_seed_blob");
  return out;
}

void validate_seed_blob(SeedTier t, const void* data, size_t size, int64_t rows, int64_t cols,
                        std::string_view tensor) {
  if (rows <= 0 || cols <= 0) fail("{}: seed slice shape {} x {} is not positive", tensor, rows, cols);
  const SeedSliceLayout L = seed_slice_layout(t, rows, cols);
  if (size != L.bytes) {
    fail("{}: a {} seed slice of {} x {} takes {} bytes ({} blocks), the blob has {}", tensor, seed_tier_name(t), rows,
         cols, L.bytes, L.n_blocks, size);
  }
  const uint8_t* blob = static_cast<const uint8_t*>(data);
  const int32_t bias = seed_blob_bias(blob);
  if (bias < kMinExponent || bias > kMaxExponent) {
    fail("{}: seed exponent bias {} is outside [{}, {}]", tensor, bias, kMinExponent, kMaxExponent);
  }
  const bool apart = seed_tier_spec(t).codes_apart;
  if (apart && (L.n_blocks & 1) && (blob[L.codes_offset + size_t(L.n_blocks) / 2] >> 4) != 0) {
    fail("{}: the padding nibble after the last exponent code is {}, expected 0", tensor,
         blob[L.codes_offset + size_t(L.n_blocks) / 2] >> 4);
  }
  for (int64_t i = 0; i < L.n_blocks; ++i) {
    const SeedBlock b = seed_blob_block(t, blob, L, i);
    if (b.seed == 0) fail("{}: block {} has seed 0 (seeds are 1..65535)", tensor, i);
    const int e = bias + b.code;
    if (e > kMaxExponent) {
      fail("{}: block {} has exponent code {}: bias {} + code = {} is above the format's {}", tensor, i, b.code, bias,
           e, kMaxExponent);
    }
  }
}

void decode_seed_matrix(const SeedMatrix& m, float* out) {
  const SeedTierSpec sp = seed_tier_spec(m.tier);
  const SeedSliceLayout L = seed_slice_layout(m.tier, m.rows, m.cols);
  const int32_t bias = seed_blob_bias(m.blob);
  float w[kMaxBlock];
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t j = 0; j < L.blocks_per_row; ++j) {
      const SeedBlock b = seed_blob_block(m.tier, m.blob, L, r * L.blocks_per_row + j);
      decode_block(m.tier, b, bias + b.code, w);
      for (int c = 0; c < sp.block && j * sp.block + c < m.cols; ++c) out[r * m.cols + j * sp.block + c] = w[c];
    }
  }
}

}  // namespace seedling::seed
