// io/packed_model.h - a packed model folder (docs/formats/packed.md): open, validate, and hand out its weights.
//
// PACKED_DIR/manifest.json names every tensor with its codec, shape, offset, size and xxh64. Resident tensors
// (attention, norms, routers, dense MLPs, embeddings, head) live in resident.bin, each 64-byte aligned, and are
// mapped. Routed experts live in experts-LLL.bin, one file per MoE layer; each expert (gate, up, down together) is
// one blob at a 4 KiB-aligned offset, so one O_DIRECT read fetches one expert. open() checks every offset and size
// against the files and every resident checksum before anything is handed out; expert blobs are checked by
// verify_blob() when they are read (a full scan of tens of GB at open would defeat streaming).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/codec_layout.h"
#include "core/mapped_file.h"

namespace seedling {

inline constexpr const char* kPackedFormatName = "seedling-packed";
inline constexpr int kPackedFormatVersion = 1;
inline constexpr uint64_t kPackedTensorAlign = 64;  // resident tensors and the parts inside a blob
inline constexpr uint64_t kPackedBlobAlign = 4096;  // expert blobs: O_DIRECT reads need block alignment

struct PackedTensor {
  std::string name;
  Codec codec = Codec::BF16;
  std::vector<int64_t> shape;  // [rows, cols] or [n]
  uint64_t offset = 0;         // in resident.bin
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
  const uint8_t* data = nullptr;  // inside the mapping of resident.bin
};

// Where one expert's bytes are: a whole 4 KiB-aligned blob of an experts file.
struct ExpertBlobLocation {
  std::string file;  // full path of experts-LLL.bin
  uint64_t offset;   // multiple of kPackedBlobAlign
  uint64_t bytes;    // the blob's size (gate, up, down and their padding); not rounded up to 4 KiB
  uint64_t xxh64;    // of those `bytes` bytes
};

// One of gate/up/down inside every blob of a layer.
struct PackedExpertPart {
  Codec codec = Codec::BF16;
  int64_t rows = 0, cols = 0;
  uint64_t offset = 0;  // from the start of the blob, multiple of kPackedTensorAlign
  uint64_t bytes = 0;
};

struct PackedExpertLayer {
  std::string file;  // full path
  uint64_t file_bytes = 0;
  uint64_t blob_bytes = 0;    // the same for every expert of a layer
  PackedExpertPart parts[3];  // gate, up, down
  std::vector<ExpertBlobLocation> blobs;
};

// xxh64 with seed 0, the checksum of every tensor and blob.
uint64_t packed_checksum(const uint8_t* data, size_t bytes);
// True when `dir` holds a manifest.json (a packed folder rather than a Hugging Face one).
bool is_packed_model_dir(const std::string& dir);

class PackedModel {
 public:
  // Reads and validates manifest.json, maps resident.bin and checks every resident tensor's checksum. Throws Error
  // naming the file and the key on a missing file, an unknown codec, a size that disagrees with its shape, or an
  // offset past a file's end.
  static std::unique_ptr<PackedModel> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const nlohmann::json& config() const { return manifest_["config"]; }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const PackedTensor& tensor(const std::string& name) const;  // Error naming the tensor when absent
  const std::map<std::string, PackedTensor>& tensors() const { return tensors_; }

  int num_layers() const { return int(layers_.size()); }
  bool layer_has_experts(int layer) const;
  int num_experts(int layer) const;
  const PackedExpertLayer& expert_layer(int layer) const;
  const ExpertBlobLocation& expert_blob(int layer, int expert) const;
  // Throws Error naming the file, layer, expert and offset when the blob's xxh64 differs from the manifest's.
  void verify_blob(int layer, int expert, const uint8_t* blob) const;
  uint64_t expert_bytes_total() const;

 private:
  std::string dir_;
  nlohmann::json manifest_;
  std::unique_ptr<MappedFile> resident_;
  std::map<std::string, PackedTensor> tensors_;
  std::vector<PackedExpertLayer> layers_;  // index: layer; layers without experts have no blobs
};

}  // namespace seedling
