// bench/int8_gemm_bench.cpp - the two int8 kernels (ops::Int8Kernel Rows and Gemm, the same bits) on one thread,
// over the rows one expert of the Qwen3-30B-A3B shape sees (gate 768 x 2048 and down 2048 x 768), for a codec and
// several row counts: where Gemm overtakes Rows (kInt8GemmRows) and by how much. Rounds alternate the kernels;
// prints the median microseconds a product and its integer multiply-adds per second.
// Not a CMake target; build after `ninja -C build seedling_engine` with (one line)
//   g++ -std=c++20 -O2 -ffp-contract=off -Isrc bench/int8_gemm_bench.cpp -o /tmp/int8_gemm_bench
//   build/libseedling_engine.a build/libseedling_core.a $(pkg-config --libs libhwy liburing libxxhash) -lfmt -lpthread
// Usage: /tmp/int8_gemm_bench [q4_g32|q4_g64|q8_g32|q8_g64] [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "codec/quantize.h"
#include "ops/matmul.h"
using namespace seedling;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  Codec c = Codec::Q4_G32;
  const std::string_view name = argc > 1 ? argv[1] : "q4_g32";
  for (const Codec k : {Codec::Q4_G32, Codec::Q4_G64, Codec::Q8_G32, Codec::Q8_G64})
    if (name == codec_name(k)) c = k;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 9;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  struct Shape {
    const char* what;
    int64_t rows, cols;
  };
  for (const Shape s : {Shape{"gate", 768, 2048}, Shape{"down", 2048, 768}}) {
    std::vector<float> wf(size_t(s.rows * s.cols));
    for (float& v : wf) v = normal(rng);
    std::vector<uint8_t> bytes(codec_matrix_bytes(c, s.rows, s.cols));
    encode_matrix(c, DType::F32, wf.data(), s.rows, s.cols, bytes.data());
    const ops::Matrix w{c, bytes.data(), s.rows, s.cols};
    for (const int64_t m : {1, 2, 4, 8, 16, 32, 64}) {
      std::vector<float> x(size_t(m * s.cols)), y(size_t(m * s.rows));
      for (float& v : x) v = normal(rng);
      ops::Int8Rows xq;
      ops::quantize_int8_rows(x.data(), m, s.cols, codec_group(c), xq);
      std::vector<double> t[2];
      for (int r = 0; r < rounds; ++r) {
        for (int a = 0; a < 2; ++a) {
          const int arm = (r % 2 == 0) ? a : 1 - a;
          const double t0 = now();
          ops::matmul_int8_range(xq, w, y.data(), 0, s.rows, arm == 0 ? ops::Int8Kernel::Rows : ops::Int8Kernel::Gemm);
          t[arm].push_back(now() - t0);
        }
      }
      double med[2];
      for (int a = 0; a < 2; ++a) {
        std::sort(t[a].begin(), t[a].end());
        med[a] = t[a][t[a].size() / 2];
      }
      const double macs = double(m) * double(s.rows) * double(s.cols);
      std::printf("%s %s m=%3lld  rows %8.1f us (%5.1f GMAC/s)  gemm %8.1f us (%5.1f GMAC/s)  rows/gemm %.2f\n",
                  std::string(codec_name(c)).c_str(), s.what, static_cast<long long>(m), med[0] * 1e6,
                  macs / med[0] * 1e-9, med[1] * 1e6, macs / med[1] * 1e-9, med[0] / med[1]);
    }
  }
}
