// io/packed_model.cpp - manifest validation and views of a packed model folder.
#include "io/packed_model.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::json;

uint64_t packed_checksum(const uint8_t* data, size_t bytes) {
  return XXH64(data, bytes, 0);
}

bool is_packed_model_dir(const std::string& dir) {
  return fs::exists(fs::path(dir) / "manifest.json");
}

namespace {

// Typed access to the manifest: every failure names the manifest and the key path.
struct ManifestReader {
  static constexpr uint64_t kMaxElements = uint64_t(1) << 48;  // of one tensor

  std::string file;

  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    fail("{}: key '{}': {}", file, key, what);
  }
  const json& at(const json& obj, const std::string& key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key)) bad(path + key, "missing");
    return obj[key];
  }
  uint64_t u64(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      bad(path + key, "expected a non-negative integer");
    }
    return v.get<uint64_t>();
  }
  std::string str(const json& obj, const std::string& key, const std::string& path) const {
    const json& v = at(obj, key, path);
    if (!v.is_string()) bad(path + key, "expected a string");
    return v.get<std::string>();
  }
  Codec codec(const json& obj, const std::string& path) const {
    const std::string s = str(obj, "codec", path);
    const std::optional<Codec> c = parse_codec(s);
    if (!c) bad(path + "codec", fmt::format("unknown codec '{}' (known: {})", s, codec_names()));
    return *c;
  }
  // [n], [rows, cols], or up to `max_dims` dimensions (a resident conv weight (channels, 1, kernel): rows of the first
  // dimension, each the product of the others).
  std::vector<int64_t> shape(const json& obj, const std::string& path, size_t max_dims = 2) const {
    const json& v = at(obj, "shape", path);
    if (!v.is_array() || v.empty() || v.size() > max_dims) {
      bad(path + "shape", max_dims == 2 ? "expected [rows, cols] or [n]"
                                        : fmt::format("expected [n], [rows, cols] or up to {} dimensions", max_dims));
    }
    std::vector<int64_t> out;
    for (const json& d : v) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0) bad(path + "shape", "expected positive integers");
      out.push_back(d.get<int64_t>());
    }
    // Sizes are computed in size_t (codec_matrix_bytes): past 2^48 elements rows * row bytes could wrap to the
    // manifest's `bytes` and a view would be smaller than its shape. No tensor comes near (2^48 is 256 Ti weights).
    const uint64_t rows = uint64_t(out[0]);
    uint64_t cols = 1;
    for (size_t i = 1; i < out.size(); ++i) {
      if (uint64_t(out[i]) > kMaxElements / cols)
        bad(path + "shape", fmt::format("{} holds more than 2^48 elements", v.dump()));
      cols *= uint64_t(out[i]);
    }
    if (rows > kMaxElements || cols > kMaxElements / rows) {
      bad(path + "shape", fmt::format("{} holds more than 2^48 elements", v.dump()));
    }
    return out;
  }
  uint64_t hash(const json& obj, const std::string& path) const {
    const std::string s = str(obj, "xxh64", path);
    if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
      bad(path + "xxh64", "expected 16 lowercase hex digits");
    }
    return std::stoull(s, nullptr, 16);
  }
};

uint64_t file_size_of(const fs::path& p, const std::string& manifest, const std::string& key) {
  std::error_code ec;
  const uint64_t n = fs::file_size(p, ec);
  if (ec) fail("{}: key '{}': file {} is missing or unreadable", manifest, key, p.string());
  return n;
}

size_t expected_bytes(Codec c, const std::vector<int64_t>& shape) {
  return codec_tensor_bytes(c, shape);
}

// Byte ranges [offset, offset + bytes) of one file, each named: two that share a byte alias each other, and the
// manifest is refused naming both.
struct Extent {
  uint64_t offset, bytes;
  std::string what;
};
void check_no_alias(std::vector<Extent> extents, const std::string& file, const std::string& manifest) {
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < extents.size(); ++i) {
    const Extent& a = extents[i - 1];
    const Extent& b = extents[i];
    if (a.bytes > 0 && b.bytes > 0 && a.offset + a.bytes > b.offset) {
      fail("{}: {} (bytes [{}, {})) and {} (bytes [{}, {})) of {} overlap", manifest, a.what, a.offset,
           a.offset + a.bytes, b.what, b.offset, b.offset + b.bytes, file);
    }
  }
}

}  // namespace

std::unique_ptr<PackedModel> PackedModel::open(const std::string& dir) {
  auto pm = std::unique_ptr<PackedModel>(new PackedModel());
  pm->dir_ = dir;
  const fs::path mpath = fs::path(dir) / "manifest.json";
  const ManifestReader r{mpath.string()};
  {
    std::ifstream in(mpath);
    if (!in) fail("{}: cannot open", mpath.string());
    try {
      pm->manifest_ = json::parse(in);
    } catch (const json::exception& e) {
      fail("{}: not valid JSON: {}", mpath.string(), e.what());
    }
  }
  const json& m = pm->manifest_;
  if (!m.is_object()) fail("{}: expected a JSON object", mpath.string());
  if (r.str(m, "format", "") != kPackedFormatName) r.bad("format", fmt::format("expected '{}'", kPackedFormatName));
  const uint64_t version = r.u64(m, "version", "");
  if (version != uint64_t(kPackedFormatVersion)) {
    r.bad("version", fmt::format("version {} is not supported (this build reads {})", version, kPackedFormatVersion));
  }
  if (!r.at(m, "config", "").is_object()) r.bad("config", "expected the object of config.json");

  // Resident tensors.
  const json& res = r.at(m, "resident", "");
  const std::string res_file = r.str(res, "file", "resident.");
  const fs::path res_path = fs::path(dir) / res_file;
  const uint64_t res_size = file_size_of(res_path, mpath.string(), "resident.file");
  if (res_size > 0) pm->resident_ = std::make_unique<MappedFile>(res_path.string());
  const json& tensors = r.at(res, "tensors", "resident.");
  if (!tensors.is_object()) r.bad("resident.tensors", "expected an object of tensors by name");
  for (const auto& [name, t] : tensors.items()) {
    const std::string path = "resident.tensors." + name + ".";
    PackedTensor pt;
    pt.name = name;
    pt.codec = r.codec(t, path);
    pt.shape = r.shape(t, path, 3);
    pt.offset = r.u64(t, "offset", path);
    pt.bytes = r.u64(t, "bytes", path);
    pt.xxh64 = r.hash(t, path);
    if (codec_is_seed(pt.codec)) {
      r.bad(path + "codec",
            fmt::format("{} is a seed codec, which only routed experts' parts may use", codec_name(pt.codec)));
    }
    if (pt.bytes != expected_bytes(pt.codec, pt.shape)) {
      r.bad(path + "bytes", fmt::format("{} bytes, but {} of shape {} takes {}", pt.bytes, codec_name(pt.codec),
                                        t["shape"].dump(), expected_bytes(pt.codec, pt.shape)));
    }
    if (pt.offset % kPackedTensorAlign != 0) r.bad(path + "offset", "not 64-byte aligned");
    if (pt.offset > res_size || pt.bytes > res_size - pt.offset) {
      fail("{}: tensor '{}' ends at byte {}, past the end of {} ({} bytes; truncated?)", mpath.string(), name,
           pt.offset + pt.bytes, res_path.string(), res_size);
    }
    pt.data = pm->resident_->data() + pt.offset;
    if (packed_checksum(pt.data, pt.bytes) != pt.xxh64) {
      fail("{}: tensor '{}' (offset {}, {} bytes) fails its xxh64 checksum from {}: the file is corrupted",
           res_path.string(), name, pt.offset, pt.bytes, mpath.string());
    }
    pm->tensors_.emplace(name, std::move(pt));
  }
  {
    std::vector<Extent> extents;
    for (const auto& [name, t] : pm->tensors_) extents.push_back({t.offset, t.bytes, "tensor '" + name + "'"});
    check_no_alias(std::move(extents), res_path.string(), mpath.string());
  }
  std::map<std::string, std::vector<Extent>> blob_extents;  // expert file -> its blobs

  // Expert layers.
  const json& ex = r.at(m, "experts", "");
  if (!ex.is_array()) r.bad("experts", "expected an array of layers");
  for (size_t i = 0; i < ex.size(); ++i) {
    const json& L = ex[i];
    const std::string path = fmt::format("experts[{}].", i);
    const uint64_t layer = r.u64(L, "layer", path);
    if (layer > 100000) r.bad(path + "layer", "out of range");
    if (pm->layers_.size() <= layer) pm->layers_.resize(layer + 1);
    PackedExpertLayer& pl = pm->layers_[layer];
    if (!pl.blobs.empty()) r.bad(path + "layer", fmt::format("layer {} appears twice", layer));
    const fs::path fpath = fs::path(dir) / r.str(L, "file", path);
    pl.file = fpath.string();
    pl.file_bytes = file_size_of(fpath, mpath.string(), path + "file");
    pl.blob_bytes = r.u64(L, "blob_bytes", path);
    const char* part_names[3] = {"gate", "up", "down"};
    for (int p = 0; p < 3; ++p) {
      const std::string pp = path + part_names[p] + ".";
      const json& pj = r.at(L, part_names[p], path);
      PackedExpertPart& part = pl.parts[p];
      part.codec = r.codec(pj, pp);
      const std::vector<int64_t> shape = r.shape(pj, pp);
      if (shape.size() != 2) r.bad(pp + "shape", "expected [rows, cols]");
      part.rows = shape[0];
      part.cols = shape[1];
      part.offset = r.u64(pj, "offset", pp);
      part.bytes = r.u64(pj, "bytes", pp);
      if (part.bytes != codec_matrix_bytes(part.codec, part.rows, part.cols)) {
        r.bad(pp + "bytes", fmt::format("{} bytes, but {} of shape {} takes {}", part.bytes, codec_name(part.codec),
                                        pj["shape"].dump(), codec_matrix_bytes(part.codec, part.rows, part.cols)));
      }
      if (part.offset % kPackedTensorAlign != 0) r.bad(pp + "offset", "not 64-byte aligned");
      if (part.offset > pl.blob_bytes || part.bytes > pl.blob_bytes - part.offset) {
        r.bad(pp + "offset", fmt::format("part ends past blob_bytes {}", pl.blob_bytes));
      }
    }
    check_no_alias({{pl.parts[0].offset, pl.parts[0].bytes, path + "gate"},
                    {pl.parts[1].offset, pl.parts[1].bytes, path + "up"},
                    {pl.parts[2].offset, pl.parts[2].bytes, path + "down"}},
                   "each blob", mpath.string());
    const json& blobs = r.at(L, "blobs", path);
    if (!blobs.is_array() || blobs.empty()) r.bad(path + "blobs", "expected a non-empty array");
    for (size_t e = 0; e < blobs.size(); ++e) {
      const std::string bp = fmt::format("{}blobs[{}].", path, e);
      ExpertBlobLocation b{pl.file, r.u64(blobs[e], "offset", bp), r.u64(blobs[e], "bytes", bp), r.hash(blobs[e], bp)};
      if (b.offset % kPackedBlobAlign != 0) r.bad(bp + "offset", "not 4096-byte aligned");
      if (b.bytes != pl.blob_bytes) r.bad(bp + "bytes", fmt::format("expected blob_bytes {}", pl.blob_bytes));
      const uint64_t padded = (b.bytes + kPackedBlobAlign - 1) / kPackedBlobAlign * kPackedBlobAlign;
      if (b.offset > pl.file_bytes || padded > pl.file_bytes - b.offset) {
        fail("{}: layer {} expert {} ends at byte {}, past the end of {} ({} bytes; truncated?)", mpath.string(), layer,
             e, b.offset + padded, pl.file, pl.file_bytes);
      }
      blob_extents[pl.file].push_back({b.offset, padded, fmt::format("layer {} expert {}", layer, e)});
      pl.blobs.push_back(std::move(b));
    }
  }
  for (auto& [file, extents] : blob_extents) check_no_alias(std::move(extents), file, mpath.string());
  return pm;
}

const PackedTensor& PackedModel::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}/manifest.json: no resident tensor '{}'", dir_, name);
  return it->second;
}

bool PackedModel::layer_has_experts(int layer) const {
  return layer >= 0 && size_t(layer) < layers_.size() && !layers_[size_t(layer)].blobs.empty();
}

int PackedModel::num_experts(int layer) const {
  return layer_has_experts(layer) ? int(layers_[size_t(layer)].blobs.size()) : 0;
}

const PackedExpertLayer& PackedModel::expert_layer(int layer) const {
  if (!layer_has_experts(layer)) fail("{}/manifest.json: layer {} has no routed experts", dir_, layer);
  return layers_[size_t(layer)];
}

const ExpertBlobLocation& PackedModel::expert_blob(int layer, int expert) const {
  const PackedExpertLayer& pl = expert_layer(layer);
  if (expert < 0 || size_t(expert) >= pl.blobs.size()) {
    fail("{}/manifest.json: layer {} has no expert {}", dir_, layer, expert);
  }
  return pl.blobs[size_t(expert)];
}

void PackedModel::verify_blob(int layer, int expert, const uint8_t* blob) const {
  const ExpertBlobLocation& b = expert_blob(layer, expert);
  const uint64_t got = packed_checksum(blob, b.bytes);
  if (got != b.xxh64) {
    fail(
        "{}: layer {} expert {} (offset {}, {} bytes) fails its xxh64 checksum ({:016x}, manifest says {:016x}): "
        "the file is corrupted",
        b.file, layer, expert, b.offset, b.bytes, got, b.xxh64);
  }
}

uint64_t PackedModel::expert_bytes_total() const {
  uint64_t n = 0;
  for (const PackedExpertLayer& pl : layers_) n += pl.blob_bytes * pl.blobs.size();
  return n;
}

}  // namespace seedling
