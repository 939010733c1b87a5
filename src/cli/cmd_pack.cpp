// cli/cmd_pack.cpp - `seedling pack`: a Hugging Face folder or a GGUF file -> a packed folder
// (docs/formats/packed.md).
//
// Routed experts go to one file per MoE layer, one 4 KiB-aligned blob per expert, in --experts CODEC; dense
// matrices (attention projections, dense MLPs, embeddings, head) in --dense CODEC; norms, biases and routers stay
// exactly as stored (a router's top-k is a discrete choice that a small error can flip). Both flags default to
// "stored": the checkpoint's own dtype, byte for byte. Seed tiers (p3, p4, s3) are for experts only: each part is
// searched (codec/seed_search.h, every thread; or with --search-device cuda on the GPU, cuda/seed_search.h, the same
// blobs bit for bit) into one slice blob, with one progress line for the whole search, weighted by the expert's
// input energies when --imatrix names a file.
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "codec/quantize.h"
#include "codec/seed_search.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#ifdef SEEDLING_HAVE_CUDA
#include "cuda/seed_search.h"
#endif
#include "io/packed_writer.h"
#include "model/expert_parts.h"
#include "model/gguf_source.h"
#include "model/imatrix.h"
#include "template/chat_template.h"
#include "tokenizer/gguf_vocab.h"

namespace seedling::cli {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

struct PackFlags {
  std::string model;
  std::string out;
  std::string experts = "stored";
  std::string dense = "stored";
  uint32_t seed_search_seeds = seed::SeedSearchOptions::kLfsrSeeds;  // preview/test knob: search seeds 1..K only
  std::string imatrix;                                               // activation energies weighting the seed search
  std::string search_device = "cpu";                                 // where the seed search runs: cpu or cuda
  bool force = false;
};

// Per-input-channel activation energies of one expert part (h in codec/seed_search.h: cols values, >= 0), which
// weight the seed search's error: from `--imatrix FILE` (docs/formats/imatrix.md), for gate and up the energies of
// the hidden state entering the expert, for down those of its activation. Without a file, or for an expert no row of
// the recorded text reached, get() is nullptr: that part is searched unweighted.
class ChannelEnergies {
 public:
  ChannelEnergies() = default;
  ChannelEnergies(const std::string& path, const ModelConfig& c) : im_(Imatrix::load(path, c)) {}
  const float* get(int layer, int expert, int part, int64_t cols) {
    if (!im_) return nullptr;
    h_ = im_->expert_search_weights(layer, expert, part == 2 ? MatrixInput::ExpertDown : MatrixInput::ExpertGateUp);
    ++parts_;
    if (h_.empty()) {
      ++unweighted_;
      return nullptr;
    }
    SEEDLING_CHECK(int64_t(h_.size()) == cols, "imatrix energies of {} channels for a part of {} columns", h_.size(),
                   cols);
    return h_.data();
  }
  int64_t parts() const { return parts_; }
  int64_t unweighted() const { return unweighted_; }

 private:
  std::optional<Imatrix> im_;
  std::vector<float> h_;
  int64_t parts_ = 0, unweighted_ = 0;
};

// One progress line on stderr over every seed part of a pack: blocks searched, blocks/s, ETA.
class SearchProgress {
 public:
  explicit SearchProgress(int64_t total_blocks) : total_(total_blocks), t0_(now_seconds()) {}
  // `done_in_part` blocks of the part being searched are done (called from the search's threads, one at a time).
  void report(int64_t done_in_part) { print(base_ + done_in_part, false); }
  // The part being searched is complete: its blocks count as done.
  void part_done(int64_t blocks) {
    base_ += blocks;
    print(base_, base_ == total_);
    if (base_ == total_) std::fputc('\n', stderr);
  }

 private:
  // At most four lines a second, and the last one.
  void print(int64_t done, bool last) {
    const double now = now_seconds();
    if (!last && now - last_print_ < 0.25) return;
    last_print_ = now;
    const double t = now - t0_, rate = t > 0 ? double(done) / t : 0.0;
    const double eta = rate > 0 ? double(total_ - done) / rate : 0.0;
    std::fprintf(stderr, "\rpack: seed search %lld/%lld blocks (%5.1f%%) %9.0f blocks/s ETA %6.0f s", (long long)done,
                 (long long)total_, 100.0 * double(done) / double(std::max<int64_t>(total_, 1)), rate, eta);
    std::fflush(stderr);
  }

  int64_t total_, base_ = 0;
  double t0_, last_print_ = -1.0;
};

// "stored" -> nullopt (keep the source dtype); a codec name -> that codec; anything else fails naming the flag.
std::optional<Codec> codec_flag(const std::string& value, const char* flag) {
  if (value == "stored") return std::nullopt;
  const std::optional<Codec> c = parse_codec(value);
  if (!c) fail("{} '{}' is unknown (known: stored, {})", flag, value, encoder_codec_names());
  if (!codec_has_encoder(*c)) {
    fail("{} '{}': a ggml type, read as a GGUF file stores it; pack cannot encode it (known: stored, {})", flag, value,
         encoder_codec_names());
  }
  return c;
}

// A checkpoint tensor as a (rows, cols) matrix in its stored codec (a float one), for encoding.
ops::Matrix matrix_of(const TensorInfo& t, int64_t rows, int64_t cols) {
  return {stored_float_codec(t), t.data, rows, cols};
}

// Encodes a stored matrix into codec `c` at `out`, rows in parallel (each row is independent): the bytes as they are
// when the codec is the same, else from its float values (a float source directly, another codec decoded first).
void encode_parallel(Codec c, const ops::Matrix& src, uint8_t* out) {
  if (src.codec == c) {
    std::memcpy(out, src.data, src.nbytes());
    return;
  }
  const size_t dst_row = codec_row_bytes(c, src.cols);
  ThreadPool::global().parallel_for(size_t(src.rows), 16, [&](size_t b, size_t e) {
    std::vector<float> row(static_cast<size_t>(src.cols));
    for (size_t r = b; r < e; ++r) {
      if (codec_is_seed(src.codec)) {
        for (int64_t k = 0; k < src.cols; ++k) row[size_t(k)] = src.at(int64_t(r), k);
      } else {
        const uint8_t* in = static_cast<const uint8_t*>(src.data) + r * src.row_bytes();
        for (int64_t k = 0; k < src.cols; ++k) row[size_t(k)] = codec_value(src.codec, in, k);
      }
      encode_row(c, row.data(), src.cols, out + r * dst_row);
    }
  });
}

// Searches one expert part into a seed slice blob of codec_matrix_bytes(c, rows, cols) bytes at `out`.
// On the GPU (cuda) or on every thread: the same blocks bit for bit (tests/unit/cuda/seed_search_test.cpp).
void encode_seed_part(Codec c, const ops::Matrix& t, const float* h, uint32_t n_seeds, bool on_cuda,
                      SearchProgress& progress, uint8_t* out) {
  const int64_t rows = t.rows, cols = t.cols;
  std::vector<float> w(size_t(rows * cols));
  encode_parallel(Codec::F32, t, reinterpret_cast<uint8_t*>(w.data()));
  seed::SeedSearchOptions opt;
  opt.n_seeds = n_seeds;
  opt.progress = [&](const seed::SeedSearchProgress& p) { progress.report(p.blocks_done); };
  const seed::SeedTier tier = codec_seed_tier(c);
  seed::SeedSearchResult r;
  if (on_cuda) {
#ifdef SEEDLING_HAVE_CUDA
    r = cuda::seed_search_slice_cuda(tier, w.data(), rows, cols, h, n_seeds);
#else
    fail("--search-device cuda: this seedling was built without the CUDA backend");
#endif
  } else {
    r = seed::seed_search_slice(tier, w.data(), rows, cols, h, opt);
  }
  const std::vector<uint8_t> blob = seed::write_seed_blob(tier, rows, cols, r.exp_bias, r.blocks);
  progress.part_done(seed::seed_slice_layout(tier, rows, cols).n_blocks);
  SEEDLING_CHECK(blob.size() == codec_matrix_bytes(c, rows, cols), "seed blob of {} bytes", blob.size());
  std::memcpy(out, blob.data(), blob.size());
}

// A GGUF file (docs/formats/gguf.md): every tensor as model/gguf_source.h hands it out (bytes as stored, llama's q/k
// rows in the Hugging Face order), routed experts one blob each, each part in its stored codec unless --experts
// names one; the config.json the metadata stands for; tokenizer.json and tokenizer_config.json (chat template,
// BOS/EOS) from its tokenizer.* keys when it has a tokenizer Seedling reads.
int pack_gguf(const PackFlags& f, const std::optional<Codec>& expert_codec, const std::optional<Codec>& dense_codec) {
  if (expert_codec && codec_is_seed(*expert_codec)) {
    fail(
        "pack: --experts {} from a GGUF file is not supported yet (seed tiers are searched from a Hugging Face "
        "folder)",
        f.experts);
  }
  if (fs::exists(f.out) && !f.force) fail("pack: {} exists (pass --force to replace it)", f.out);
  const GgufFile g(f.model);
  const GgufModel gm = map_gguf_model(g);
  const ModelConfig& c = gm.c;
  const Family& fam = *gm.family;
  std::vector<std::vector<uint8_t>> owned;
  const std::unique_ptr<WeightSource> src = make_gguf_source(g, gm, &owned);
  const int64_t H = c.hidden_size;
  struct Item {
    TensorSpec spec;
    WeightView view;
    Codec codec;
  };
  std::vector<Item> resident;
  std::vector<std::array<PackedWriter::Part, 3>> expert_parts(size_t(c.num_layers));
  uint64_t total = 0;
  for_each_tensor(
      c, fam, !c.tie_word_embeddings || src->has(fam.lm_head),
      [&](const TensorSpec& spec) {
        const WeightView v = src->get(spec.name);
        const Codec codec = spec.dense && dense_codec ? *dense_codec : v.codec;
        total += codec_tensor_bytes(codec, spec.shape);
        resident.push_back({spec, v, codec});
      },
      [&](int l) {
        const int64_t I = c.plan(l).ffn.width;
        const ExpertWeights e0 = src->expert(l, 0, {}, I, H);
        const ops::Matrix* m[3] = {&e0.gate, &e0.up, &e0.down};
        uint64_t blob = 0;
        for (int p = 0; p < 3; ++p) {
          const Codec codec = expert_codec ? *expert_codec : m[p]->codec;
          expert_parts[size_t(l)][size_t(p)] = {codec, m[p]->rows, m[p]->cols};
          blob += (codec_matrix_bytes(codec, m[p]->rows, m[p]->cols) + 63) / 64 * 64;
        }
        total += (blob + 4095) / 4096 * 4096 * uint64_t(c.num_experts);
      });
  src->finish();  // nothing of the file left behind
  const ordered_json config = ordered_json::parse(gm.config.dump());
  const ordered_json source = {{"created_by", "seedling pack"},
                               {"from", fs::absolute(f.model).string()},
                               {"gguf_architecture", gm.arch->arch},
                               {"experts", f.experts},
                               {"dense", f.dense}};
  PackedWriter w(f.out, config, source);
  w.set_total_bytes(total);
  for (const Item& it : resident) {
    const std::vector<int64_t>& s = it.spec.shape;
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    const int64_t rows = s.size() == 1 ? 1 : s[0], cols = n / rows;
    w.add_resident(it.spec.name, it.codec, s, [&](uint8_t* out) {
      encode_parallel(it.codec, ops::Matrix{it.view.codec, it.view.data, rows, cols}, out);
    });
  }
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.has_experts(l)) continue;
    const int64_t I = c.plan(l).ffn.width;
    const PackedWriter::Part parts[3] = {expert_parts[size_t(l)][0], expert_parts[size_t(l)][1],
                                         expert_parts[size_t(l)][2]};
    w.add_expert_layer(l, c.num_experts, parts, [&](int e, int p, uint8_t* out) {
      const ExpertWeights x = src->expert(l, e, {}, I, H);
      encode_parallel(parts[p].codec, p == 0 ? x.gate : p == 1 ? x.up : x.down, out);
    });
  }
  std::string text = "no tokenizer";
  try {
    const std::string tokenizer = gguf_tokenizer_json(g);
    std::ofstream(fs::path(w.partial_dir()) / "tokenizer.json", std::ios::binary) << tokenizer;
    text = "tokenizer.json";
  } catch (const Error& e) {
    std::fprintf(stderr, "pack: no tokenizer.json: %s\n", e.what());
  }
  if (g.has("tokenizer.chat_template")) {
    const ModelChatTemplate t = gguf_chat_template(g);
    nlohmann::json tc = {{"chat_template", t.source}};
    if (t.has_bos_token) tc["bos_token"] = t.bos_token;
    if (t.has_eos_token) tc["eos_token"] = t.eos_token;
    std::ofstream(fs::path(w.partial_dir()) / "tokenizer_config.json", std::ios::binary) << tc.dump(2) << "\n";
    text += ", the chat template";
  }
  const uint64_t bytes = w.finish();
  std::printf("wrote %s: %.3f GB from %s (%s as %s; experts %s, dense %s; %s)\n", f.out.c_str(), double(bytes) / 1e9,
              f.model.c_str(), gm.arch->arch, fam.model_type, f.experts.c_str(), f.dense.c_str(), text.c_str());
  return 0;
}

int run(const PackFlags& f) {
  const std::optional<Codec> expert_codec = codec_flag(f.experts, "--experts");
  const std::optional<Codec> dense_codec = codec_flag(f.dense, "--dense");
  if (dense_codec && codec_is_seed(*dense_codec)) {
    fail("--dense '{}' is a seed codec, which only routed experts may use (--experts {})", f.dense, f.dense);
  }
  const bool seeds = expert_codec && codec_is_seed(*expert_codec);
  if (f.seed_search_seeds < 1 || f.seed_search_seeds > seed::SeedSearchOptions::kLfsrSeeds) {
    fail("--seed-search-seeds {} is out of range (expected 1..{})", f.seed_search_seeds,
         seed::SeedSearchOptions::kLfsrSeeds);
  }
  if (!f.imatrix.empty() && !seeds) {
    fail("--imatrix weights the seed search; --experts '{}' is not a seed tier (p3, p4, s3)", f.experts);
  }
  if (f.search_device != "cpu" && f.search_device != "cuda") {
    fail("--search-device '{}' is unknown (known: cpu, cuda)", f.search_device);
  }
  const bool search_on_cuda = f.search_device == "cuda";
  if (search_on_cuda && !seeds) {
    fail("--search-device places the seed search; --experts '{}' is not a seed tier (p3, p4, s3)", f.experts);
  }
  if (search_on_cuda) {
    const CudaDevices d = cuda_devices();
    if (d.devices.empty()) fail("--search-device cuda: no CUDA device: {}", d.why_none);
  }
  if (is_packed_model_dir(f.model)) fail("pack: {} is already a packed folder", f.model);
  if (is_gguf_file(f.model)) return pack_gguf(f, expert_codec, dense_codec);
  if (fs::exists(f.out) && !f.force) fail("pack: {} exists (pass --force to replace it)", f.out);
  const Family* fam_ptr = nullptr;
  const ModelConfig c = read_model_config(f.model, &fam_ptr);
  const Family& fam = *fam_ptr;
  const Checkpoint ck(f.model);
  // Read and checked against the model before anything is written.
  ChannelEnergies energies = f.imatrix.empty() ? ChannelEnergies() : ChannelEnergies(f.imatrix, c);
  ordered_json config;
  {
    std::ifstream in(fs::path(f.model) / "config.json");
    config = ordered_json::parse(in);
  }
  const int64_t H = c.hidden_size;

  auto get = [&](const std::string& name, std::vector<int64_t> shape) -> const TensorInfo& {
    const TensorInfo& t = ck.get(name);
    if (t.shape != shape) {
      TensorInfo want;
      want.shape = shape;
      fail("{}: tensor '{}' has shape {}, expected {} from config.json", t.file, name, t.shape_string(),
           want.shape_string());
    }
    if (!codec_of_dtype(t.dtype) && t.dtype != DType::F8_E4M3)
      fail("{}: tensor '{}' has dtype {}, expected BF16, F16, F32 or F8_E4M3", t.file, name, dtype_name(t.dtype));
    return t;
  };
  // FP8 releases: an F8_E4M3 weight and its block scales are read as fp8_g32 (model/fp8_weights.h), kept as stored.
  const Fp8Blocks fp8{c.fp8_block_rows, c.fp8_block_cols};
  std::vector<std::vector<uint8_t>> fp8_owned;
  auto stored_codec = [&](const TensorInfo& t) {
    return t.dtype == DType::F8_E4M3 ? Codec::FP8_G32 : *codec_of_dtype(t.dtype);
  };
  auto codec_for = [&](const TensorInfo& t, const std::optional<Codec>& want) {
    return want ? *want : stored_codec(t);
  };
  auto source_matrix = [&](const TensorInfo& t, int64_t rows, int64_t cols) {
    if (t.dtype != DType::F8_E4M3) return matrix_of(t, rows, cols);
    fp8_owned.clear();
    return read_fp8_matrix(ck, t, fp8, &fp8_owned);
  };

  // Plan: every tensor the model loads, with its codec, so the progress bar knows the total.
  struct Item {
    std::string name;
    const TensorInfo* t;
    Codec codec;
  };
  std::vector<Item> resident;
  uint64_t total = 0;
  // Every routed expert of a layer has the same parts and codecs: expert 0's tell the blob size.
  std::vector<std::vector<uint8_t>> scratch;
  auto expert_part = [&](int l, int e, int p) {
    const int64_t I = c.plan(l).ffn.width;
    const ExpertPart part = fam.expert_parts(c, l, e)[size_t(p)];
    return read_expert_part(ck, part, c.num_experts, p == 2 ? H : I, p == 2 ? I : H, &scratch, fp8);
  };
  auto expert_codec_of = [&](int l) {
    scratch.clear();
    const ops::Matrix m = expert_part(l, 0, 0);
    return expert_codec ? *expert_codec : m.codec;
  };
  for_each_tensor(
      c, fam, !c.tie_word_embeddings || ck.has(fam.lm_head),
      [&](const TensorSpec& spec) {
        const TensorInfo& t = get(spec.name, spec.shape);
        const Codec codec = spec.dense ? codec_for(t, dense_codec) : stored_codec(t);
        resident.push_back({spec.name, &t, codec});
        total += codec_tensor_bytes(codec, spec.shape);
      },
      [&](int l) {
        const int64_t I = c.plan(l).ffn.width;
        const Codec ec = expert_codec_of(l);
        const uint64_t blob = 2 * ((codec_matrix_bytes(ec, I, H) + 63) / 64 * 64) + codec_matrix_bytes(ec, H, I);
        total += (blob + 4095) / 4096 * 4096 * uint64_t(c.num_experts);
      });

  ordered_json source = {{"created_by", "seedling pack"},
                         {"from", fs::absolute(f.model).string()},
                         {"experts", f.experts},
                         {"dense", f.dense}};
  int64_t seed_blocks = 0;  // every block the seed search will do, for its progress line
  if (seeds) {
    source["seed_search_seeds"] = f.seed_search_seeds;
    if (!f.imatrix.empty()) source["imatrix"] = fs::absolute(f.imatrix).string();
    const seed::SeedTier t = codec_seed_tier(*expert_codec);
    for (int l = 0; l < c.num_layers; ++l) {
      if (!c.layer_has_experts[size_t(l)]) continue;
      const int64_t I = c.plan(l).ffn.width;
      seed_blocks += int64_t(c.num_experts) *
                     (2 * seed::seed_slice_layout(t, I, H).n_blocks + seed::seed_slice_layout(t, H, I).n_blocks);
    }
  }
  PackedWriter w(f.out, config, source);
  w.set_total_bytes(seeds ? 0 : total);  // with seeds, the search's line is the progress (writing is the quick part)
  SearchProgress search_progress(seed_blocks);
  for (const Item& it : resident) {
    const std::vector<int64_t>& s = it.t->shape;
    const int64_t rows = s.size() == 1 ? 1 : s[0], cols = it.t->numel() / rows;
    w.add_resident(it.name, it.codec, s,
                   [&](uint8_t* out) { encode_parallel(it.codec, source_matrix(*it.t, rows, cols), out); });
  }
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.layer_has_experts[size_t(l)]) continue;
    const int64_t I = c.plan(l).ffn.width;
    const Codec ec = expert_codec_of(l);
    const PackedWriter::Part parts[3] = {{ec, I, H}, {ec, I, H}, {ec, H, I}};
    w.add_expert_layer(l, c.num_experts, parts, [&](int e, int p, uint8_t* out) {
      scratch.clear();
      const ops::Matrix t = expert_part(l, e, p);
      if (codec_is_seed(ec)) {
        encode_seed_part(ec, t, energies.get(l, e, p, parts[p].cols), f.seed_search_seeds, search_on_cuda,
                         search_progress, out);
      } else {
        encode_parallel(ec, t, out);
      }
    });
  }
  for (const char* extra : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                            "special_tokens_map.json", "tiktoken.model", "tokenization_kimi.py"}) {
    w.copy_if_present((fs::path(f.model) / extra).string());
  }
  const uint64_t bytes = w.finish();
  if (!f.imatrix.empty()) {
    std::printf("imatrix %s: %lld of %lld expert parts weighted; %lld searched unweighted (no row reached them)\n",
                f.imatrix.c_str(), (long long)(energies.parts() - energies.unweighted()), (long long)energies.parts(),
                (long long)energies.unweighted());
  }
  std::printf("wrote %s: %.3f GB (experts %s, dense %s)\n", f.out.c_str(), double(bytes) / 1e9, f.experts.c_str(),
              f.dense.c_str());
  return 0;
}

}  // namespace

void add_pack(CLI::App& app, int* status) {
  auto f = std::make_shared<PackFlags>();
  CLI::App* cmd = app.add_subcommand("pack", "Pack a Hugging Face folder for streaming (docs/formats/packed.md)");
  cmd->add_option("-m,--model", f->model, "Hugging Face model folder, or a GGUF file (its bytes kept as stored)")
      ->required();
  cmd->add_option("-o,--output", f->out, "output folder")->required();
  cmd->add_option("--experts", f->experts,
                  "codec of routed experts: stored, bf16, q8_g32, q8_g64, q4_g32, q4_g64, mxfp4, fp8_g32, or a seed "
                  "tier p3, p4, s3 "
                  "(searched: ~100 core-days for a 30B-A3B model; docs/formats/seed.md)");
  cmd->add_option("--dense", f->dense, "codec of dense matrices (attention, dense MLP, embeddings, head)");
  cmd->add_option("--seed-search-seeds", f->seed_search_seeds,
                  "preview/test knob: search seeds 1..K only (default all 65535), for fast tests and previews; "
                  "recorded in the manifest");
  cmd->add_option("--imatrix", f->imatrix,
                  "seed tiers: weight each expert's search by its input energies (seedling imatrix, or llama.cpp's "
                  "imatrix GGUF; docs/formats/imatrix.md)");
  cmd->add_option(
      "--search-device", f->search_device,
      "seed tiers: where the search runs, cpu (every thread) or cuda (the GPU; the same blobs bit for bit)");
  cmd->add_flag("--force", f->force, "replace an existing output folder");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
