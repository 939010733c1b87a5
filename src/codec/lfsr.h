// codec/lfsr.h - the 16-bit LFSR of the seed codecs (docs/formats/seed.md).
//
// lfsr_step and lfsr_states are the spec: every faster generator (the stream tables here, any SIMD or GPU
// expansion) must match them bit for bit, for every seed. A test checks the tables against them for all 65535
// seeds, and a golden hash over every seed's expansion locks the definition.
#pragma once

#include <cstdint>

namespace seedling::seed {

inline constexpr uint32_t kLfsrPeriod = 65535;
// The most states one block uses (S3: 12 x 4).
inline constexpr int kMaxStates = 48;

// One step of the Fibonacci LFSR x^16 + x^12 + x^3 + x + 1 (taps at bits 0, 1, 3, 12).
constexpr uint16_t lfsr_step(uint16_t s) {
  const unsigned b = (s ^ (s >> 1) ^ (s >> 3) ^ (s >> 12)) & 1u;
  return uint16_t((s >> 1) | (b << 15));
}

// The n states that follow `seed` (states 1..n; the seed itself is state 0), n <= kMaxStates.
constexpr void lfsr_states(uint16_t seed, int n, uint16_t* out) {
  uint16_t s = seed;
  for (int k = 0; k < n; ++k) {
    s = lfsr_step(s);
    out[k] = s;
  }
}

// The first kMaxStates feedback bits after `seed`, bit j = the j-th bit shifted in. Spec-level (steps the LFSR).
constexpr uint64_t lfsr_feedback_bits(uint16_t seed) {
  uint64_t g = 0;
  uint16_t s = seed;
  for (int j = 0; j < kMaxStates; ++j) {
    s = lfsr_step(s);
    g |= uint64_t(s >> 15) << j;
  }
  return g;
}

// The feedback bits are GF(2)-linear in the seed, so g(s) = g(s & 0x00FF) ^ g(s & 0xFF00): two tables of 256.
struct LfsrStreamTables {
  uint64_t lo[256];  // g(i)
  uint64_t hi[256];  // g(i << 8)
};

inline constexpr LfsrStreamTables make_lfsr_stream_tables() {
  LfsrStreamTables t{};
  for (int i = 0; i < 256; ++i) {
    t.lo[i] = lfsr_feedback_bits(uint16_t(i));
    t.hi[i] = lfsr_feedback_bits(uint16_t(i << 8));
  }
  return t;
}

inline constexpr LfsrStreamTables kLfsrStreamTables = make_lfsr_stream_tables();

// The 64-bit stream seed | g(seed) << 16: state k (1..48) is bits k..k+15, i.e. uint16_t(stream >> k).
inline uint64_t lfsr_stream(uint16_t seed) {
  const uint64_t g = kLfsrStreamTables.lo[seed & 0xFF] ^ kLfsrStreamTables.hi[seed >> 8];
  return uint64_t(seed) | (g << 16);
}

inline uint16_t lfsr_stream_state(uint64_t stream, int k) {
  return uint16_t(stream >> k);
}

}  // namespace seedling::seed
