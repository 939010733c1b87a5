// cli/cmd_synth.cpp - `seedling synth`: a checkpoint of random weights at the shapes of a real model.
//
// For speed and memory measurements only (random weights say nothing about quality). Writes a Hugging Face folder
// (config.json, one safetensors shard per layer plus one for embeddings and head, the index) into OUT.partial and
// renames it to OUT when complete, so an interrupted run never leaves a folder that looks valid. With --packed it
// writes a packed folder instead; seed tiers (p3, p4, s3) get RANDOM seed blobs (random seeds, coefficients and
// exponent codes at the scale of the other weights), not searched ones: fit for speed, never for quality. Which
// tensors are dense (--dense CODEC) and which stay bf16 is pack's rule (for_each_resident), not a copy of it.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "codec/quantize.h"
#include "codec/seed_codec.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/packed_writer.h"
#include "io/safetensors_writer.h"
#include "model/model.h"

namespace seedling::cli {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

struct SynthFlags {
  std::string out;
  std::string preset = "qwen3-30b-a3b";
  int layers = 0;   // 0: the preset's
  int experts = 0;  // 0: the preset's
  int vocab = 0;    // 0: the preset's
  uint64_t seed = 1;
  bool force = false;
  std::string packed;          // non-empty: write a packed folder with experts in this codec
  std::string dense = "bf16";  // with --packed: the codec of dense matrices (attention, dense MLPs, embedding, head)
};

ordered_json preset_config(const std::string& name) {
  if (name == "qwen3-30b-a3b") {  // Qwen/Qwen3-30B-A3B config.json
    return {{"architectures", {"Qwen3MoeForCausalLM"}},
            {"model_type", "qwen3_moe"},
            {"vocab_size", 151936},
            {"hidden_size", 2048},
            {"intermediate_size", 6144},
            {"num_hidden_layers", 48},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 4},
            {"head_dim", 128},
            {"moe_intermediate_size", 768},
            {"num_experts", 128},
            {"num_experts_per_tok", 8},
            {"norm_topk_prob", true},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", ordered_json::array()},
            {"max_position_embeddings", 40960},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 1000000.0},
            {"rope_scaling", nullptr},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", false},
            {"attention_bias", false},
            {"torch_dtype", "bfloat16"},
            {"bos_token_id", 151643},
            {"eos_token_id", 151645}};
  }
  if (name == "mixtral-8x7b") {  // mistralai/Mixtral-8x7B-v0.1 config.json
    return {{"architectures", {"MixtralForCausalLM"}},
            {"model_type", "mixtral"},
            {"vocab_size", 32000},
            {"hidden_size", 4096},
            {"intermediate_size", 14336},
            {"num_hidden_layers", 32},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 8},
            {"num_local_experts", 8},
            {"num_experts_per_tok", 2},
            {"max_position_embeddings", 32768},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 1000000.0},
            {"sliding_window", nullptr},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", false},
            {"torch_dtype", "bfloat16"},
            {"bos_token_id", 1},
            {"eos_token_id", 2}};
  }
  fail("synth: --preset '{}' is unknown (known: qwen3-30b-a3b, mixtral-8x7b)", name);
}

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// bf16 values, uniform with standard deviation `stddev` (or all equal to `constant` when stddev is 0).
SafetensorsWriter::Fill random_bf16(uint64_t seed, float stddev, float constant) {
  return [=](uint8_t* out, size_t offset, size_t bytes) {
    auto* dst = reinterpret_cast<uint16_t*>(out);
    const size_t first = offset / 2, n = bytes / 2;
    const float half_width = stddev * std::sqrt(3.0f);
    ThreadPool::global().parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        float v = constant;
        if (stddev > 0) v = (float(mix(seed ^ (first + i)) >> 40) * 0x1.0p-24f * 2.0f - 1.0f) * half_width;
        dst[i] = f32_to_bf16(v);
      }
    });
  };
}

// A valid seed slice blob of random blocks (codec_matrix_bytes(c, rows, cols) bytes at `out`): seeds uniform in
// 1..65535, coefficients uniform in -8..7, exponent codes in 1..3 around the exponent that gives weights of standard
// deviation `stddev`. What a search would write for weights of that scale, in size and cost, not in values.
void random_seed_blob(Codec c, uint64_t seed, int64_t rows, int64_t cols, float stddev, uint8_t* out) {
  const seed::SeedTier t = codec_seed_tier(c);
  const seed::SeedTierSpec sp = seed::seed_tier_spec(t);
  const seed::SeedSliceLayout L = seed::seed_slice_layout(t, rows, cols);
  // A weight is sum_p (S_p / 32767) q_p 2^e: S_p / 32767 has variance 1/3 and q_p (uniform -8..7) mean square 21.5.
  const int e_mid = int(std::lround(std::log2(double(stddev) / std::sqrt(double(sp.coefs) * 21.5 / 3.0))));
  const int32_t bias = e_mid - 2;
  std::vector<seed::SeedBlock> blocks(size_t(L.n_blocks));
  ThreadPool::global().parallel_for(blocks.size(), 1 << 14, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint64_t r = mix(seed ^ i);
      seed::SeedBlock& k = blocks[i];
      k.seed = uint16_t(1 + r % 65535);
      for (int p = 0; p < sp.coefs; ++p) k.q[p] = int8_t(int((r >> (20 + 4 * p)) & 0xF) - 8);
      k.code = uint8_t(1 + (r >> 40) % 3);
    }
  });
  const std::vector<uint8_t> blob = seed::write_seed_blob(t, rows, cols, bias, blocks);  // validates
  std::memcpy(out, blob.data(), blob.size());
}

// The same random weights written straight into the packed format: resident tensors in bf16, experts encoded
// to `codec` row by row (or random seed blobs), so a model larger than memory is made without an HF copy first.
int run_packed(const SynthFlags& f, const ordered_json& cfg) {
  const std::optional<Codec> codec = parse_codec(f.packed);
  if (!codec) fail("synth: --packed '{}' is unknown (known: {})", f.packed, codec_names());
  const std::optional<Codec> dense = parse_codec(f.dense);
  if (!dense) fail("synth: --dense '{}' is unknown (known: {})", f.dense, codec_names());
  if (codec_is_seed(*dense)) fail("synth: --dense '{}' is a seed codec, which only routed experts may use", f.dense);
  const fs::path cfg_dir = f.out + ".config";
  fs::remove_all(cfg_dir);
  fs::create_directories(cfg_dir);
  std::ofstream(cfg_dir / "config.json") << cfg.dump(2) << "\n";
  const ModelConfig c = read_model_config(cfg_dir.string());
  fs::remove_all(cfg_dir);
  const Family& fam = family_for(c.model_type, "synth");
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  uint64_t tensor_seed = f.seed * 0x100000001b3ull;
  PackedWriter w(f.out, cfg,
                 {{"created_by", "seedling synth"}, {"preset", f.preset}, {"experts", f.packed}, {"dense", f.dense}});
  auto codec_of = [&](bool is_dense) { return is_dense ? *dense : Codec::BF16; };
  auto shape_bytes = [](Codec k, const std::vector<int64_t>& shape) {
    return shape.size() == 1 ? codec_matrix_bytes(k, 1, shape[0]) : codec_matrix_bytes(k, shape[0], shape[1]);
  };
  uint64_t total = 0;
  const bool head = !c.tie_word_embeddings;
  for_each_resident(
      c, fam, head,
      [&](const std::string&, std::vector<int64_t> shape, bool d) { total += shape_bytes(codec_of(d), shape); },
      [&](int) {
        const uint64_t blob =
            2 * ((codec_matrix_bytes(*codec, I, H) + 63) / 64 * 64) + codec_matrix_bytes(*codec, H, I);
        total += (blob + 4095) / 4096 * 4096 * uint64_t(c.num_experts);
      });
  w.set_total_bytes(total);
  // Matrices: random bf16 of standard deviation 1/sqrt(cols), encoded row by row to the dense codec when dense;
  // vectors (norms, biases): ones.
  auto resident = [&](const std::string& name, std::vector<int64_t> shape, bool d) {
    const Codec k = codec_of(d);
    if (shape.size() == 1) {
      const auto fill = random_bf16(0, 0.0f, 1.0f);
      w.add_resident(name, Codec::BF16, shape, [&](uint8_t* out) { fill(out, 0, size_t(shape[0]) * 2); });
      return;
    }
    const int64_t rows = shape[0], cols = shape[1];
    const auto fill = random_bf16(mix(++tensor_seed), 1.0f / std::sqrt(float(cols)), 0);
    w.add_resident(name, k, shape, [&](uint8_t* out) {
      if (k == Codec::BF16) return fill(out, 0, size_t(rows * cols) * 2);
      std::vector<uint16_t> bf16(size_t(rows * cols));
      fill(reinterpret_cast<uint8_t*>(bf16.data()), 0, bf16.size() * 2);
      const size_t row_bytes = codec_row_bytes(k, cols);
      ThreadPool::global().parallel_for(size_t(rows), 16, [&](size_t b, size_t end) {
        encode_matrix(k, DType::BF16, bf16.data() + b * size_t(cols), int64_t(end - b), cols, out + b * row_bytes);
      });
    });
  };
  auto experts = [&](int l) {
    const PackedWriter::Part parts[3] = {{*codec, I, H}, {*codec, I, H}, {*codec, H, I}};
    const uint64_t layer_seed = mix(++tensor_seed);
    std::vector<uint16_t> bf16;
    w.add_expert_layer(l, c.num_experts, parts, [&](int e, int p, uint8_t* out) {
      const int64_t rows = parts[p].rows, cols = parts[p].cols;
      if (codec_is_seed(*codec)) {
        return random_seed_blob(*codec, mix(layer_seed ^ uint64_t(e * 3 + p)), rows, cols,
                                1.0f / std::sqrt(float(cols)), out);
      }
      bf16.resize(size_t(rows * cols));
      random_bf16(mix(layer_seed ^ uint64_t(e * 3 + p)), 1.0f / std::sqrt(float(cols)), 0)(
          reinterpret_cast<uint8_t*>(bf16.data()), 0, bf16.size() * 2);
      const size_t row_bytes = codec_row_bytes(*codec, cols);
      ThreadPool::global().parallel_for(size_t(rows), 16, [&](size_t b, size_t end) {
        encode_matrix(*codec, DType::BF16, bf16.data() + b * size_t(cols), int64_t(end - b), cols, out + b * row_bytes);
      });
    });
  };
  for_each_resident(c, fam, head, resident, experts);
  const uint64_t bytes = w.finish();
  std::printf("wrote %s: %.2f GB packed, %s with %d layers, experts %s, dense %s\n", f.out.c_str(), double(bytes) / 1e9,
              f.preset.c_str(), c.num_layers, f.packed.c_str(), f.dense.c_str());
  return 0;
}

int run(const SynthFlags& f) {
  ordered_json cfg = preset_config(f.preset);
  if (f.layers > 0) cfg["num_hidden_layers"] = f.layers;
  if (f.vocab > 0) cfg["vocab_size"] = f.vocab;
  if (f.experts > 0) {
    cfg[cfg.contains("num_experts") ? "num_experts" : "num_local_experts"] = f.experts;
    cfg["num_experts_per_tok"] = std::min(f.experts, cfg["num_experts_per_tok"].get<int>());
  }
  if (fs::exists(f.out) && !f.force) fail("synth: {} exists (pass --force to replace it)", f.out);
  if (!f.packed.empty()) return run_packed(f, cfg);
  const fs::path tmp = f.out + ".partial";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  { std::ofstream(tmp / "config.json") << cfg.dump(2) << "\n"; }
  const ModelConfig c = read_model_config(tmp.string());
  const Family& fam = family_for(c.model_type, "synth");
  const int64_t H = c.hidden_size, V = c.vocab_size;
  uint64_t tensor_seed = f.seed * 0x100000001b3ull;
  auto mat = [&](SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols) {
    w.add(name, DType::BF16, {rows, cols}, random_bf16(mix(++tensor_seed), 1.0f / std::sqrt(float(cols)), 0));
  };
  auto ones = [&](SafetensorsWriter& w, const std::string& name, int64_t n) {
    w.add(name, DType::BF16, {n}, random_bf16(0, 0.0f, 1.0f));
  };
  nlohmann::ordered_json weight_map;
  size_t total = 0;
  auto write_shard = [&](SafetensorsWriter& w, const std::string& file) {
    const double t0 = now_seconds();
    w.write((tmp / file).string());
    total += w.data_bytes();
    std::fprintf(stderr, "synth: %s %.2f GB in %.1f s\n", file.c_str(), double(w.data_bytes()) / 1e9,
                 now_seconds() - t0);
  };
  const int n_files = c.num_layers + 1;
  auto file_name = [&](int i) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n_files); };
  {
    SafetensorsWriter w;
    mat(w, fam.embed, V, H);
    ones(w, fam.final_norm, H);
    if (!c.tie_word_embeddings) mat(w, fam.lm_head, V, H);
    for (const char* n : {fam.embed, fam.final_norm}) weight_map[n] = file_name(0);
    if (!c.tie_word_embeddings) weight_map[fam.lm_head] = file_name(0);
    write_shard(w, file_name(0));
  }
  for (int l = 0; l < c.num_layers; ++l) {
    SafetensorsWriter w;
    const LayerTensorNames n = fam.layer_names(c, l);
    std::vector<std::string> names;
    ones(w, n.attn_norm, H);
    ones(w, n.ffn_norm, H);
    mat(w, n.q, c.q_dim(), H);
    mat(w, n.k, c.kv_dim(), H);
    mat(w, n.v, c.kv_dim(), H);
    mat(w, n.o, H, c.q_dim());
    names = {n.attn_norm, n.ffn_norm, n.q, n.k, n.v, n.o};
    if (c.qk_norm) {
      ones(w, n.q_norm, c.head_dim);
      ones(w, n.k_norm, c.head_dim);
      names.insert(names.end(), {n.q_norm, n.k_norm});
    }
    if (c.layer_has_experts[size_t(l)]) {
      mat(w, n.router, c.num_experts, H);
      names.push_back(n.router);
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertTensorNames en = fam.expert_names(l, e);
        mat(w, en.gate, c.moe_intermediate_size, H);
        mat(w, en.up, c.moe_intermediate_size, H);
        mat(w, en.down, H, c.moe_intermediate_size);
        names.insert(names.end(), {en.gate, en.up, en.down});
      }
    } else {
      mat(w, n.mlp_gate, c.intermediate_size, H);
      mat(w, n.mlp_up, c.intermediate_size, H);
      mat(w, n.mlp_down, H, c.intermediate_size);
      names.insert(names.end(), {n.mlp_gate, n.mlp_up, n.mlp_down});
    }
    for (const auto& name : names) weight_map[name] = file_name(l + 1);
    write_shard(w, file_name(l + 1));
  }
  std::ofstream(tmp / "model.safetensors.index.json")
      << ordered_json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  fs::remove_all(f.out);
  fs::rename(tmp, f.out);
  std::printf("wrote %s: %.2f GB, %s with %d layers\n", f.out.c_str(), double(total) / 1e9, f.preset.c_str(),
              c.num_layers);
  return 0;
}
}  // namespace

void add_synth(CLI::App& app, int* status) {
  auto f = std::make_shared<SynthFlags>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight checkpoint at the shapes of a real model");
  cmd->add_option("-o,--output", f->out, "output folder")->required();
  cmd->add_option("--preset", f->preset, "shape: qwen3-30b-a3b or mixtral-8x7b");
  cmd->add_option("--layers", f->layers, "number of layers (default: the preset's)")->check(CLI::PositiveNumber);
  cmd->add_option("--experts", f->experts, "routed experts per layer (default: the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--vocab", f->vocab, "vocabulary size (default: the preset's; small for tests)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->seed, "random seed");
  cmd->add_flag("--force", f->force, "replace an existing output folder");
  cmd->add_option("--packed", f->packed,
                  "write a packed folder (docs/formats/packed.md) with experts in this codec: bf16, q8_g32, q8_g64, "
                  "q4_g32, q4_g64, or p3, p4, s3: RANDOM seed blobs (random seeds, coefficients and exponent codes at "
                  "the weights' scale), fit for speed measurements only");
  cmd->add_option("--dense", f->dense,
                  "with --packed: codec of dense matrices (attention, dense MLPs, embedding, head) as `pack --dense`; "
                  "norms and routers stay bf16 (default: bf16)");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
