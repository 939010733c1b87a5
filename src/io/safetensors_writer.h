// io/safetensors_writer.h - writes a safetensors file tensor by tensor, without holding the data in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace seedling {

class SafetensorsWriter {
 public:
  // Fills `out` with `bytes` bytes of the tensor starting at byte `offset` (called in order, in chunks).
  using Fill = std::function<void(uint8_t* out, size_t offset, size_t bytes)>;

  void add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill);
  // A string entry of the header's __metadata__ (besides "format": "pt").
  void set_metadata(const std::string& key, const std::string& value) { metadata_.emplace_back(key, value); }
  // Writes the header and every tensor's data to `path`. Throws Error naming the path on I/O failure.
  void write(const std::string& path) const;
  size_t data_bytes() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    Fill fill;
    size_t bytes;
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace seedling
