// cli/cmd_synth.cpp - `seedling synth`: a checkpoint of random weights at the shapes of a real model.
//
// For speed and memory measurements only (random weights say nothing about quality). Writes a Hugging Face folder
// (config.json, one safetensors shard per layer plus one for embeddings and head, the index) into OUT.partial and
// renames it to OUT when complete, so an interrupted run never leaves a folder that looks valid. With --packed it
// writes a packed folder instead; seed tiers (p3, p4, s3) get RANDOM seed blobs (random seeds, coefficients and
// exponent codes at the scale of the other weights), not searched ones: fit for speed, never for quality. Which
// tensors are dense (--dense CODEC) and which stay bf16 is the family schema's (TensorSpec::dense), as for pack.
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
  if (name == "gpt-oss-20b") {  // openai/gpt-oss-20b config.json (without its quantization_config: --packed says)
    ordered_json layer_types = ordered_json::array();
    for (int l = 0; l < 24; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    return {{"architectures", {"GptOssForCausalLM"}},
            {"model_type", "gpt_oss"},
            {"vocab_size", 201088},
            {"hidden_size", 2880},
            {"intermediate_size", 2880},
            {"num_hidden_layers", 24},
            {"num_attention_heads", 64},
            {"num_key_value_heads", 8},
            {"head_dim", 64},
            {"num_local_experts", 32},
            {"num_experts_per_tok", 4},
            {"experts_per_token", 4},
            {"layer_types", layer_types},
            {"sliding_window", 128},
            {"attention_bias", true},
            {"swiglu_limit", 7.0},
            {"max_position_embeddings", 131072},
            {"initial_context_length", 4096},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 150000},
            {"rope_scaling",
             {{"beta_fast", 32.0},
              {"beta_slow", 1.0},
              {"factor", 32.0},
              {"original_max_position_embeddings", 4096},
              {"rope_type", "yarn"},
              {"truncate", false}}},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", false},
            {"torch_dtype", "bfloat16"},
            {"eos_token_id", 200002},
            {"pad_token_id", 199999}};
  }
  if (name == "deepseek-v3") {  // deepseek-ai/DeepSeek-V3 (transformers' DeepseekV3Config defaults are its values)
    return {{"architectures", {"DeepseekV3ForCausalLM"}},
            {"model_type", "deepseek_v3"},
            {"vocab_size", 129280},
            {"hidden_size", 7168},
            {"intermediate_size", 18432},
            {"moe_intermediate_size", 2048},
            {"num_hidden_layers", 61},
            {"num_nextn_predict_layers", 1},
            {"num_attention_heads", 128},
            {"num_key_value_heads", 128},
            {"n_shared_experts", 1},
            {"n_routed_experts", 256},
            {"num_experts_per_tok", 8},
            {"routed_scaling_factor", 2.5},
            {"n_group", 8},
            {"topk_group", 4},
            {"topk_method", "noaux_tc"},
            {"scoring_func", "sigmoid"},
            {"norm_topk_prob", true},
            {"first_k_dense_replace", 3},
            {"q_lora_rank", 1536},
            {"kv_lora_rank", 512},
            {"qk_nope_head_dim", 128},
            {"qk_rope_head_dim", 64},
            {"v_head_dim", 128},
            {"max_position_embeddings", 163840},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 10000},
            {"rope_scaling",
             {{"beta_fast", 32},
              {"beta_slow", 1},
              {"factor", 40},
              {"mscale", 1.0},
              {"mscale_all_dim", 1.0},
              {"original_max_position_embeddings", 4096},
              {"type", "yarn"}}},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", false},
            {"attention_bias", false},
            {"torch_dtype", "bfloat16"},
            {"bos_token_id", 0},
            {"eos_token_id", 1}};
  }
  if (name == "qwen3.5-35b-a3b") {
    // Qwen3.5-35B-A3B's text model as issue 23 and NVMAI's ArchConfig give it (docs in ../shared/research): 40 layers,
    // every 4th full attention (16 q / 2 kv heads of 256, a sigmoid output gate in q_proj, RoPE on 64 of the 256 dims,
    // theta 1e7), the others Gated DeltaNet (16 key / 32 value heads of 128, a 4-tap conv); 256 experts top-8 of width
    // 512 and a sigmoid-gated shared expert of 512; hidden 2048, vocabulary 248,320, untied head. Written as the flat
    // qwen3_5_moe_text config (no vision tower); the token ids are within the vocabulary, not the release's.
    ordered_json layer_types = ordered_json::array();
    for (int l = 0; l < 40; ++l) layer_types.push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
    return {
        {"architectures", {"Qwen3_5MoeForCausalLM"}},
        {"model_type", "qwen3_5_moe_text"},
        {"vocab_size", 248320},
        {"hidden_size", 2048},
        {"num_hidden_layers", 40},
        {"layer_types", layer_types},
        {"num_attention_heads", 16},
        {"num_key_value_heads", 2},
        {"head_dim", 256},
        {"linear_conv_kernel_dim", 4},
        {"linear_key_head_dim", 128},
        {"linear_num_key_heads", 16},
        {"linear_num_value_heads", 32},
        {"linear_value_head_dim", 128},
        {"moe_intermediate_size", 512},
        {"shared_expert_intermediate_size", 512},
        {"num_experts", 256},
        {"num_experts_per_tok", 8},
        {"partial_rotary_factor", 0.25},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000.0}, {"partial_rotary_factor", 0.25}}},
        {"max_position_embeddings", 262144},
        {"rms_norm_eps", 1e-6},
        {"hidden_act", "silu"},
        {"attention_bias", false},
        {"tie_word_embeddings", false},
        {"torch_dtype", "bfloat16"},
        {"bos_token_id", 1},
        {"eos_token_id", 2}};
  }
  fail(
      "synth: --preset '{}' is unknown (known: qwen3-30b-a3b, mixtral-8x7b, gpt-oss-20b, deepseek-v3, qwen3.5-35b-a3b)",
      name);
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
  if (!codec || !codec_has_encoder(*codec))
    fail("synth: --packed '{}' is unknown (known: {})", f.packed, encoder_codec_names());
  const std::optional<Codec> dense = parse_codec(f.dense);
  if (!dense || !codec_has_encoder(*dense))
    fail("synth: --dense '{}' is unknown (known: {})", f.dense, encoder_codec_names());
  if (codec_is_seed(*dense)) fail("synth: --dense '{}' is a seed codec, which only routed experts may use", f.dense);
  const fs::path cfg_dir = f.out + ".config";
  fs::remove_all(cfg_dir);
  fs::create_directories(cfg_dir);
  std::ofstream(cfg_dir / "config.json") << cfg.dump(2) << "\n";
  const ModelConfig c = read_model_config(cfg_dir.string());
  fs::remove_all(cfg_dir);
  const Family& fam = family_for(c.model_type, "synth");
  const int64_t H = c.hidden_size;
  uint64_t tensor_seed = f.seed * 0x100000001b3ull;
  PackedWriter w(f.out, cfg,
                 {{"created_by", "seedling synth"}, {"preset", f.preset}, {"experts", f.packed}, {"dense", f.dense}});
  auto codec_of = [&](bool is_dense) { return is_dense ? *dense : Codec::BF16; };
  auto shape_bytes = [](Codec k, const std::vector<int64_t>& shape) { return codec_tensor_bytes(k, shape); };
  uint64_t total = 0;
  const bool head = !c.tie_word_embeddings;
  for_each_tensor(
      c, fam, head, [&](const TensorSpec& t) { total += shape_bytes(codec_of(t.dense), t.shape); },
      [&](int l) {
        const int64_t I = c.plan(l).ffn.width;
        const uint64_t blob =
            2 * ((codec_matrix_bytes(*codec, I, H) + 63) / 64 * 64) + codec_matrix_bytes(*codec, H, I);
        total += (blob + 4095) / 4096 * 4096 * uint64_t(c.num_experts);
      });
  w.set_total_bytes(total);
  // Matrices: random bf16 of standard deviation 1/sqrt(cols), encoded row by row to the dense codec when dense;
  // vectors (norms, biases): ones.
  auto resident = [&](const TensorSpec& t) {
    const Codec k = codec_of(t.dense);
    const std::vector<int64_t>& shape = t.shape;
    if (shape.size() == 1 || !t.dense) {
      const size_t n = codec_tensor_bytes(Codec::BF16, shape) / 2;
      const auto fill = shape.size() == 1 ? random_bf16(0, 0.0f, 1.0f)
                                          : random_bf16(mix(++tensor_seed), 1.0f / std::sqrt(float(shape.back())), 0);
      w.add_resident(t.name, Codec::BF16, shape, [&](uint8_t* out) { fill(out, 0, n * 2); });
      return;
    }
    const int64_t rows = shape[0], cols = shape[1];
    const auto fill = random_bf16(mix(++tensor_seed), 1.0f / std::sqrt(float(cols)), 0);
    w.add_resident(t.name, k, shape, [&](uint8_t* out) {
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
    const int64_t I = c.plan(l).ffn.width;
    const PackedWriter::Part parts[3] = {{*codec, I, H}, {*codec, I, H}, {*codec, H, I}};
    const uint64_t layer_seed = mix(++tensor_seed);
    // Whole experts side by side, one a thread (each expert's bytes depend only on its seed): the rows of one expert
    // were too few a task to keep 16 threads busy. The inner parallel_for calls then run in place.
    const int threads = ThreadPool::global().size();
    w.add_expert_layer(
        l, c.num_experts, parts,
        [&](int e, int p, uint8_t* out) {
          const int64_t rows = parts[p].rows, cols = parts[p].cols;
          if (codec_is_seed(*codec)) {
            return random_seed_blob(*codec, mix(layer_seed ^ uint64_t(e * 3 + p)), rows, cols,
                                    1.0f / std::sqrt(float(cols)), out);
          }
          thread_local std::vector<uint16_t> bf16;  // each thread's, reused: no fresh pages for every matrix
          bf16.resize(size_t(rows * cols));
          random_bf16(mix(layer_seed ^ uint64_t(e * 3 + p)), 1.0f / std::sqrt(float(cols)), 0)(
              reinterpret_cast<uint8_t*>(bf16.data()), 0, bf16.size() * 2);
          const size_t row_bytes = codec_row_bytes(*codec, cols);
          ThreadPool::global().parallel_for(size_t(rows), 16, [&](size_t b, size_t end) {
            encode_matrix(*codec, DType::BF16, bf16.data() + b * size_t(cols), int64_t(end - b), cols,
                          out + b * row_bytes);
          });
        },
        c.num_experts >= threads ? threads : 1);
  };
  for_each_tensor(c, fam, head, resident, experts);
  const uint64_t bytes = w.finish();
  std::printf("wrote %s: %.2f GB packed, %s with %d layers, experts %s, dense %s\n", f.out.c_str(), double(bytes) / 1e9,
              f.preset.c_str(), c.num_layers, f.packed.c_str(), f.dense.c_str());
  return 0;
}

int run(const SynthFlags& f) {
  ordered_json cfg = preset_config(f.preset);
  if (f.layers > 0) {
    cfg["num_hidden_layers"] = f.layers;
    if (cfg.contains("layer_types")) {  // the preset's pattern, cut or repeated to the new depth
      ordered_json types = ordered_json::array();
      for (int l = 0; l < f.layers; ++l) types.push_back(cfg["layer_types"][size_t(l) % cfg["layer_types"].size()]);
      cfg["layer_types"] = types;
    }
    // Fewer layers keep the last one routed (deepseek-v3's three dense layers would otherwise fill a short model).
    if (cfg.contains("first_k_dense_replace")) {
      cfg["first_k_dense_replace"] = std::min(cfg["first_k_dense_replace"].get<int>(), f.layers - 1);
    }
  }
  if (f.vocab > 0) cfg["vocab_size"] = f.vocab;
  if (f.experts > 0) {
    cfg[cfg.contains("num_experts")        ? "num_experts"
        : cfg.contains("n_routed_experts") ? "n_routed_experts"
                                           : "num_local_experts"] = f.experts;
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
  const int64_t H = c.hidden_size;
  uint64_t tensor_seed = f.seed * 0x100000001b3ull;
  // One shard for the embedding, final norm and head, then one per layer with its routed experts.
  const int n_files = c.num_layers + 1;
  std::vector<SafetensorsWriter> shards(static_cast<size_t>(n_files));
  nlohmann::ordered_json weight_map;
  auto file_name = [&](int i) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n_files); };
  // Matrices: random bf16 of standard deviation 1/sqrt(cols); vectors (norms, biases): ones.
  auto add = [&](int shard, const std::string& name, const std::vector<int64_t>& shape) {
    const float stddev = shape.size() == 1 ? 0.0f : 1.0f / std::sqrt(float(shape.back()));
    shards[size_t(shard)].add(name, DType::BF16, shape, random_bf16(stddev > 0 ? mix(++tensor_seed) : 0, stddev, 1.0f));
    weight_map[name] = file_name(shard);
  };
  for_each_tensor(
      c, fam, !c.tie_word_embeddings, [&](const TensorSpec& t) { add(t.layer + 1, t.name, t.shape); },
      [&](int l) {
        const int64_t I = c.plan(l).ffn.width;
        for (int e = 0; e < c.num_experts; ++e) {
          const ExpertParts parts = fam.expert_parts(c, l, e);
          for (int p = 0; p < 3; ++p) {
            if (parts[size_t(p)].stacked >= 0) {
              fail("synth: {} stores its experts stacked ('{}'), which synth does not write: use --packed",
                   c.model_type, parts[size_t(p)].name);
            }
            add(l + 1, parts[size_t(p)].name, p == 2 ? std::vector<int64_t>{H, I} : std::vector<int64_t>{I, H});
          }
        }
      });
  size_t total = 0;
  for (int i = 0; i < n_files; ++i) {
    const double t0 = now_seconds();
    shards[size_t(i)].write((tmp / file_name(i)).string());
    total += shards[size_t(i)].data_bytes();
    std::fprintf(stderr, "synth: %s %.2f GB in %.1f s\n", file_name(i).c_str(),
                 double(shards[size_t(i)].data_bytes()) / 1e9, now_seconds() - t0);
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
  cmd->add_option("--preset", f->preset,
                  "shape: qwen3-30b-a3b, mixtral-8x7b, gpt-oss-20b (with --packed), deepseek-v3 (with --layers N: "
                  "at most N - 1 dense layers) or qwen3.5-35b-a3b (with --layers N: its 3-linear-1-full pattern cut "
                  "to N)");
  cmd->add_option("--layers", f->layers, "number of layers (default: the preset's)")->check(CLI::PositiveNumber);
  cmd->add_option("--experts", f->experts, "routed experts per layer (default: the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--vocab", f->vocab, "vocabulary size (default: the preset's; small for tests)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->seed, "random seed");
  cmd->add_flag("--force", f->force, "replace an existing output folder");
  cmd->add_option("--packed", f->packed,
                  "write a packed folder (docs/formats/packed.md) with experts in this codec: bf16, q8_g32, q8_g64, "
                  "q4_g32, q4_g64, mxfp4, fp8_g32, or p3, p4, s3: RANDOM seed blobs (random seeds, coefficients and "
                  "exponent codes at "
                  "the weights' scale), fit for speed measurements only");
  cmd->add_option("--dense", f->dense,
                  "with --packed: codec of dense matrices (attention, dense MLPs, embedding, head) as `pack --dense`; "
                  "norms and routers stay bf16 (default: bf16)");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
