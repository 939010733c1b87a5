// cli/cmd_info.cpp - `seedling info`: what a model is and what one decoded token costs.
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cuda/device.h"

namespace seedling::cli {

namespace {
int run(const ModelFlags& f) {
  auto model = load_model(f);
  const ModelConfig& c = model->config();
  const Model::Sizes s = model->sizes();
  int moe_layers = 0;
  for (uint8_t b : c.layer_has_experts) moe_layers += b;
  std::printf("model:            %s\n", model->dir().c_str());
  std::printf("family:           %s\n", c.model_type.c_str());
  std::printf("layers:           %d (%d with experts)\n", c.num_layers, moe_layers);
  std::printf("hidden:           %d; heads %d, kv heads %d, head_dim %d\n", c.hidden_size, c.num_heads, c.num_kv_heads,
              c.head_dim);
  std::printf("experts:          %d, top-%d, width %d, norm_topk_prob %s\n", c.num_experts, c.experts_per_token,
              c.moe_intermediate_size, c.norm_topk_prob ? "true" : "false");
  std::printf("vocab:            %d; context %d; rope %s theta %g\n", c.vocab_size, c.max_position_embeddings,
              c.rope.type.c_str(), c.rope.theta);
  std::printf("parameters:       %.4g total, %.4g active per token, %.4g in routed experts\n", double(s.total_params),
              double(s.active_params), double(s.expert_params));
  std::printf("bytes per token:  %.4g (%.2f MB) at the stored precision\n", double(s.bytes_per_token),
              double(s.bytes_per_token) / 1e6);
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
  CLI::App* cmd = app.add_subcommand("info", "Describe a model: family, parameters, bytes per decoded token");
  add_model_flags(cmd, f.get());
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
