// Fuzz target: the safetensors header (io/safetensors.h). Each input is written as a .safetensors file and opened;
// any input must end in tensors whose views hold what their dtype and shape say, or in a seedling::Error, never a
// crash, leak, hang or sanitizer report. Built and run by tests/cli/fuzz_safetensors.sh.
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "fuzz_files.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = seedling::fuzz::write_file("input.safetensors", seedling::fuzz::as_text(data, size));
  try {
    const seedling::SafetensorsFile file(path);
    uint64_t bytes_seen = 0;
    for (const auto& [name, t] : file.tensors()) {
      // What the header promised: non-negative dimensions whose product times the element size is the view's size,
      // and the view inside the file after the 8-byte length and the header.
      unsigned __int128 elems = 1;
      for (int64_t d : t.shape) {
        if (d < 0) std::abort();
        elems *= uint64_t(d);
        if (elems > (unsigned __int128)(size)) elems = (unsigned __int128)(size) + 1;
      }
      if (elems * seedling::dtype_size(t.dtype) != t.nbytes) std::abort();
      if (t.numel() < 0) std::abort();
      bytes_seen += t.nbytes;
      if (t.nbytes > 0) {
        volatile uint8_t first = t.data[0], last = t.data[t.nbytes - 1];
        (void)first;
        (void)last;
      }
    }
    if (bytes_seen > size) std::abort();  // tensors never share bytes
  } catch (const seedling::Error&) {
  }
  return 0;
}
