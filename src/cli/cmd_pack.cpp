// cli/cmd_pack.cpp - `seedling pack`: a Hugging Face folder -> a packed folder (docs/formats/packed.md).
//
// Routed experts go to one file per MoE layer, one 4 KiB-aligned blob per expert, in --experts CODEC; dense
// matrices (attention projections, dense MLPs, embeddings, head) in --dense CODEC; norms, biases and routers stay
// exactly as stored (a router's top-k is a discrete choice that a small error can flip). Both flags default to
// "stored": the checkpoint's own dtype, byte for byte.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "codec/quantize.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/packed_writer.h"

namespace seedling::cli {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

struct PackFlags {
  std::string model;
  std::string out;
  std::string experts = "stored";
  std::string dense = "stored";
  bool force = false;
};

// "stored" -> nullopt (keep the source dtype); a codec name -> that codec; anything else fails naming the flag.
std::optional<Codec> codec_flag(const std::string& value, const char* flag) {
  if (value == "stored") return std::nullopt;
  const std::optional<Codec> c = parse_codec(value);
  if (!c) fail("{} '{}' is unknown (known: stored, f32, f16, bf16, q8_g32, q8_g64, q4_g32, q4_g64)", flag, value);
  return c;
}

// Encodes rows in parallel (each row is independent), into `out`.
void encode_parallel(Codec c, const TensorInfo& t, int64_t rows, int64_t cols, uint8_t* out) {
  const std::optional<Codec> same = codec_of_dtype(t.dtype);
  if (same && *same == c) {
    std::memcpy(out, t.data, t.nbytes);
    return;
  }
  const size_t src_row = size_t(cols) * dtype_size(t.dtype), dst_row = codec_row_bytes(c, cols);
  ThreadPool::global().parallel_for(size_t(rows), 16, [&](size_t b, size_t e) {
    encode_matrix(c, t.dtype, t.data + b * src_row, int64_t(e - b), cols, out + b * dst_row);
  });
}

int run(const PackFlags& f) {
  const std::optional<Codec> expert_codec = codec_flag(f.experts, "--experts");
  const std::optional<Codec> dense_codec = codec_flag(f.dense, "--dense");
  if (is_packed_model_dir(f.model)) fail("pack: {} is already a packed folder", f.model);
  if (fs::exists(f.out) && !f.force) fail("pack: {} exists (pass --force to replace it)", f.out);
  const Family* fam_ptr = nullptr;
  const ModelConfig c = read_model_config(f.model, &fam_ptr);
  const Family& fam = *fam_ptr;
  const Checkpoint ck(f.model);
  ordered_json config;
  {
    std::ifstream in(fs::path(f.model) / "config.json");
    config = ordered_json::parse(in);
  }
  const int64_t H = c.hidden_size, V = c.vocab_size;

  auto get = [&](const std::string& name, std::vector<int64_t> shape) -> const TensorInfo& {
    const TensorInfo& t = ck.get(name);
    if (t.shape != shape) {
      TensorInfo want;
      want.shape = shape;
      fail("{}: tensor '{}' has shape {}, expected {} from config.json", t.file, name, t.shape_string(),
           want.shape_string());
    }
    if (!codec_of_dtype(t.dtype))
      fail("{}: tensor '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
    return t;
  };
  auto codec_for = [&](const TensorInfo& t, const std::optional<Codec>& want) {
    return want ? *want : *codec_of_dtype(t.dtype);
  };

  // Plan: every tensor the model loads, with its codec, so the progress bar knows the total.
  struct Item {
    std::string name;
    const TensorInfo* t;
    Codec codec;
  };
  std::vector<Item> resident;
  uint64_t total = 0;
  auto plan = [&](const std::string& name, std::vector<int64_t> shape, bool dense) {
    const TensorInfo& t = get(name, shape);
    const Codec codec = dense ? codec_for(t, dense_codec) : *codec_of_dtype(t.dtype);
    resident.push_back({name, &t, codec});
    total += shape.size() == 1 ? codec_matrix_bytes(codec, 1, shape[0]) : codec_matrix_bytes(codec, shape[0], shape[1]);
  };
  plan(fam.embed, {V, H}, true);
  plan(fam.final_norm, {H}, false);
  if (!c.tie_word_embeddings || ck.has(fam.lm_head)) plan(fam.lm_head, {V, H}, true);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerTensorNames n = fam.layer_names(c, l);
    plan(n.attn_norm, {H}, false);
    plan(n.ffn_norm, {H}, false);
    plan(n.q, {c.q_dim(), H}, true);
    plan(n.k, {c.kv_dim(), H}, true);
    plan(n.v, {c.kv_dim(), H}, true);
    plan(n.o, {H, c.q_dim()}, true);
    if (!n.q_bias.empty()) {
      plan(n.q_bias, {c.q_dim()}, false);
      plan(n.k_bias, {c.kv_dim()}, false);
      plan(n.v_bias, {c.kv_dim()}, false);
    }
    if (c.qk_norm) {
      plan(n.q_norm, {c.head_dim}, false);
      plan(n.k_norm, {c.head_dim}, false);
    }
    if (c.layer_has_experts[size_t(l)]) {
      plan(n.router, {c.num_experts, H}, false);
      const ExpertTensorNames en = fam.expert_names(l, 0);
      const Codec ec = codec_for(get(en.gate, {c.moe_intermediate_size, H}), expert_codec);
      const uint64_t blob = 2 * ((codec_matrix_bytes(ec, c.moe_intermediate_size, H) + 63) / 64 * 64) +
                            codec_matrix_bytes(ec, H, c.moe_intermediate_size);
      total += (blob + 4095) / 4096 * 4096 * uint64_t(c.num_experts);
    } else {
      plan(n.mlp_gate, {c.intermediate_size, H}, true);
      plan(n.mlp_up, {c.intermediate_size, H}, true);
      plan(n.mlp_down, {H, c.intermediate_size}, true);
    }
  }

  const ordered_json source = {{"created_by", "seedling pack"},
                               {"from", fs::absolute(f.model).string()},
                               {"experts", f.experts},
                               {"dense", f.dense}};
  PackedWriter w(f.out, config, source);
  w.set_total_bytes(total);
  for (const Item& it : resident) {
    const std::vector<int64_t>& s = it.t->shape;
    const int64_t rows = s.size() == 1 ? 1 : s[0], cols = s.back();
    w.add_resident(it.name, it.codec, s, [&](uint8_t* out) { encode_parallel(it.codec, *it.t, rows, cols, out); });
  }
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.layer_has_experts[size_t(l)]) continue;
    const int64_t I = c.moe_intermediate_size;
    const Codec ec = codec_for(get(fam.expert_names(l, 0).gate, {I, H}), expert_codec);
    const PackedWriter::Part parts[3] = {{ec, I, H}, {ec, I, H}, {ec, H, I}};
    w.add_expert_layer(l, c.num_experts, parts, [&](int e, int p, uint8_t* out) {
      const ExpertTensorNames en = fam.expert_names(l, e);
      const std::string& name = p == 0 ? en.gate : p == 1 ? en.up : en.down;
      const TensorInfo& t = get(name, {parts[p].rows, parts[p].cols});
      encode_parallel(ec, t, parts[p].rows, parts[p].cols, out);
    });
  }
  for (const char* extra : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                            "special_tokens_map.json"}) {
    w.copy_if_present((fs::path(f.model) / extra).string());
  }
  const uint64_t bytes = w.finish();
  std::printf("wrote %s: %.3f GB (experts %s, dense %s)\n", f.out.c_str(), double(bytes) / 1e9, f.experts.c_str(),
              f.dense.c_str());
  return 0;
}

}  // namespace

void add_pack(CLI::App& app, int* status) {
  auto f = std::make_shared<PackFlags>();
  CLI::App* cmd = app.add_subcommand("pack", "Pack a Hugging Face folder for streaming (docs/formats/packed.md)");
  cmd->add_option("-m,--model", f->model, "Hugging Face model folder")->required();
  cmd->add_option("-o,--output", f->out, "output folder")->required();
  cmd->add_option("--experts", f->experts, "codec of routed experts: stored, bf16, q8_g32, q8_g64, q4_g32, q4_g64");
  cmd->add_option("--dense", f->dense, "codec of dense matrices (attention, dense MLP, embeddings, head)");
  cmd->add_flag("--force", f->force, "replace an existing output folder");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
