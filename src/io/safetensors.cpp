#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) {
  const size_t size = map_.size();
  if (size < 8) fail("{}: truncated safetensors file: {} bytes, need at least 8 for the header length", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | map_.data()[i];
  if (header_len > size - 8) {
    fail("{}: safetensors header length {} runs past the end of the file ({} bytes)", path, header_len, size);
  }
  const char* hdr = reinterpret_cast<const char*>(map_.data() + 8);
  json header;
  // A key given twice would be read as its last value and the other bytes left unnamed: refuse it.
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !keys.insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    header = json::parse(hdr, hdr + header_len, note_keys);
  } catch (const json::exception& e) {
    fail("{}: safetensors header is not valid JSON: {}", path, e.what());
  }
  if (!duplicate.empty()) fail("{}: safetensors header names tensor '{}' twice", path, duplicate);
  if (!header.is_object()) fail("{}: safetensors header is not a JSON object", path);
  const uint8_t* base = map_.data() + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  for (const auto& item : header.items()) {
    // A named copy, not a structured binding: the lambda below captures it (clang before 16 cannot capture those).
    const std::string name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (entry.is_object()) {
        for (const auto& [key, value] : entry.items()) {
          if (value.is_string()) metadata_[key] = value.get<std::string>();
        }
      }
      continue;
    }
    auto bad = [&](const std::string& what) { fail("{}: tensor '{}': {}", path, name, what); };
    if (!entry.is_object()) bad("entry is not an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("missing string 'dtype'");
    if (!entry.contains("shape") || !entry["shape"].is_array()) bad("missing array 'shape'");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      bad("missing 'data_offsets' [begin, end]");
    }
    TensorInfo t;
    t.name = name;
    t.file = path;
    const std::string dt = entry["dtype"].get<std::string>();
    if (!parse_safetensors_dtype(dt, &t.dtype)) bad("unsupported dtype '" + dt + "'");
    for (const auto& d : entry["shape"]) {
      // Past int64's range a dimension would be stored negative; after a 0 the size check below cannot see it.
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX)) {
        bad("shape holds a value that is not a non-negative integer below 2^63");
      }
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad("data_offsets are not non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end) bad(fmt::format("data_offsets [{}, {}] are reversed", begin, end));
    if (end > data_size) {
      bad(fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes; file truncated?)", begin, end,
                      data_size));
    }
    uint64_t expect = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d != 0 && expect > (uint64_t(1) << 62) / uint64_t(d)) bad("shape overflows");
      expect *= uint64_t(d);
    }
    if (end - begin != expect) {
      bad(fmt::format("data_offsets span {} bytes but {} {} needs {}", end - begin, dt, t.shape_string(), expect));
    }
    // Kernels read elements in place: each must sit at a multiple of its size from the start of the file.
    if ((8 + header_len + begin) % dtype_size(t.dtype) != 0) {
      bad(fmt::format("data starts at byte {} of the file, not a multiple of its {}-byte elements",
                      8 + header_len + begin, dtype_size(t.dtype)));
    }
    t.data = base + begin;
    t.nbytes = end - begin;
    tensors_.emplace(name, std::move(t));
  }
  // Two tensors sharing bytes would each be read as the other's: every byte belongs to one tensor at most.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, t] : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (a.nbytes > 0 && b.nbytes > 0 && a.data + a.nbytes > b.data) {
      fail("{}: tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}) of the data)", path, a.name, b.name,
           a.data - base, a.data - base + a.nbytes, b.data - base, b.data - base + b.nbytes);
    }
  }
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  if (!fs::exists(dir)) fail("{}: no such file or directory", dir);
  std::vector<std::string> paths;
  if (fs::is_regular_file(dir)) {
    paths.push_back(dir);
  } else {
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      json j;
      std::ifstream in(index);
      try {
        j = json::parse(in);
      } catch (const json::exception& e) {
        fail("{}: not valid JSON: {}", index.string(), e.what());
      }
      if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
        fail("{}: missing object 'weight_map'", index.string());
      }
      std::set<std::string> shards;
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string()) fail("{}: weight_map['{}'] is not a file name", index.string(), name);
        shards.insert(file.get<std::string>());
      }
      for (const auto& s : shards) {
        const fs::path p = fs::path(dir) / s;
        if (!fs::exists(p)) fail("{}: shard '{}' named by {} is missing", p.string(), s, index.filename().string());
        paths.push_back(p.string());
      }
    } else {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
      }
      std::sort(paths.begin(), paths.end());
    }
    if (paths.empty()) fail("{}: no *.safetensors files (and no model.safetensors.index.json)", dir);
  }
  for (const auto& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (const auto& [name, info] : files_.back()->tensors()) {
      auto [it, inserted] = tensors_.emplace(name, &info);
      if (!inserted) fail("{}: tensor '{}' also appears in {}", p, name, it->second->file);
    }
  }
}

const TensorInfo& Checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}: missing tensor '{}'", dir_, name);
  return *it->second;
}

}  // namespace seedling
