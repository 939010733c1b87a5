// Fuzz target: the packed manifest (io/packed_model.h, docs/formats/packed.md) through PackedModel::open. The input
// up to its first NUL byte is manifest.json and the rest is resident.bin; experts-000.bin .. experts-003.bin are
// 128 KiB files of zeros (open checks only their sizes). Any input must end in a model whose every view lies inside
// its file and holds at least the bits its shape needs, or in a seedling::Error, never a crash, leak, hang or
// sanitizer report. Built and run by tests/cli/fuzz_packed_manifest.sh.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "fuzz_files.h"
#include "io/packed_model.h"

namespace {

// rows x cols weights take at least 3 bits each in every codec (s3, the smallest, adds to that).
void check_holds(int64_t rows, int64_t cols, uint64_t bytes) {
  if (rows <= 0 || cols <= 0) std::abort();
  if ((unsigned __int128)(rows) * (unsigned __int128)(cols)*3 > (unsigned __int128)(bytes)*8) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const bool experts_made = [] {
    for (int i = 0; i < 4; ++i) {
      const std::string name = "experts-00" + std::to_string(i) + ".bin";
      seedling::fuzz::write_file(name, "");
      fs::resize_file(seedling::fuzz::scratch_dir() / name, 128 * 1024);
    }
    return true;
  }();
  (void)experts_made;
  const std::string_view input = seedling::fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  seedling::fuzz::write_file("manifest.json", input.substr(0, nul));
  const std::string resident = seedling::fuzz::write_file(
      "resident.bin", nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1));
  try {
    const auto pm = seedling::PackedModel::open(seedling::fuzz::scratch_dir().string());
    const uint64_t resident_bytes = fs::file_size(resident);
    for (const auto& [name, t] : pm->tensors()) {
      if (t.offset > resident_bytes || t.bytes > resident_bytes - t.offset || t.data == nullptr) std::abort();
      check_holds(t.shape[0], t.shape.size() == 2 ? t.shape[1] : 1, t.bytes);
      volatile uint8_t first = t.data[0], last = t.data[t.bytes - 1];
      (void)first;
      (void)last;
    }
    for (int l = 0; l < pm->num_layers(); ++l) {
      if (!pm->layer_has_experts(l)) continue;
      const seedling::PackedExpertLayer& pl = pm->expert_layer(l);
      for (const seedling::PackedExpertPart& p : pl.parts) {
        if (p.offset > pl.blob_bytes || p.bytes > pl.blob_bytes - p.offset) std::abort();
        check_holds(p.rows, p.cols, p.bytes);
      }
      for (int e = 0; e < pm->num_experts(l); ++e) {
        const seedling::ExpertBlobLocation& b = pm->expert_blob(l, e);
        if (b.offset > pl.file_bytes || b.bytes > pl.file_bytes - b.offset) std::abort();
      }
    }
    (void)pm->expert_bytes_total();
  } catch (const seedling::Error&) {
  }
  return 0;
}
