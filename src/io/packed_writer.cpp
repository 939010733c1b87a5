// io/packed_writer.cpp - the writer of io/packed_writer.h.
#include "io/packed_writer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/packed_model.h"

namespace seedling {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t round_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

std::string hex64(uint64_t h) {
  return fmt::format("{:016x}", h);
}

}  // namespace

PackedWriter::PackedWriter(std::string out_dir, ordered_json config, ordered_json source_info)
    : out_(std::move(out_dir)), partial_(out_ + ".partial") {
  fs::remove_all(partial_);
  fs::create_directories(partial_);
  manifest_["format"] = kPackedFormatName;
  manifest_["version"] = kPackedFormatVersion;
  manifest_["source"] = std::move(source_info);
  manifest_["config"] = std::move(config);
  manifest_["resident"] = {{"file", "resident.bin"}, {"bytes", 0}, {"tensors", ordered_json::object()}};
  manifest_["experts"] = ordered_json::array();
  const std::string path = partial_ + "/resident.bin";
  resident_ = std::fopen(path.c_str(), "wb");
  if (resident_ == nullptr) fail("{}: cannot create", path);
  t0_ = seconds_now();
}

PackedWriter::~PackedWriter() {
  if (resident_ != nullptr) std::fclose(resident_);
}

void PackedWriter::write_bytes(std::FILE* f, const std::string& path, const uint8_t* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n) fail("{}: write failed (disk full?)", path);
  written_ += n;
  progress(false);
}

void PackedWriter::progress(bool done) {
  if (total_ == 0) return;
  const double now = seconds_now();
  if (!done && now - last_print_ < 0.25) return;
  last_print_ = now;
  const double frac = std::min(1.0, double(written_) / double(total_));
  const double rate = double(written_) / std::max(1e-9, now - t0_);  // bytes/s
  const double eta = rate > 0 ? double(total_ - std::min(total_, written_)) / rate : 0.0;
  const int width = 30, filled = int(frac * width);
  std::fprintf(stderr, "\rpack: [%s%s] %5.1f%% %.2f/%.2f GB %7.1f MB/s ETA %5.0f s%s",
               std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(), 100.0 * frac,
               double(written_) / 1e9, double(total_) / 1e9, rate / 1e6, eta, done ? "\n" : "");
  std::fflush(stderr);
}

void PackedWriter::add_resident(const std::string& name, Codec codec, std::vector<int64_t> shape, const Fill& fill) {
  const std::string path = partial_ + "/resident.bin";
  const uint64_t offset = round_up(resident_bytes_, kPackedTensorAlign);
  const std::vector<uint8_t> pad(size_t(offset - resident_bytes_), 0);
  write_bytes(resident_, path, pad.data(), pad.size());
  const size_t bytes = codec_tensor_bytes(codec, shape);
  std::vector<uint8_t> buf(bytes);
  fill(buf.data());
  write_bytes(resident_, path, buf.data(), bytes);
  resident_bytes_ = offset + bytes;
  manifest_["resident"]["tensors"][name] = {{"codec", codec_name(codec)},
                                            {"shape", shape},
                                            {"offset", offset},
                                            {"bytes", bytes},
                                            {"xxh64", hex64(packed_checksum(buf.data(), bytes))}};
}

void PackedWriter::add_expert_layer(int layer, int num_experts, const Part (&parts)[3], const ExpertFill& fill,
                                    int together) {
  const std::string file = fmt::format("experts-{:03d}.bin", layer);
  const std::string path = partial_ + "/" + file;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail("{}: cannot create", path);
  ordered_json entry = {{"layer", layer}, {"file", file}};
  uint64_t offs[3], end = 0;
  const char* names[3] = {"gate", "up", "down"};
  for (int p = 0; p < 3; ++p) {
    offs[p] = round_up(end, kPackedTensorAlign);
    end = offs[p] + codec_matrix_bytes(parts[p].codec, parts[p].rows, parts[p].cols);
  }
  const uint64_t blob_bytes = end, stride = round_up(blob_bytes, kPackedBlobAlign);
  entry["blob_bytes"] = blob_bytes;
  for (int p = 0; p < 3; ++p) {
    entry[names[p]] = {{"codec", codec_name(parts[p].codec)},
                       {"shape", {parts[p].rows, parts[p].cols}},
                       {"offset", offs[p]},
                       {"bytes", codec_matrix_bytes(parts[p].codec, parts[p].rows, parts[p].cols)}};
  }
  ordered_json blobs = ordered_json::array();
  const int batch = std::clamp(together, 1, std::max(num_experts, 1));
  std::vector<uint8_t> buf(size_t(stride) * size_t(batch));
  std::vector<uint64_t> sums(static_cast<size_t>(batch), 0);
  try {
    for (int e0 = 0; e0 < num_experts; e0 += batch) {
      const int n = std::min(batch, num_experts - e0);
      auto one = [&](size_t i) {
        uint8_t* blob = buf.data() + i * stride;
        std::fill(blob, blob + stride, uint8_t(0));
        for (int p = 0; p < 3; ++p) fill(e0 + int(i), p, blob + offs[p]);
        sums[i] = packed_checksum(blob, blob_bytes);
      };
      if (n == 1) {
        one(0);
      } else {
        ThreadPool::global().parallel_for(size_t(n), 1, [&](size_t b, size_t end) {
          for (size_t i = b; i < end; ++i) one(i);
        });
      }
      for (int i = 0; i < n; ++i) {
        blobs.push_back(
            {{"offset", uint64_t(e0 + i) * stride}, {"bytes", blob_bytes}, {"xxh64", hex64(sums[size_t(i)])}});
      }
      write_bytes(f, path, buf.data(), size_t(stride) * size_t(n));
    }
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0) fail("{}: write failed (disk full?)", path);
  entry["blobs"] = std::move(blobs);
  manifest_["experts"].push_back(std::move(entry));
}

void PackedWriter::copy_if_present(const std::string& src) {
  if (!fs::exists(src)) return;
  fs::copy_file(src, fs::path(partial_) / fs::path(src).filename(), fs::copy_options::overwrite_existing);
}

uint64_t PackedWriter::finish() {
  const std::string rpath = partial_ + "/resident.bin";
  const uint64_t padded = round_up(resident_bytes_, kPackedTensorAlign);
  const std::vector<uint8_t> pad(size_t(padded - resident_bytes_), 0);
  write_bytes(resident_, rpath, pad.data(), pad.size());
  if (std::fclose(resident_) != 0) {
    resident_ = nullptr;
    fail("{}: write failed (disk full?)", rpath);
  }
  resident_ = nullptr;
  manifest_["resident"]["bytes"] = padded;
  std::ofstream(fs::path(partial_) / "config.json") << manifest_["config"].dump(2) << "\n";
  {
    std::ofstream m(fs::path(partial_) / "manifest.json");
    m << manifest_.dump(1) << "\n";
    if (!m) fail("{}/manifest.json: write failed", partial_);
  }
  progress(true);
  fs::remove_all(out_);
  fs::rename(partial_, out_);
  return written_;
}

}  // namespace seedling
