#include "io/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace seedling {

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill) {
  size_t bytes = dtype_size(dtype);
  for (int64_t d : shape) bytes *= size_t(d);
  entries_.push_back({std::move(name), dtype, std::move(shape), std::move(fill), bytes});
}

size_t SafetensorsWriter::data_bytes() const {
  size_t n = 0;
  for (const auto& e : entries_) n += e.bytes;
  return n;
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  for (const auto& [key, value] : metadata_) header["__metadata__"][key] = value;
  size_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {
        {"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text += ' ';  // keeps the data 8-byte aligned
  std::unique_ptr<FILE, int (*)(FILE*)> fp(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!fp) fail("{}: cannot open for writing: {}", path, std::strerror(errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  auto put = [&](const void* p, size_t n) {
    if (std::fwrite(p, 1, n, fp.get()) != n) fail("{}: write failed: {}", path, std::strerror(errno));
  };
  put(len, 8);
  put(text.data(), text.size());
  std::vector<uint8_t> chunk(size_t(8) << 20);
  for (const auto& e : entries_) {
    for (size_t done = 0; done < e.bytes;) {
      const size_t n = std::min(chunk.size(), e.bytes - done);
      e.fill(chunk.data(), done, n);
      put(chunk.data(), n);
      done += n;
    }
  }
  if (std::fflush(fp.get()) != 0) fail("{}: write failed: {}", path, std::strerror(errno));
}

}  // namespace seedling
