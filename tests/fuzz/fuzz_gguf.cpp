// Fuzz target: the GGUF reader (io/gguf.h). Each input is written as a .gguf file and opened; then every metadata
// value is read through every typed accessor and every tensor's bytes are touched; then the metadata is mapped onto
// a family (model/gguf_config.h) and a tokenizer.json (tokenizer/gguf_vocab.h), each ending in a value or an Error. Any
// input must end in a file whose tensors hold what their type and dimensions say, inside the file, aligned and not
// overlapping, and whose values all read back, or in a seedling::Error, never a crash, leak, hang or sanitizer report.
// Built and run by tests/cli/fuzz_gguf.sh.
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "fuzz_files.h"
#include "io/gguf.h"
#include "model/gguf_config.h"
#include "tokenizer/gguf_vocab.h"

namespace {

// Each accessor either returns or throws a seedling::Error (an exception of another type ends the run).
template <typename F>
void either(F&& f) {
  try {
    f();
  } catch (const seedling::Error&) {
  }
}

void touch(std::string_view s) {
  if (!s.empty()) {
    volatile char first = s.front(), last = s.back();
    (void)first;
    (void)last;
  }
}

void check_values(const seedling::GgufFile& file) {
  using seedling::GgufType;
  for (const auto& entry : file.metadata()) {
    // Named copies, not a structured binding: the lambdas below capture them (clang before 16 cannot).
    const std::string& key = entry.first;
    const seedling::GgufValue& v = entry.second;
    if (file.find(key) != &v) std::abort();  // keys are unique: each finds its own value
    touch(v.str);
    for (std::string_view s : v.strings) touch(s);
    if (v.type == GgufType::Array && v.elem_type == GgufType::Array) std::abort();
    if (v.type == GgufType::Array && v.elem_type == GgufType::String && v.strings.size() != v.count) std::abort();
    if (seedling::gguf_value_text(v, size_t(-1)).empty()) std::abort();
    either([&] { file.get_string(key); });
    either([&] { file.get_int(key); });
    either([&] { file.get_int(key, 0, 1000); });
    either([&] { file.get_float(key); });
    either([&] { file.get_bool(key); });
    either([&] { file.get_string_array(key); });
    either([&] {
      if (file.get_int_array(key).size() != v.count) std::abort();
    });
    either([&] {
      if (file.get_float_array(key).size() != v.count) std::abort();
    });
  }
}

void check_tensors(const seedling::GgufFile& file) {
  const uint32_t align = file.alignment();
  if (align == 0 || (align & (align - 1)) != 0 || file.data_offset() % align != 0) std::abort();
  uint64_t bytes_seen = 0;
  for (const seedling::GgufTensor& t : file.tensors()) {
    if (file.find_tensor(t.name) != &t) std::abort();
    if (t.dims.empty() || t.dims.size() > seedling::kGgufMaxDims) std::abort();
    const seedling::GgmlTypeInfo* info = seedling::ggml_type_info(uint32_t(t.type));
    if (info == nullptr) std::abort();
    // What the infos promised: whole blocks per row, rows x row bytes = the view's size, inside the data section.
    if (t.dims[0] <= 0 || t.dims[0] % info->block_elems != 0) std::abort();
    unsigned __int128 bytes = (unsigned __int128)(t.dims[0] / info->block_elems) * info->block_bytes;
    for (size_t d = 1; d < t.dims.size(); ++d) {
      if (t.dims[d] <= 0) std::abort();
      bytes *= uint64_t(t.dims[d]);
      if (bytes > file.file_size()) std::abort();
    }
    if (bytes != t.nbytes || t.numel() <= 0) std::abort();
    if (t.offset % align != 0 || file.data_offset() + t.offset + t.nbytes > file.file_size()) std::abort();
    bytes_seen += t.nbytes;
    volatile uint8_t first = t.data[0], last = t.data[t.nbytes - 1];
    (void)first;
    (void)last;
  }
  if (bytes_seen > file.file_size()) std::abort();  // tensors never share bytes
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = seedling::fuzz::write_file("input.gguf", seedling::fuzz::as_text(data, size));
  try {
    const seedling::GgufFile file(path);
    if (file.version() != 2 && file.version() != 3) std::abort();
    check_values(file);
    check_tensors(file);
    either([&] {
      const seedling::GgufModel m = seedling::map_gguf_model(file);
      if (m.c.layers.size() != size_t(m.c.num_layers) || m.c.num_layers <= 0 || m.c.hidden_size <= 0) std::abort();
    });
    either([&] {
      if (seedling::gguf_tokenizer_json(file).empty()) std::abort();
    });
  } catch (const seedling::Error&) {
  }
  return 0;
}
