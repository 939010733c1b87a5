// Helpers shared by the tokenizer tests: reading plain or xz-compressed test data.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace seedling::test {

// The bytes of `path`; a name ending in .xz is decompressed with `xz -dc` (xz-utils).
inline std::string read_test_file(const std::filesystem::path& path) {
  if (path.extension() == ".xz") {
    std::string cmd = "xz -dc '" + path.string() + "'";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run " + cmd);
    std::string out;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    if (pclose(pipe) != 0) throw std::runtime_error(cmd + " failed (is xz-utils installed?)");
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace seedling::test
