// cli/cmd_quant_report.cpp - `seedling quant-report`: how much each weight codec loses, three ways.
//
//   --gaussian N         N i.i.d. N(0, 1) weights (splitmix64 + Box-Muller in double, --rng-seed) in rows of 2048, so
//                        N must be a multiple of 2048; the whole set is one slice (one exponent bias for the seeds).
//   -m DIR [--tensor T]  the weights of a Hugging Face folder: tensor T, or every routed expert's gate, up and down;
//                        --rows N evenly spaced rows of each tensor (row i * rows / N), each tensor one slice.
//   -m DIR --against D -f TEXT   the logits of model DIR against model D (a packed copy) over the same windows of
//                        the text: KLD(DIR || D) per token, top-1 agreement, both perplexities.
//
// Weight reports: rel_mse = sum (w - w')^2 / sum w^2 pooled over every weight measured, next to the Gaussian
// rate-distortion bound 2^(-2R) at the codec's bits per weight R. Affine rows use codec/affine_reference.h (float16
// scale and minimum per group); bits per weight count every scale, minimum and bias as stored for the whole tensor
// (a row shorter than the group is one short group; a seed tier's bias is one per tensor).
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>
#include <vector>

#include "cli/commands.h"
#include "codec/affine_reference.h"
#include "codec/codec.h"
#include "codec/seed_codec.h"
#include "codec/seed_search.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/perplexity.h"
#include "io/gguf.h"
#include "io/packed_model.h"
#include "io/safetensors.h"
#include "model/imatrix.h"

namespace seedling::cli {

namespace {

struct QuantReportFlags {
  int64_t gaussian = 0;
  std::string model, tensor, against, file, imatrix;
  int64_t rows = 16;
  int64_t tokens = 0;
  int ctx = 512;
  bool json = false;
  uint32_t seeds = 65535;
  uint64_t rng_seed = 1;
  int threads = 0;
  bool quiet = false;
};

struct Bf16 {};
struct SeedArm {
  seed::SeedTier tier;
  bool weighted;  // searched with the imatrix's h
};
struct CodecUnderTest {
  std::string name;
  std::variant<Bf16, seed::AffineSpec, SeedArm> how;
};

// Error of one codec pooled over every slice measured; werr/ww2 weight each column by its energy h (1 without).
struct Tally {
  double err = 0, w2 = 0, werr = 0, ww2 = 0;
  double bits_x_weights = 0;  // for the weights' mean bits per weight
  int64_t weights = 0;
  double seconds = 0;  // seed search
  double rel_mse() const { return err / w2; }
  double weighted_rel_mse() const { return werr / ww2; }
  double bits() const { return bits_x_weights / double(weights); }
};

std::vector<CodecUnderTest> codecs_under_test(const char* int8_name, seed::AffineSpec int8, bool imatrix) {
  std::vector<CodecUnderTest> v = {{"bf16", Bf16{}},
                                   {int8_name, int8},
                                   {"int4_g32", seed::AffineSpec{4, 32}},
                                   {"int4_g64", seed::AffineSpec{4, 64}},
                                   {"int4_g128", seed::AffineSpec{4, 128}},
                                   {"int3_g64", seed::AffineSpec{3, 64}}};
  for (seed::SeedTier t : seed::kAllSeedTiers) v.push_back({std::string(seed::seed_tier_name(t)), SeedArm{t, false}});
  if (imatrix) {
    for (seed::SeedTier t : seed::kAllSeedTiers)
      v.push_back({std::string(seed::seed_tier_name(t)) + "+imatrix", SeedArm{t, true}});
  }
  return v;
}

// Encodes and decodes one slice (rows x cols of a tensor of full_rows rows) with codec `c` and adds its error;
// h (cols energies, or nullptr for 1) weights the weighted error and the search of a weighted seed arm.
void measure(const CodecUnderTest& c, const std::vector<float>& w, int64_t rows, int64_t cols, int64_t full_rows,
             const float* h, const seed::SeedSearchOptions& opt, Tally* t) {
  std::vector<float> d(w.size());
  double bits = 16.0;
  if (std::holds_alternative<Bf16>(c.how)) {
    for (size_t i = 0; i < w.size(); ++i) d[i] = bf16_to_f32(f32_to_bf16(w[i]));
  } else if (const auto* a = std::get_if<seed::AffineSpec>(&c.how)) {
    seed::affine_roundtrip(*a, w.data(), rows, cols, d.data());
    const int64_t groups = (cols + a->group - 1) / a->group;
    bits = double(a->bits) + 32.0 * double(groups) / double(cols);
  } else {
    const SeedArm arm = std::get<SeedArm>(c.how);
    const seed::SeedTier tier = arm.tier;
    const double t0 = now_seconds();
    const auto blob = seed::encode_seed_slice(tier, w.data(), rows, cols, arm.weighted ? h : nullptr, opt);
    t->seconds += now_seconds() - t0;
    seed::decode_seed_matrix({tier, blob.data(), rows, cols}, d.data());
    bits = seed::seed_bits_per_weight(tier, full_rows, cols);
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const double e = double(w[i]) - double(d[i]), hc = h ? double(h[i % size_t(cols)]) : 1.0;
    t->err += e * e;
    t->w2 += double(w[i]) * double(w[i]);
    t->werr += hc * e * e;
    t->ww2 += hc * double(w[i]) * double(w[i]);
  }
  t->bits_x_weights += bits * double(w.size());
  t->weights += int64_t(w.size());
}

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

seed::SeedSearchOptions search_options(const QuantReportFlags& f) {
  seed::SeedSearchOptions opt;
  opt.n_seeds = f.seeds;
  return opt;
}

void print_tallies(const QuantReportFlags& f, const std::vector<CodecUnderTest>& codecs, const std::vector<Tally>& t,
                   bool with_weights) {
  const bool weighted = !f.imatrix.empty();
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (size_t i = 0; i < codecs.size(); ++i) {
      nlohmann::json row = {{"codec", codecs[i].name},
                            {"bits_per_weight", t[i].bits()},
                            {"rel_mse", t[i].rel_mse()},
                            {"bound_rel_mse", std::exp2(-2.0 * t[i].bits())}};
      if (with_weights) row["weights"] = t[i].weights;
      if (weighted) row["weighted_rel_mse"] = t[i].weighted_rel_mse();
      arr.push_back(row);
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return;
  }
  std::printf("%-11s %8s %12s %12s %8s", "codec", "bits/w", "rel_mse", "2^(-2R)", "ratio");
  std::printf(weighted ? " %12s %10s\n" : "%.0s %10s\n", "weighted", "search_s");
  for (size_t i = 0; i < codecs.size(); ++i) {
    const double bound = std::exp2(-2.0 * t[i].bits());
    std::printf("%-11s %8.4f %12.4e %12.4e %8.2f", codecs[i].name.c_str(), t[i].bits(), t[i].rel_mse(), bound,
                t[i].rel_mse() / bound);
    if (weighted) std::printf(" %12.4e", t[i].weighted_rel_mse());
    if (t[i].seconds > 0) {
      std::printf(" %10.1f  (%.0f weights/s per thread)", t[i].seconds,
                  double(t[i].weights) / t[i].seconds / ThreadPool::global().size());
    }
    std::printf("\n");
  }
}

int run_gaussian(const QuantReportFlags& f) {
  constexpr int64_t kCols = 2048;
  if (f.gaussian % kCols != 0)
    fail("quant-report: --gaussian {} is not a multiple of the row length {}", f.gaussian, kCols);
  const int64_t rows = f.gaussian / kCols;
  const std::vector<float> w = gaussian_weights(f.gaussian, f.rng_seed);
  const std::vector<CodecUnderTest> codecs = codecs_under_test("int8_g64", {8, 64}, false);
  std::vector<Tally> t(codecs.size());
  for (size_t i = 0; i < codecs.size(); ++i) {
    seed::SeedSearchOptions opt = search_options(f);
    if (!f.quiet) {
      opt.progress = [name = codecs[i].name](const seed::SeedSearchProgress& p) {
        std::fprintf(stderr, "\r%s: %lld / %lld blocks, %.0f blocks/s, ETA %.0f s   ", name.c_str(),
                     (long long)p.blocks_done, (long long)p.blocks_total, p.blocks_per_s, p.eta_s);
        if (p.blocks_done == p.blocks_total) std::fprintf(stderr, "\n");
      };
    }
    measure(codecs[i], w, rows, kCols, rows, nullptr, opt, &t[i]);
  }
  if (!f.json) {
    std::printf("%lld i.i.d. N(0,1) weights in rows of %lld; seed search over %u seeds on %d threads\n",
                (long long)f.gaussian, (long long)kCols, f.seeds, ThreadPool::global().size());
  }
  print_tallies(f, codecs, t, false);
  return 0;
}

// Rows r_i = i * rows / n (i < n, n = min(want, rows)) of a 2-D float tensor, as float32.
std::vector<float> sample_rows(const TensorInfo& t, int64_t want, int64_t* n_out) {
  const Codec c = *codec_of_dtype(t.dtype);
  const int64_t rows = t.shape[0], cols = t.shape[1], n = std::min(want, rows);
  std::vector<float> w(size_t(n * cols));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = t.data + size_t(i * rows / n) * codec_row_bytes(c, cols);
    for (int64_t k = 0; k < cols; ++k) w[size_t(i * cols + k)] = codec_value(c, row, k);
  }
  *n_out = n;
  return w;
}

int run_weights(const QuantReportFlags& f) {
  if (f.rows < 1) fail("quant-report: --rows {} must be at least 1", f.rows);
  if (is_packed_model_dir(f.model))
    fail("quant-report: {} is a packed folder; -m takes the Hugging Face folder it was packed from", f.model);
  if (is_gguf_file(f.model)) {
    fail("quant-report: {} is a GGUF file; -m takes a Hugging Face folder (a GGUF is compared with --against)",
         f.model);
  }
  const Family* fam = nullptr;
  const ModelConfig c = read_model_config(f.model, &fam);
  const Checkpoint ck(f.model);
  struct Item {
    const TensorInfo* t;
    int layer = -1, expert = -1;
    MatrixInput input = MatrixInput::ExpertGateUp;
  };
  std::vector<Item> tensors;
  std::string what;
  if (!f.tensor.empty()) {
    const TensorInfo& t = ck.get(f.tensor);
    if (t.shape.size() != 2)
      fail("quant-report: tensor '{}' has shape {}, expected a matrix", f.tensor, t.shape_string());
    if (!codec_of_dtype(t.dtype))
      fail("{}: tensor '{}' has dtype {}, expected BF16, F16 or F32", t.file, f.tensor, dtype_name(t.dtype));
    tensors.push_back({&t});
    what = fmt::format("tensor {} {}", f.tensor, t.shape_string());
  } else {
    int moe_layers = 0;
    for (int l = 0; l < c.num_layers; ++l) {
      if (!c.layer_has_experts[size_t(l)]) continue;
      ++moe_layers;
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertParts parts = fam->expert_parts(c, l, e);
        for (int p = 0; p < 3; ++p) {
          const std::string& name = parts[size_t(p)].name;
          if (parts[size_t(p)].stacked >= 0) {
            fail("quant-report: {} stores its experts stacked ('{}'); name one matrix with --tensor", c.model_type,
                 name);
          }
          const TensorInfo& t = ck.get(name);
          const MatrixInput input = p == 2 ? MatrixInput::ExpertDown : MatrixInput::ExpertGateUp;
          if (t.shape.size() != 2 || !codec_of_dtype(t.dtype))
            fail("{}: tensor '{}' has shape {} and dtype {}, expected a BF16, F16 or F32 matrix", t.file, name,
                 t.shape_string(), dtype_name(t.dtype));
          tensors.push_back({&t, l, e, input});
        }
      }
    }
    if (moe_layers == 0) fail("quant-report: {} has no routed experts (name one matrix with --tensor)", f.model);
    what = fmt::format("routed experts: gate, up and down of {} experts x {} MoE layers", c.num_experts, moe_layers);
  }
  std::optional<Imatrix> im;
  if (!f.imatrix.empty()) {
    if (!f.tensor.empty()) fail("quant-report: --imatrix weights the routed experts; it does not go with --tensor");
    im = Imatrix::load(f.imatrix, c);
  }
  const std::vector<CodecUnderTest> codecs = codecs_under_test("int8_g32", {8, 32}, im.has_value());
  std::vector<Tally> t(codecs.size());
  const seed::SeedSearchOptions opt = search_options(f);
  int64_t sampled = 0, total = 0, unweighted = 0;
  const double t0 = now_seconds();
  double last_report = -1.0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorInfo& ti = *tensors[k].t;
    int64_t n = 0;
    const std::vector<float> w = sample_rows(ti, f.rows, &n);
    std::vector<float> h;
    if (im) {
      h = im->expert_search_weights(tensors[k].layer, tensors[k].expert, tensors[k].input);
      unweighted += h.empty() ? 1 : 0;
    }
    for (size_t i = 0; i < codecs.size(); ++i)
      measure(codecs[i], w, n, ti.shape[1], ti.shape[0], h.empty() ? nullptr : h.data(), opt, &t[i]);
    sampled += int64_t(w.size());
    total += ti.numel();
    const double dt = now_seconds() - t0;
    if (!f.quiet && (dt - last_report >= 0.5 || k + 1 == tensors.size())) {
      last_report = dt;
      std::fprintf(stderr, "\rquant-report: tensor %zu/%zu, ETA %.0f s   ", k + 1, tensors.size(),
                   dt / double(k + 1) * double(tensors.size() - k - 1));
    }
  }
  if (!f.quiet) std::fprintf(stderr, "\n");
  if (!f.json) {
    std::printf("%s: %s (%zu tensors); up to %lld evenly spaced rows of each: %lld of %lld weights (%.1f%%)\n",
                f.model.c_str(), what.c_str(), tensors.size(), (long long)f.rows, (long long)sampled, (long long)total,
                100.0 * double(sampled) / double(total));
    std::printf("seed search over %u seeds on %d threads, each tensor's sample one slice\n", f.seeds,
                ThreadPool::global().size());
    if (im) {
      std::printf(
          "imatrix %s: 'weighted' = sum h (w - w')^2 / sum h w^2 with h its mean energies (1 for the %lld "
          "tensors of experts no row reached); +imatrix: seeds searched with h\n",
          f.imatrix.c_str(), (long long)unweighted);
    }
  }
  print_tallies(f, codecs, t, true);
  return 0;
}

// The sizes two models must share for their logits to be compared.
void check_same_shape(const Model& a, const Model& b) {
  const ModelConfig &x = a.config(), &y = b.config();
  const struct {
    const char* key;
    int64_t u, v;
  } keys[] = {{"vocab_size", x.vocab_size, y.vocab_size},
              {"hidden_size", x.hidden_size, y.hidden_size},
              {"num_hidden_layers", x.num_layers, y.num_layers},
              {"num_experts", x.num_experts, y.num_experts},
              {"num_experts_per_tok", x.experts_per_token, y.experts_per_token},
              {"moe_intermediate_size", x.moe_intermediate_size, y.moe_intermediate_size}};
  for (const auto& k : keys) {
    if (k.u != k.v)
      fail("quant-report: {} has {} {} but --against {} has {}: not the same model", a.dir(), k.key, k.u, b.dir(), k.v);
  }
}

int run_against(const QuantReportFlags& f) {
  if (f.file.empty()) fail("quant-report: --against needs -f TEXT_FILE (the text whose tokens are compared)");
  if (f.tokens < 0) fail("quant-report: --tokens {} is negative", f.tokens);
  auto ref = Model::load(f.model);
  auto test = Model::load(f.against);
  check_same_shape(*ref, *test);
  std::vector<int32_t> ids = read_text_tokens(ref->dir(), f.file);
  const size_t all = ids.size();
  if (f.tokens > 0 && int64_t(ids.size()) > f.tokens) ids.resize(size_t(f.tokens));
  EngineOptions eo;
  eo.max_context = f.ctx;
  Engine a(*ref, eo), b(*test, eo);
  const LogitComparison r = compare_logits(a, b, ids, f.ctx, [&](int done, int total) {
    if (!f.quiet) std::fprintf(stderr, "\rquant-report: window %d/%d", done, total);
  });
  if (!f.quiet) std::fprintf(stderr, "\n");
  if (f.json) {
    const nlohmann::json j = {
        {"reference", f.model},       {"test", f.against},      {"tokens", ids.size()},
        {"windows", r.ref.windows},   {"ctx", f.ctx},           {"scored", r.ref.scored},
        {"kld_mean", r.kld_mean},     {"kld_max", r.kld_max},   {"top1_agreement", r.top1_agreement},
        {"ppl_reference", r.ref.ppl}, {"ppl_test", r.test.ppl}, {"nll_reference", r.ref.mean_nll},
        {"nll_test", r.test.mean_nll}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("reference: %s\ntest:      %s\n", f.model.c_str(), f.against.c_str());
  std::printf("text: %s, %zu of its %zu tokens in %d windows of %d; %lld positions scored\n", f.file.c_str(),
              ids.size(), all, r.ref.windows, f.ctx, (long long)r.ref.scored);
  std::printf("KLD(reference || test) per token: mean %.6f, max %.6f\n", r.kld_mean, r.kld_max);
  std::printf("top-1 agreement: %.2f%%\n", 100.0 * r.top1_agreement);
  std::printf("perplexity: reference %.4f (nll %.6f +- %.6f), test %.4f (nll %.6f +- %.6f), ratio %.4f\n", r.ref.ppl,
              r.ref.mean_nll, r.ref.nll_stderr, r.test.ppl, r.test.mean_nll, r.test.nll_stderr, r.test.ppl / r.ref.ppl);
  return 0;
}

int run(const QuantReportFlags& f) {
  if (f.seeds < 1 || f.seeds > 65535) fail("quant-report: --seeds {} is outside 1..65535", f.seeds);
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if ((f.gaussian != 0) == !f.model.empty())
    fail("quant-report: give either --gaussian N or -m DIR (with --tensor, or --against PACKED_DIR -f TEXT_FILE)");
  if (f.gaussian != 0) {
    if (f.gaussian < 0) fail("quant-report: --gaussian {} is negative", f.gaussian);
    return run_gaussian(f);
  }
  if (!f.against.empty()) {
    if (!f.tensor.empty()) fail("quant-report: --tensor and --against do not go together");
    return run_against(f);
  }
  if (!f.file.empty()) fail("quant-report: -f is for --against (logits over a text)");
  return run_weights(f);
}

}  // namespace

void add_quant_report(CLI::App& app, int* status) {
  auto f = std::make_shared<QuantReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "quant-report", "Error of each weight codec against the rate-distortion bound; logits KLD of a packed model");
  cmd->add_option("--gaussian", f->gaussian, "N i.i.d. N(0,1) weights in rows of 2048 (N a multiple of 2048)");
  cmd->add_option("-m,--model", f->model, "Hugging Face model folder: its routed experts, or --tensor");
  cmd->add_option("--tensor", f->tensor, "with -m: one matrix of the checkpoint instead of the routed experts");
  cmd->add_option("--rows", f->rows, "with -m: evenly spaced rows sampled from each tensor")->capture_default_str();
  cmd->add_option("--imatrix", f->imatrix,
                  "with -m: activation energies (seedling imatrix, or llama.cpp's imatrix GGUF) weighting errors "
                  "and seeds");
  cmd->add_option("--against", f->against, "with -m: a packed copy whose logits are compared to -m's over -f");
  cmd->add_option("-f,--file", f->file, "with --against: text file");
  cmd->add_option("--tokens", f->tokens, "with --against: the first N tokens of the text (0: all)");
  cmd->add_option("--ctx", f->ctx, "with --against: window length in tokens")->capture_default_str();
  cmd->add_flag("--json", f->json,
                "Print JSON (weights: an array of {codec, bits_per_weight, rel_mse, bound_rel_mse})");
  cmd->add_option("--seeds", f->seeds, "Search seeds 1..K only (a quick preview; the format uses all 65535)")
      ->capture_default_str();
  cmd->add_option("--rng-seed", f->rng_seed, "Seed of the Gaussian generator")->capture_default_str();
  cmd->add_option("-t,--threads", f->threads, "Threads (0: all hardware threads)");
  cmd->add_flag("-q,--quiet", f->quiet, "No progress line on stderr");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
