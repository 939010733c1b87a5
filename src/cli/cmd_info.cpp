// cli/cmd_info.cpp - `seedling info`: what a model is and what one decoded token costs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"
#include "io/gguf.h"
#include "io/gguf_codec.h"
#include "model/gguf_config.h"
#include "tokenizer/gguf_vocab.h"

namespace seedling::cli {

namespace {

const char* gating_name(Gating g) {
  switch (g) {
    case Gating::SoftmaxTopK:
      return "softmax, top-k";
    case Gating::TopKSoftmax:
      return "top-k, softmax over k";
    case Gating::SigmoidGroupTopK:
      return "sigmoid, group-limited top-k";
  }
  return "?";
}

// The mixer of a layer in words: "attention (window 6, sinks, q/k/v/o bias)", "gated delta net (...)",
// "latent attention (...)".
std::string describe_mixer(const LayerPlan& p) {
  if (p.mixer == Mixer::GatedDeltaNet) {
    const LinearAttentionPlan& g = p.linear;
    return fmt::format("gated delta net ({} key heads of {}, {} value heads of {}, conv kernel {}{})", g.key_heads,
                       g.key_head_dim, g.value_heads, g.value_head_dim, g.conv_kernel,
                       g.grouped ? ", grouped qkvz/ba" : "");
  }
  if (p.mixer == Mixer::Mla) {
    const MlaPlan& m = p.mla;
    return fmt::format("latent attention ({}kv rank {}, nope {}, rope {}{}, v {})",
                       m.q_lora_rank > 0 ? fmt::format("q rank {}, ", m.q_lora_rank) : "", m.kv_lora_rank,
                       m.qk_nope_head_dim, m.qk_rope_head_dim, m.rope_interleave ? " interleaved" : "", m.v_head_dim);
  }
  std::vector<std::string> parts;
  if (p.attn.window > 0) parts.push_back(fmt::format("window {}", p.attn.window));
  if (p.attn.qk_norm == QkNorm::PerHead) parts.push_back("q/k norm per head");
  if (p.attn.qk_norm == QkNorm::Whole) parts.push_back("q/k norm over the projection");
  if (p.attn.clip_qkv > 0) parts.push_back(fmt::format("clip {}", p.attn.clip_qkv));
  if (p.attn.qkv_bias) parts.push_back(p.attn.o_bias ? "q/k/v/o bias" : "q/k/v bias");
  if (!p.attn.qkv_bias && p.attn.o_bias) parts.push_back("o bias");
  if (p.attn.sinks) parts.push_back("sinks");
  if (p.attn.output_gate) parts.push_back("sigmoid output gate");
  if (parts.empty()) parts.push_back("full");
  return fmt::format("attention ({})", fmt::join(parts, ", "));
}

// One layer's plan in words: "attention (window 6, sinks, q/k/v/o bias) + experts (top-4 of 32 ...)".
std::string describe(const ModelConfig& c, const LayerPlan& p) {
  const std::string a = describe_mixer(p);
  if (p.ffn.kind == FfnKind::Dense) return a + fmt::format(" + dense MLP ({})", p.ffn.width);
  const RouterPlan& r = p.ffn.router;
  std::string e = fmt::format(" + experts (top-{} of {}, width {}, {}", c.experts_per_token, c.num_experts, p.ffn.width,
                              gating_name(r.gating));
  if (r.gating == Gating::SigmoidGroupTopK) e += fmt::format(" in {} of {} groups", r.topk_group, r.n_group);
  if (r.correction_bias) e += ", correction bias";
  if (r.bias) e += ", router bias";
  if (r.renormalize && r.gating != Gating::TopKSoftmax) e += ", renormalised";
  if (r.scale != 1.0f) e += fmt::format(", x {}", r.scale);
  if (p.ffn.act == Activation::ClampedSwiGLU) e += fmt::format(", clamped SwiGLU (limit {})", p.ffn.swiglu_limit);
  if (p.ffn.expert_bias) e += ", biased";
  e += ")";
  if (p.ffn.shared_width > 0) {
    e += fmt::format(" + shared expert ({}{})", p.ffn.shared_width, p.ffn.shared_gate ? ", sigmoid-gated" : "");
  }
  return a + e;
}

// "56.48 kB", "4.25 GB": decimal units, as `bench` and `pack` print sizes.
std::string byte_text(uint64_t bytes) {
  if (bytes < 1000) return fmt::format("{} B", bytes);
  const char* units[] = {"kB", "MB", "GB", "TB"};
  double v = double(bytes) / 1000;
  int u = 0;
  while (v >= 1000 && u < 3) v /= 1000, ++u;
  return fmt::format("{:.2f} {}", v, units[u]);
}

// A GGUF file: what it holds (its metadata and tensors), read and checked by GgufFile, and what it runs as (its
// family, its tokenizer); false when its architecture maps onto no family.
bool print_gguf(const std::string& path) {
  const GgufFile g(path);
  std::printf("gguf:             %s (version %u, %s, data aligned to %u)\n", path.c_str(), g.version(),
              byte_text(g.file_size()).c_str(), g.alignment());
  const GgufValue* arch = g.find("general.architecture");
  const std::string a = arch != nullptr && arch->type == GgufType::String ? std::string(arch->str) : "";
  std::printf("architecture:     %s\n", a.empty() ? "(no string general.architecture)" : a.c_str());
  if (const GgufValue* name = g.find("general.name"))
    std::printf("name:             %s\n", gguf_value_text(*name).c_str());
  // The architecture's hyperparameters: every `<arch>.` key, in file order, without the prefix.
  const std::string prefix = a + ".";
  bool any = false;
  for (const auto& [key, v] : g.metadata()) {
    if (a.empty() || key.rfind(prefix, 0) != 0) continue;
    if (!any) std::printf("hyperparameters:  (%s*)\n", prefix.c_str());
    any = true;
    std::printf("  %-38s %s\n", key.substr(prefix.size()).c_str(), gguf_value_text(v).c_str());
  }
  const GgufValue* tok = g.find("tokenizer.ggml.model");
  std::string tokenizer = tok != nullptr ? gguf_value_text(*tok) : "none (no tokenizer.ggml.model)";
  for (const char* list : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    const GgufValue* v = g.find(list);
    if (v != nullptr && v->type == GgufType::Array) tokenizer += fmt::format(", {} {}", v->count, list + 15);
  }
  std::printf("tokenizer:        %s\n", tokenizer.c_str());
  if (const GgufValue* t = g.find("tokenizer.chat_template"); t != nullptr && t->type == GgufType::String) {
    std::printf("chat template:    %zu bytes\n", t->str.size());
  }
  // Tensors by ggml type, in the table's order.
  std::map<uint32_t, std::pair<int, uint64_t>> by_type;  // id -> (tensors, bytes)
  uint64_t total = 0;
  for (const GgufTensor& t : g.tensors()) {
    auto& [count, bytes] = by_type[uint32_t(t.type)];
    ++count;
    bytes += t.nbytes;
    total += t.nbytes;
  }
  std::printf("tensors:          %zu, %s of data (from byte %llu)\n", g.tensors().size(), byte_text(total).c_str(),
              (unsigned long long)g.data_offset());
  for (const auto& [id, cb] : by_type) {
    const std::optional<Codec> codec = ggml_codec(GgmlType(id));
    std::printf("  %-8s %6d tensor%s %14llu bytes  %5.1f%%  %s\n", ggml_type_name(GgmlType(id)).c_str(), cb.first,
                cb.first == 1 ? " " : "s", (unsigned long long)cb.second,
                total > 0 ? 100.0 * double(cb.second) / double(total) : 0.0,
                codec ? fmt::format("codec {}", codec_name(*codec)).c_str() : "not decoded");
  }
  try {
    const GgufModel m = map_gguf_model(g);
    std::printf("maps onto:        %s (docs/formats/gguf.md)\n", m.family->model_type);
  } catch (const Error& e) {
    std::printf("maps onto:        nothing: %s\n", e.what());
    std::printf("runs:             no\n");
    return false;
  }
  try {
    (void)gguf_tokenizer(g);
    std::printf("text:             yes (tokenizer.ggml.* read as a tokenizer%s)\n",
                g.has("tokenizer.chat_template") ? ", tokenizer.chat_template as the chat template" : "");
  } catch (const Error& e) {
    std::printf("text:             no: %s (token ids only: --ids)\n", e.what());
  }
  return true;
}

int run(const ModelFlags& f) {
  std::unique_ptr<Model> model;
  if (!f.model.empty() && is_gguf_file(f.model)) {
    if (!print_gguf(f.model)) return 0;
    try {
      model = load_model(f);
    } catch (const Error& e) {
      std::printf("runs:             no: %s\n", e.what());
      return 0;
    }
    std::printf("runs:             yes\n");
  } else {
    model = load_model(f);
  }
  const ModelConfig& c = model->config();
  const Model::Sizes s = model->sizes();
  int moe_layers = 0;
  for (uint8_t b : c.layer_has_experts) moe_layers += b;
  std::printf("model:            %s\n", model->dir().c_str());
  std::printf("family:           %s\n", c.model_type.c_str());
  std::printf("layers:           %d (%d with experts)\n", c.num_layers, moe_layers);
  std::printf("hidden:           %d; heads %d, kv heads %d, head_dim %d\n", c.hidden_size, c.num_heads, c.num_kv_heads,
              c.head_dim);
  // The plan, runs of layers that share one description on one line.
  for (int l = 0; l < c.num_layers;) {
    const std::string d = describe(c, c.plan(l));
    int end = l + 1;
    while (end < c.num_layers && describe(c, c.plan(end)) == d) ++end;
    const std::string which = end - l == 1 ? fmt::format("layer {}", l) : fmt::format("layers {}-{}", l, end - 1);
    std::printf("%-17s %s\n", (which + ":").c_str(), d.c_str());
    l = end;
  }
  if (c.norm_weight_offset != 0.0f) std::printf("norms:            RMSNorm times (1 + weight) (zero-centred)\n");
  // What one sequence keeps: K/V rows per position, and the linear layers' fixed recurrent state.
  const KvCache probe(cache_shapes(c), 1, 1);
  const size_t state = probe.bytes_at(0);
  std::printf("per sequence:     %s of K/V per position", byte_text(probe.bytes_at(1) - state).c_str());
  if (state > 0)
    std::printf(" + %s of recurrent state (conv windows and delta-rule states, float32)", byte_text(state).c_str());
  std::printf("\n");
  if (model->packed() == nullptr && model->gguf() == nullptr) {  // tensors the text model does not read, by prefix
    std::map<std::string, int> unread;
    for (const auto& [name, t] : model->checkpoint().all()) {
      for (const char* prefix : {"model.visual.", "mtp."}) {
        if (name.rfind(prefix, 0) == 0) ++unread[prefix];
      }
    }
    if (unread.count("model.visual.")) {
      std::printf("vision tower:     model.visual.* (%d tensors), skipped: the text model runs alone\n",
                  unread["model.visual."]);
    }
    if (unread.count("mtp.")) {
      std::printf("MTP head:         mtp.* (%d tensors), not used (multi-token prediction drafts are not run)\n",
                  unread["mtp."]);
    }
  }
  std::printf("vocab:            %d; context %d; rope %s theta %g over %d of %d dims\n", c.vocab_size,
              c.max_position_embeddings, c.rope.type.c_str(), c.rope.theta, c.rotary_dim(), c.head_dim);
  std::printf("parameters:       %.4g total, %.4g active per token, %.4g in routed experts\n", double(s.total_params),
              double(s.active_params), double(s.expert_params));
  std::printf("bytes per token:  %.4g (%.2f MB) at the stored precision\n", double(s.bytes_per_token),
              double(s.bytes_per_token) / 1e6);
  // The cache a sequence keeps per position (float32), and for latent attention what expanded K/V would take.
  int64_t cache_floats = 0, expanded_floats = 0;
  const std::vector<KvLayerShape> shapes = cache_shapes(c);
  for (int l = 0; l < c.num_layers; ++l) {
    const int64_t own = shapes[size_t(l)].key_width + shapes[size_t(l)].value_width;
    cache_floats += own;
    const MlaPlan& m = c.plan(l).mla;
    expanded_floats += c.plan(l).mixer == Mixer::Mla ? int64_t(c.num_heads) * (m.q_head_dim() + m.v_head_dim) : own;
  }
  std::printf("KV cache:         %lld bytes per position (float32)", (long long)(cache_floats * 4));
  if (expanded_floats != cache_floats) {
    std::printf("; latent, where expanded K/V would take %lld (%.1fx)", (long long)(expanded_floats * 4),
                double(expanded_floats) / double(cache_floats));
  }
  std::printf("\n");
  std::printf("experts live:     %s\n", model->experts().name());
  std::printf("devices:          cpu (%d threads)\n", ThreadPool::global().size());
  const CudaDevices cuda = cuda_devices();
  for (const CudaDeviceInfo& d : cuda.devices) {
    std::printf("                  cuda:%d %s, sm_%d%d, %d SMs, %.1f GB (%.1f GB free)\n", d.index, d.name.c_str(),
                d.sm_major, d.sm_minor, d.multiprocessors, double(d.total_bytes) / 1e9, double(d.free_bytes) / 1e9);
  }
  if (cuda.devices.empty()) std::printf("                  no cuda: %s\n", cuda.why_none.c_str());
  return 0;
}
}  // namespace

void add_info(CLI::App& app, int* status) {
  auto f = std::make_shared<ModelFlags>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Describe a model: family, parameters, bytes per decoded token; or what a GGUF file holds");
  add_model_flags(cmd, f.get());
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
