// tests/fuzz/fuzz_files.h - a scratch folder for fuzz targets whose parser reads files: each input is written to a
// file (or a folder of files) under one folder per fuzzing process, removed when the process exits.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace seedling::fuzz {

// The folder, made on first use in /dev/shm when it exists (no disk writes per input), else in $TMPDIR or /tmp.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* env = std::getenv("TMPDIR");
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : (env ? env : "/tmp");
    std::string tmpl = base + "/seedling-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns its path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = scratch_dir() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) std::abort();
  return p.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace seedling::fuzz
