// cli/cmd_quant_report.cpp - `seedling quant-report --gaussian N [--json]`: relative MSE of each weight codec at its
// bits per weight, next to the Gaussian rate-distortion bound 2^(-2R).
//
// Weights are N i.i.d. N(0, 1) values (splitmix64 + Box-Muller in double, --rng-seed) in rows of 2048, so N must be a
// multiple of 2048; the whole set is one slice (one exponent bias for the seed tiers). rel_mse = sum (w - w')^2 /
// sum w^2. Affine rows use codec/affine_reference.h (float16 scale and minimum per group); bits per weight include
// every scale, minimum and bias. Tensor and model reports (KLD) come with the packed format.
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/commands.h"
#include "codec/affine_reference.h"
#include "codec/seed_codec.h"
#include "codec/seed_search.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace seedling::cli {

namespace {

struct QuantReportFlags {
  int64_t gaussian = 0;
  bool json = false;
  uint32_t seeds = 65535;
  uint64_t rng_seed = 1;
  int threads = 0;
  bool quiet = false;
};

struct Row {
  std::string codec;
  double bits = 0, rel_mse = 0, seconds = 0;
};

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<float> gaussian_weights(int64_t n, uint64_t seed) {
  std::vector<float> w(static_cast<size_t>(n));
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (double(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = double(splitmix64(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    w[size_t(i)] = float(r * std::cos(2.0 * M_PI * u2));
    if (i + 1 < n) w[size_t(i + 1)] = float(r * std::sin(2.0 * M_PI * u2));
  }
  return w;
}

double rel_mse(const std::vector<float>& w, const std::vector<float>& d) {
  double num = 0, den = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double e = double(w[i]) - double(d[i]);
    num += e * e;
    den += double(w[i]) * double(w[i]);
  }
  return num / den;
}

int run(const QuantReportFlags& f) {
  if (f.gaussian <= 0) fail("quant-report: give --gaussian N (tensor and model reports need the packed format)");
  constexpr int64_t kCols = 2048;
  if (f.gaussian % kCols != 0)
    fail("quant-report: --gaussian {} is not a multiple of the row length {}", f.gaussian, kCols);
  if (f.seeds < 1 || f.seeds > 65535) fail("quant-report: --seeds {} is outside 1..65535", f.seeds);
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  const int64_t rows = f.gaussian / kCols;
  const std::vector<float> w = gaussian_weights(f.gaussian, f.rng_seed);
  std::vector<float> d(w.size());
  std::vector<Row> out;

  for (size_t i = 0; i < w.size(); ++i) d[i] = bf16_to_f32(f32_to_bf16(w[i]));
  out.push_back({"bf16", 16.0, rel_mse(w, d), 0});
  const struct {
    const char* name;
    seed::AffineSpec spec;
  } affine[] = {{"int8_g64", {8, 64}},
                {"int4_g32", {4, 32}},
                {"int4_g64", {4, 64}},
                {"int4_g128", {4, 128}},
                {"int3_g64", {3, 64}}};
  for (const auto& a : affine) {
    seed::affine_roundtrip(a.spec, w.data(), rows, kCols, d.data());
    out.push_back({a.name, seed::affine_bits_per_weight(a.spec), rel_mse(w, d), 0});
  }
  for (seed::SeedTier t : seed::kAllSeedTiers) {
    seed::SeedSearchOptions opt;
    opt.n_seeds = f.seeds;
    const std::string name(seed::seed_tier_name(t));
    if (!f.quiet) {
      opt.progress = [name](const seed::SeedSearchProgress& p) {
        std::fprintf(stderr, "\r%s: %lld / %lld blocks, %.0f blocks/s, ETA %.0f s   ", name.c_str(),
                     (long long)p.blocks_done, (long long)p.blocks_total, p.blocks_per_s, p.eta_s);
        if (p.blocks_done == p.blocks_total) std::fprintf(stderr, "\n");
      };
    }
    const double t0 = now_seconds();
    const auto blob = seed::encode_seed_slice(t, w.data(), rows, kCols, nullptr, opt);
    const double secs = now_seconds() - t0;
    seed::decode_seed_matrix({t, blob.data(), rows, kCols}, d.data());
    out.push_back({name, seed::seed_bits_per_weight(t, rows, kCols), rel_mse(w, d), secs});
  }

  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Row& r : out) {
      arr.push_back({{"codec", r.codec},
                     {"bits_per_weight", r.bits},
                     {"rel_mse", r.rel_mse},
                     {"bound_rel_mse", std::exp2(-2.0 * r.bits)}});
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  std::printf("%lld i.i.d. N(0,1) weights in rows of %lld; seed search over %u seeds on %d threads\n",
              (long long)f.gaussian, (long long)kCols, f.seeds, ThreadPool::global().size());
  std::printf("%-10s %8s %12s %12s %8s %10s\n", "codec", "bits/w", "rel_mse", "2^(-2R)", "ratio", "search_s");
  for (const Row& r : out) {
    const double bound = std::exp2(-2.0 * r.bits);
    std::printf("%-10s %8.4f %12.4e %12.4e %8.2f", r.codec.c_str(), r.bits, r.rel_mse, bound, r.rel_mse / bound);
    if (r.seconds > 0) {
      std::printf(" %10.1f  (%.0f weights/s per thread)", r.seconds,
                  double(f.gaussian) / r.seconds / ThreadPool::global().size());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void add_quant_report(CLI::App& app, int* status) {
  auto f = std::make_shared<QuantReportFlags>();
  CLI::App* cmd =
      app.add_subcommand("quant-report", "Relative MSE of each weight codec against the rate-distortion bound");
  cmd->add_option("--gaussian", f->gaussian, "N i.i.d. N(0,1) weights in rows of 2048 (N a multiple of 2048)")
      ->required();
  cmd->add_flag("--json", f->json, "Print a JSON array of {codec, bits_per_weight, rel_mse, bound_rel_mse}");
  cmd->add_option("--seeds", f->seeds, "Search seeds 1..K only (a quick preview; the format uses all 65535)")
      ->capture_default_str();
  cmd->add_option("--rng-seed", f->rng_seed, "Seed of the Gaussian generator")->capture_default_str();
  cmd->add_option("-t,--threads", f->threads, "Threads (0: all hardware threads)");
  cmd->add_flag("-q,--quiet", f->quiet, "No progress line on stderr");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
