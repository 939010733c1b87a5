// bench/tokenizer_bench.cpp - single-thread encode speed of a tokenizer.json on a text file.
// Usage: tokenizer_bench [--print-ids] TOKENIZER_JSON TEXT_FILE [repeats]
// Prints the best of `repeats` whole-text encodes (seconds, MB/s), the id count and an FNV-1a hash of the ids, so a
// run beside HF tokenizers on the same file compares both speed and output. With --print-ids a second line holds
// the ids themselves, comma-separated (tools/hunt_tokenizer_mismatch.py compares them with HF's id for id).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  bool print_ids = false;
  std::vector<const char*> args;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--print-ids") == 0) {
      print_ids = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: %s [--print-ids] TOKENIZER_JSON TEXT_FILE [repeats]\n", argv[0]);
    return 2;
  }
  try {
    const auto tok = seedling::Tokenizer::from_file(args[0]);
    std::ifstream in(args[1], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "tokenizer_bench: error: cannot open %s\n", args[1]);
      return 1;
    }
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const int repeats = args.size() > 2 ? std::max(1, std::atoi(args[2])) : 3;
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
    std::printf(
        "{\"tokenizer\": \"%s\", \"bytes\": %zu, \"seconds_best\": %.4f, \"mb_per_s\": %.2f, \"ids\": %zu, "
        "\"ids_fnv1a64\": \"%016llx\"}\n",
        args[0], text.size(), best, double(text.size()) / std::max(best, 1e-9) / 1e6, ids.size(),
        static_cast<unsigned long long>(h));
    if (print_ids) {
      std::string line;
      line.reserve(ids.size() * 6 + 1);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ',';
        line += std::to_string(ids[i]);
      }
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  } catch (const seedling::Error& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 1;
  }
}
