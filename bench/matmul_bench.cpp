// bench/matmul_bench.cpp - batch-1 matmul speed against a streaming read of the same bytes, in one run.
// Usage: build/bench/matmul_bench [rows cols]   (default: the Qwen3-30B-A3B lm_head, 151936 x 2048, bf16)
//        build/bench/matmul_bench --codecs [rows cols] [--threads N]   (default 8192 x 2048)
// --codecs: the matvec of each GGUF codec (codec/ggml_quants.h) and of q4_g64, q4_g32 (= ggml's Q4_1), bf16 and
// mxfp4 on random blocks of one shape, in interleaved rounds (each codec once a round, 15 rounds after a warm-up
// round): each codec's median time and its ratio to q4_g64's on the float path; then q4_g64 and every ggml codec
// under --cpu-dot int8 (ops/ggml_int8.h), in the same rounds, with the ratio to the same codec's float path; then
// the ggml codecs again with Plain decoding (each weight through the scalar reference, ops/matmul.h).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/ggml_quants.h"
#include "codec/quantize.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/matmul.h"

using namespace seedling;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// rows x cols of codec c: random bytes with small float16 scales (ggml codecs, mxfp4), else encoded normal values.
static std::vector<uint8_t> random_matrix(Codec c, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::vector<uint8_t> w(codec_matrix_bytes(c, rows, cols));
  if (codec_is_ggml(c) || c == Codec::MXFP4) {
    for (uint8_t& b : w) b = uint8_t(rng());
    const size_t block = codec_block_bytes(c);
    std::normal_distribution<float> nd(0.0f, 0.01f);
    for (size_t at = 0; at < w.size(); at += block) {
      for (size_t off : ggml::ggml_f16_fields(c)) {
        const uint16_t h = f32_to_f16(nd(rng));
        std::memcpy(&w[at + off], &h, 2);
      }
      if (c == Codec::MXFP4 || c == Codec::MXFP4_GGML) w[at] = uint8_t(120 + rng() % 8);
    }
    return w;
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = nd(rng);
  encode_matrix(c, DType::F32, x.data(), rows, cols, w.data());
  return w;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static int run_codecs(int64_t rows, int64_t cols) {
  const Codec baseline = Codec::Q4_G64;
  // The float path for all, then from int8_entry on q4_g64 and the ggml codecs again under --cpu-dot int8.
  std::vector<Codec> codecs = {baseline, Codec::Q4_G32, Codec::BF16, Codec::MXFP4};
  for (Codec c : kAllCodecs)
    if (codec_is_ggml(c)) codecs.push_back(c);
  const size_t int8_entry = codecs.size();
  codecs.push_back(baseline);
  for (size_t i = 4; i < int8_entry; ++i) codecs.push_back(codecs[i]);
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < codecs.size(); ++i)
    data.push_back(i < int8_entry ? random_matrix(codecs[i], rows, cols) : std::vector<uint8_t>());
  // An int8 entry reads the same bytes as the float entry of its codec.
  const auto bytes_of = [&](size_t i) -> const std::vector<uint8_t>& {
    if (i < int8_entry) return data[i];
    return data[i == int8_entry ? 0 : i - int8_entry + 3];
  };
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  std::printf("matvec %lld x %lld, %d threads, medians of 15 interleaved rounds\n", (long long)rows, (long long)cols,
              ThreadPool::global().size());
  for (const ops::GgmlDecode mode : {ops::GgmlDecode::Simd, ops::GgmlDecode::Plain}) {
    ops::set_ggml_decode(mode);
    std::vector<std::vector<double>> t(codecs.size());
    for (int round = 0; round < 16; ++round) {
      for (size_t i = 0; i < codecs.size(); ++i) {
        if (mode == ops::GgmlDecode::Plain && i >= int8_entry) continue;
        const ops::Matrix m{codecs[i], bytes_of(i).data(), rows, cols};
        ops::set_cpu_dot(i >= int8_entry ? ops::CpuDot::Int8 : ops::CpuDot::Float);
        const double t0 = now();
        ops::matmul(x.data(), 1, m, y.data());
        if (round > 0) t[i].push_back(now() - t0);  // round 0 warms caches and pages
      }
    }
    const double base = median(t[0]);
    std::printf("%s decode of the ggml codecs\n%-16s %8s %10s %9s %12s %14s\n",
                mode == ops::GgmlDecode::Simd ? "SIMD" : "Plain", "codec", "bits/w", "us", "GB/s", "vs q4_g64",
                "int8 vs float");
    for (size_t i = 0; i < codecs.size(); ++i) {
      if (mode == ops::GgmlDecode::Plain && ((!codec_is_ggml(codecs[i]) && i != 0) || i >= int8_entry)) continue;
      const double s = median(t[i]), bytes = double(bytes_of(i).size());
      const std::string name = std::string(codec_name(codecs[i])) + (i >= int8_entry ? " int8" : "");
      std::printf("%-16s %8.3f %10.1f %9.2f %11.2fx", name.c_str(), 8.0 * bytes / double(rows * cols), s * 1e6,
                  bytes / s / 1e9, base / s);
      if (i >= int8_entry) std::printf(" %13.2fx", median(t[i == int8_entry ? 0 : i - int8_entry + 3]) / s);
      std::printf("\n");
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto threads = std::find(args.begin(), args.end(), "--threads");
  if (threads != args.end() && threads + 1 != args.end()) {
    ThreadPool::set_global_threads(std::atoi(threads[1].c_str()));
    args.erase(threads, threads + 2);
  }
  if (!args.empty() && args[0] == "--codecs") {
    const bool shape = args.size() >= 3;
    return run_codecs(shape ? std::atoll(args[1].c_str()) : 8192, shape ? std::atoll(args[2].c_str()) : 2048);
  }
  const bool shape = args.size() >= 2;
  const int64_t rows = shape ? std::atoll(args[0].c_str()) : 151936, cols = shape ? std::atoll(args[1].c_str()) : 2048;
  std::vector<uint16_t> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(float(int(i % 97) - 48) / 64.0f);
  const ops::Matrix m{DType::BF16, w.data(), rows, cols};
  std::vector<float> x(static_cast<size_t>(cols), 0.5f), y(static_cast<size_t>(rows));
  const double bytes = double(w.size()) * 2;
  std::vector<double> mm, rd;
  for (int r = 0; r < 7; ++r) {
    double t0 = now();
    ops::matmul(x.data(), 1, m, y.data());
    mm.push_back(bytes / (now() - t0) / 1e9);
    t0 = now();
    const float s = ops::stream_read(reinterpret_cast<const float*>(w.data()), int64_t(w.size() / 2));
    rd.push_back(bytes / (now() - t0) / 1e9);
    if (s == 12345.0f) std::printf(" ");
  }
  std::sort(mm.begin(), mm.end());
  std::sort(rd.begin(), rd.end());
  std::printf(
      "bf16 matvec %lld x %lld (%.0f MB), %d threads: %.2f GB/s; streaming read of the same bytes: %.2f GB/s;"
      " ratio %.2f (medians of 7)\n",
      static_cast<long long>(rows), static_cast<long long>(cols), bytes / 1e6, ThreadPool::global().size(), mm[3],
      rd[3], mm[3] / rd[3]);
}
