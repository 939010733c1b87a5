// cli/cmd_imatrix.cpp - `seedling imatrix -m DIR -f TEXT_FILE -o FILE`: per-input-channel activation energies of
// every matrix of the model over a text (docs/formats/imatrix.md).
//
// The text's tokens (at most --max-tokens) run in windows of --ctx tokens (default 512), each on a fresh sequence
// from position 0, the last window shorter when the tokens run out. The forward is the ordinary one with an
// ImatrixCollector watching; the logits it computes are those of any other command.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "core/error.h"
#include "model/imatrix.h"

namespace seedling::cli {

namespace {

struct ImatrixFlags {
  ModelFlags model;
  std::string file;
  std::string out;
  int64_t max_tokens = 0;
};

int run(const ImatrixFlags& f) {
  if (f.max_tokens < 0) fail("imatrix: --max-tokens {} is negative", f.max_tokens);
  auto model = load_model(f.model);
  const ModelConfig& c = model->config();
  std::vector<int32_t> ids = read_text_tokens(model->dir(), f.file);
  if (f.max_tokens > 0 && int64_t(ids.size()) > f.max_tokens) ids.resize(size_t(f.max_tokens));
  if (ids.empty()) fail("imatrix: {} has no tokens", f.file);
  {  // before a long run: the output must be writable
    std::ofstream probe(f.out, std::ios::binary | std::ios::app);
    if (!probe) fail("{}: cannot open for writing: {}", f.out, std::strerror(errno));
  }
  const int window = f.model.ctx > 0 ? f.model.ctx : 512;
  EngineOptions eo;
  eo.max_context = window;
  Engine engine(*model, eo);
  ImatrixCollector col(c);
  model->set_activation_observer(&col);
  const size_t n_windows = (ids.size() + size_t(window) - 1) / size_t(window);
  const double t0 = now_seconds();
  for (size_t w = 0; w < n_windows; ++w) {
    const size_t begin = w * size_t(window), n = std::min(size_t(window), ids.size() - begin);
    const int seq = engine.add_sequence();
    SequenceStep step{seq, {ids.data() + begin, n}, false};
    engine.step({&step, 1});
    engine.remove_sequence(seq);
    std::fprintf(stderr, "\rimatrix: window %zu/%zu", w + 1, n_windows);
  }
  const double dt = now_seconds() - t0;
  std::fprintf(stderr, "\n");
  model->set_activation_observer(nullptr);

  write_imatrix(f.out, col,
                {{"model", std::filesystem::absolute(model->dir()).string()},
                 {"model_type", c.model_type},
                 {"text", f.file},
                 {"tokens", std::to_string(ids.size())},
                 {"ctx", std::to_string(window)},
                 {"windows", std::to_string(n_windows)}});
  std::printf("text: %s (%zu tokens in %zu windows of at most %d); %.1f tokens/s\n", f.file.c_str(), ids.size(),
              n_windows, window, double(ids.size()) / dt);
  int moe_layers = 0, unrouted = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.layer_has_experts[size_t(l)]) continue;
    ++moe_layers;
    for (int e = 0; e < c.num_experts; ++e) unrouted += col.rows(l, MatrixInput::ExpertGateUp, e) == 0 ? 1 : 0;
  }
  std::printf("experts: %d of %d (%d MoE layers x %d) got no row; their energies are zero\n", unrouted,
              moe_layers * c.num_experts, moe_layers, c.num_experts);
  std::printf("wrote %s\n", f.out.c_str());
  finish_model(*model, int64_t(ids.size()));
  return 0;
}

}  // namespace

void add_imatrix(CLI::App& app, int* status) {
  auto f = std::make_shared<ImatrixFlags>();
  CLI::App* cmd = app.add_subcommand(
      "imatrix", "Per-input-channel activation energies of every matrix over a text (docs/formats/imatrix.md)");
  add_model_flags(cmd, &f->model);
  cmd->add_option("-f,--file", f->file, "text file")->required();
  cmd->add_option("-o,--output", f->out, "output file (safetensors)")->required();
  cmd->add_option("--max-tokens", f->max_tokens, "use at most the first N tokens of the text (0: all)");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
