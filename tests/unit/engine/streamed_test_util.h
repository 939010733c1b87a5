// streamed_test_util.h - expert blob files for the streamed provider's tests, written by the tests themselves.
//
// Blob (layer, expert) is `pages` 4 KiB pages of floats whose value i is layer * 1000 + expert + i * 1e-3, so a
// slot holding the wrong expert, or a torn read, shows in any element. decode() views the floats as a (1, n)
// matrix three times; verify() checks the xxh64 the location records.
#pragma once

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "experts/streamed_experts.h"

namespace seedling::test {

inline float blob_value(int layer, int expert, size_t i) {
  return float(layer * 1000 + expert) + float(i) * 1e-3f;
}

struct BlobFiles {
  std::string dir;
  std::vector<std::vector<BlobLocation>> where;
};

// Writes one file per layer under `dir` (created) with `experts` blobs of `pages` pages each.
inline BlobFiles write_blob_files(const std::string& dir, int layers, int experts, int pages = 2) {
  std::system(("mkdir -p '" + dir + "'").c_str());
  BlobFiles out{dir, {}};
  const size_t bytes = size_t(pages) * 4096;
  for (int l = 0; l < layers; ++l) {
    const std::string path = dir + "/experts-" + std::to_string(l) + ".bin";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) fail("cannot create {}", path);
    std::vector<BlobLocation> row;
    for (int e = 0; e < experts; ++e) {
      std::vector<float> v(bytes / 4);
      for (size_t i = 0; i < v.size(); ++i) v[i] = blob_value(l, e, i);
      std::fwrite(v.data(), 1, bytes, f);
      row.push_back({path, uint64_t(e) * bytes, bytes, XXH64(v.data(), bytes, 0)});
    }
    std::fclose(f);
    out.where.push_back(row);
  }
  return out;
}

inline DecodeExpertBlob view_blob() {
  return [](const uint8_t* blob, int, int) {
    ExpertWeights w;
    w.gate = ops::Matrix{DType::F32, blob, 1, 1024};
    w.up = ops::Matrix{DType::F32, blob, 1, 1024};
    w.down = ops::Matrix{DType::F32, blob, 1, 1024};
    return w;
  };
}

inline VerifyExpertBlob check_xxh64() {
  return [](const uint8_t* blob, size_t bytes, const BlobLocation& b) {
    if (XXH64(blob, bytes, 0) != b.xxh64) fail("{}: blob at offset {} fails its checksum", b.file, b.offset);
  };
}

// True when every element of the blob `w` views is (layer, expert)'s.
inline bool holds(const ExpertWeights& w, int layer, int expert, size_t pages = 2) {
  const float* f = static_cast<const float*>(w.gate.data);
  for (size_t i = 0; i < pages * 1024; ++i) {
    if (f[i] != blob_value(layer, expert, i)) return false;
  }
  return true;
}

inline std::string temp_dir(const char* base, const char* name) {
  return std::string(base) + "/seedling-" + name + "-" + std::to_string(::getpid());
}

}  // namespace seedling::test
