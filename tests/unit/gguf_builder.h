// A GGUF file built field by field for tests (tests/unit/core/gguf_test.cpp, engine/gguf_model_test.cpp,
// text/gguf_tokenizer_test.cpp): any lie a file can tell, or a small model or tokenizer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace seedling::test {

template <typename T>
inline std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

inline std::string gguf_string(const std::string& s) {
  return le<uint64_t>(s.size()) + s;
}

// A GGUF file built field by field, so that a test can write any lie: metadata entries and tensor infos are raw
// bytes appended in order; bytes() puts the header before them and pads the data section to `alignment`.
struct GgufBuilder {
  uint32_t version = 3;
  uint32_t alignment = kGgufDefaultAlignment;  // where bytes() starts the data (general.alignment is a key of its own)
  uint64_t n_keys = 0, n_tensors = 0;
  std::string keys, infos, data;

  GgufBuilder& raw_key(const std::string& key, uint32_t type, const std::string& value) {
    keys += gguf_string(key) + le<uint32_t>(type) + value;
    ++n_keys;
    return *this;
  }
  template <typename T>
  GgufBuilder& key(const std::string& k, GgufType t, T v) {
    return raw_key(k, uint32_t(t), le<T>(v));
  }
  GgufBuilder& str(const std::string& k, const std::string& v) {
    return raw_key(k, uint32_t(GgufType::String), gguf_string(v));
  }
  template <typename T>
  GgufBuilder& array(const std::string& k, GgufType elem, const std::vector<T>& v) {
    std::string bytes = le<uint32_t>(uint32_t(elem)) + le<uint64_t>(v.size());
    for (const T& x : v) bytes += le<T>(x);
    return raw_key(k, uint32_t(GgufType::Array), bytes);
  }
  GgufBuilder& strings(const std::string& k, const std::vector<std::string>& v) {
    std::string bytes = le<uint32_t>(uint32_t(GgufType::String)) + le<uint64_t>(v.size());
    for (const std::string& x : v) bytes += gguf_string(x);
    return raw_key(k, uint32_t(GgufType::Array), bytes);
  }
  // A tensor info with the offset given; no data is added.
  GgufBuilder& info(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    infos += gguf_string(name) + le<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) infos += le<uint64_t>(d);
    infos += le<uint32_t>(type) + le<uint64_t>(offset);
    ++n_tensors;
    return *this;
  }
  // A tensor whose `nbytes` bytes (k + seed, mod 256) go at the next aligned offset of the data section.
  GgufBuilder& tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type, size_t nbytes,
                      uint8_t seed = 0) {
    while (data.size() % alignment != 0) data += '\0';
    info(name, dims, uint32_t(type), data.size());
    for (size_t k = 0; k < nbytes; ++k) data += char(uint8_t(k + seed));
    return *this;
  }
  // A tensor holding `bytes` (its rows, as the type lays them out), at the next aligned offset.
  GgufBuilder& raw_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type,
                          const std::string& bytes) {
    while (data.size() % alignment != 0) data += '\0';
    info(name, dims, uint32_t(type), data.size());
    data += bytes;
    return *this;
  }
  std::string bytes() const {
    std::string s = "GGUF" + le<uint32_t>(version) + le<uint64_t>(n_tensors) + le<uint64_t>(n_keys) + keys + infos;
    while (s.size() % alignment != 0) s += '\0';
    return s + data;
  }
};

}  // namespace seedling::test
