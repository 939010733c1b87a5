// io/packed_writer.h - writes a packed model folder (docs/formats/packed.md) tensor by tensor.
//
// The caller hands over already-encoded bytes through fill callbacks (encoding lives in codec/, above io/), so a
// tensor is never held twice in memory. Everything goes to OUT.partial; finish() writes the manifest last and
// renames the folder to OUT, so an interrupted pack never leaves a folder that looks valid.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/codec_layout.h"

namespace seedling {

class PackedWriter {
 public:
  // Writes `bytes` encoded bytes of one tensor into `out`.
  using Fill = std::function<void(uint8_t* out)>;
  // Writes gate (part 0), up (1) or down (2) of expert `expert`, codec_matrix_bytes of that part, into `out`.
  using ExpertFill = std::function<void(int expert, int part, uint8_t* out)>;
  struct Part {
    Codec codec;
    int64_t rows, cols;
  };

  // Starts OUT.partial (removing a stale one); `config` is config.json's object, stored in the manifest.
  PackedWriter(std::string out_dir, nlohmann::ordered_json config, nlohmann::ordered_json source_info);
  ~PackedWriter();
  PackedWriter(const PackedWriter&) = delete;
  PackedWriter& operator=(const PackedWriter&) = delete;

  const std::string& partial_dir() const { return partial_; }
  // The bytes all add_* calls will write, for the progress bar's percentage and ETA (0: no bar).
  void set_total_bytes(uint64_t bytes) { total_ = bytes; }

  void add_resident(const std::string& name, Codec codec, std::vector<int64_t> shape, const Fill& fill);
  // Fills and writes one layer's experts in order. With `together` > 1, that many experts are filled at once, each on
  // its own thread of ThreadPool::global() (so `fill` must be safe to call concurrently for different experts, and
  // its own parallel_for calls run serially in place); the file's bytes are the same for any `together`.
  void add_expert_layer(int layer, int num_experts, const Part (&parts)[3], const ExpertFill& fill, int together = 1);
  // Copies a file (tokenizer.json, ...) from `src` into the folder when it exists.
  void copy_if_present(const std::string& src);
  // Writes manifest.json and config.json, then renames OUT.partial to OUT (replacing OUT). Returns bytes written.
  uint64_t finish();

 private:
  void write_bytes(std::FILE* f, const std::string& path, const uint8_t* data, size_t n);
  void progress(bool done);

  std::string out_, partial_;
  nlohmann::ordered_json manifest_;
  std::FILE* resident_ = nullptr;
  uint64_t resident_bytes_ = 0;
  uint64_t written_ = 0, total_ = 0;
  double t0_ = 0, last_print_ = 0;
};

}  // namespace seedling
