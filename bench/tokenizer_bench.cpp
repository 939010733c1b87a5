// bench/tokenizer_bench.cpp - single-thread encode speed of a tokenizer.json on a text file.
// Usage: tokenizer_bench TOKENIZER_JSON TEXT_FILE [repeats]
// Prints the best of `repeats` whole-text encodes (seconds, MB/s), the id count and an FNV-1a hash of the ids, so a
// run beside HF tokenizers on the same file compares both speed and output.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [repeats]\n", argv[0]);
    return 2;
  }
  try {
    const auto tok = seedling::Tokenizer::from_file(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
    double best = 1e30;
    std::vector<int32_t> ids;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      ids = tok.encode(text, false);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    uint64_t h = 0xcbf29ce484222325ull;
    const auto* p = reinterpret_cast<const unsigned char*>(ids.data());
    for (size_t i = 0; i < ids.size() * sizeof(int32_t); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    std::printf("{\"tokenizer\": \"%s\", \"bytes\": %zu, \"seconds_best\": %.4f, \"mb_per_s\": %.2f, \"ids\": %zu, "
                "\"ids_fnv1a64\": \"%016llx\"}\n",
                argv[1], text.size(), best, double(text.size()) / best / 1e6, ids.size(),
                static_cast<unsigned long long>(h));
  } catch (const seedling::Error& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 1;
  }
}
