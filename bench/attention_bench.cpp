// bench/attention_bench.cpp - one decode row's attention on the CPU (ops::attention_row) against its compute and
// the bytes of keys and values it reads, on one thread.
// Usage: build/bench/attention_bench [positions ...]   (default 512 2048 8192)
// Qwen3-30B-A3B's attention (32 query heads on 4 KV heads of 128, keys and values float32 in the cache's layout);
// for each position count, the query heads in items of 1, 2, 4 and 8 sharing a KV head (the decoder's `per`),
// interleaved over 9 rounds after a warm-up: median time of all 32 heads, GMAC/s (2 x positions x 128 multiply-adds
// a head) and GB/s of keys and values (each item reads its KV head's rows once). Then "chunks": the decoder's decode
// items in its order (ops::attention_chunk over kAttentionChunk keys for one KV head's 8 query heads, chunk by chunk
// with the KV heads of a chunk in turn, as threads claim them), one pass over the whole cache a round: with a cache
// larger than the last-level cache its rows come from memory, as a decode step finds them after the weights it read.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

#include "ops/ops.h"

using namespace seedling;

int main(int argc, char** argv) {
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {512, 2048, 8192};
  constexpr int kHeads = 32, kKv = 4, kD = 128, kPers[] = {1, 2, 4, 8};
  const ops::AttentionShape shape{kHeads, kKv, kD, 1.0f / std::sqrt(float(kD))};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::printf("%9s %4s %12s %9s %9s\n", "positions", "per", "us (median)", "GMAC/s", "KV GB/s");
  for (const int n : counts) {
    std::vector<float> q(size_t(kHeads) * kD), k(size_t(n) * kKv * kD), v(k.size()), out(q.size());
    for (float& x : q) x = nd(rng);
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    std::vector<std::vector<double>> times(std::size(kPers));
    for (int round = 0; round < 10; ++round) {
      for (size_t p = 0; p < std::size(kPers); ++p) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int h = 0; h < kHeads; h += kPers[p]) {
          ops::attention_row(q.data(), k.data(), v.data(), 0, n - 1, shape, h, h + kPers[p], out.data());
        }
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (round > 0) times[p].push_back(us);
      }
    }
    for (size_t p = 0; p < std::size(kPers); ++p) {
      std::vector<double>& t = times[p];
      std::sort(t.begin(), t.end());
      const double us = t[t.size() / 2];
      const double macs = 2.0 * n * kD * kHeads, bytes = 2.0 * n * kD * 4.0 * (kHeads / kPers[p]);
      std::printf("%9d %4d %12.1f %9.2f %9.2f\n", n, kPers[p], us, macs / us / 1e3, bytes / us / 1e3);
    }
    const int chunks = ops::attention_chunks(0, n - 1), group = kHeads / kKv;
    std::vector<float> o(size_t(kHeads) * kD), ml(2 * size_t(kHeads));
    std::vector<double> item_us;
    for (int round = 0; round < 10; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < chunks; ++c) {
        for (int h = 0; h < kHeads; h += group) {
          const int first = c * ops::kAttentionChunk;
          ops::attention_chunk(q.data(), k.data(), v.data(), first, std::min(n - 1, first + ops::kAttentionChunk - 1),
                               shape, h, h + group, o.data() + size_t(h) * kD, ml.data() + 2 * size_t(h));
        }
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (round > 0) item_us.push_back(us / (chunks * kKv));
    }
    std::sort(item_us.begin(), item_us.end());
    const double us = item_us[item_us.size() / 2], bytes = 2.0 * ops::kAttentionChunk * kD * 4.0;
    std::printf("%9d %4s %12.2f %9s %9.2f   (chunks: us an item of %d keys x %d heads)\n", n, "item", us, "",
                bytes / us / 1e3, ops::kAttentionChunk, group);
  }
  return 0;
}
