// io/safetensors.h - memory-mapped safetensors files and Hugging Face checkpoint folders.
//
// A safetensors file is: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data; offsets are relative to the end of the header. Every offset, size and dtype is checked
// against the file before any tensor is handed out, so a truncated or lying file is an Error, not a read
// past the end of a mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace seedling {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the mapping of `file`
  size_t nbytes = 0;
  std::string file;  // path of the safetensors file that holds it

  int64_t numel() const;
  std::string shape_string() const;  // "[2048, 768]"
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return map_.path(); }
  // The string entries of __metadata__ (entries of other types are left out).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile map_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint folder: model.safetensors, or the shards named by model.safetensors.index.json,
// or (for folders without an index) every *.safetensors file in it.
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws Error naming the tensor and the folder when absent.
  const TensorInfo& get(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& all() const { return tensors_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> tensors_;
};

}  // namespace seedling
