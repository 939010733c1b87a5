// cli/cmd_logits.cpp - `seedling logits`: logits of every position of the prompt, as raw float32 (one forward, or
// forwards of --rows-per-forward rows).
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"

namespace seedling::cli {

namespace {
struct LogitsFlags {
  ModelFlags model;
  std::string ids;
  std::string out;
  int rows_per_forward = 0;
};

int run(const LogitsFlags& f) {
  const std::vector<int32_t> ids = parse_ids(f.ids, "--ids");
  auto model = load_model(f.model);
  EngineOptions eo;
  eo.max_context = f.model.ctx;
  eo.max_rows_per_forward = f.rows_per_forward;
  Engine engine(*model, eo);
  const int seq = engine.add_sequence();
  SequenceStep step{seq, ids, true};
  const std::vector<float> logits = engine.step({&step, 1});
  FILE* fp = std::fopen(f.out.c_str(), "wb");
  if (fp == nullptr) fail("{}: cannot open for writing", f.out);
  // Little-endian float32, row-major [n_ids x vocab] (this machine is little-endian; static_assert below).
  static_assert(std::endian::native == std::endian::little);
  const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), fp);
  if (std::fclose(fp) != 0 || written != logits.size()) fail("{}: write failed", f.out);
  std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids.size(), model->config().vocab_size, f.out.c_str());
  finish_model(*model, int64_t(ids.size()));
  return 0;
}
}  // namespace

void add_logits(CLI::App& app, int* status) {
  auto f = std::make_shared<LogitsFlags>();
  CLI::App* cmd = app.add_subcommand("logits", "Write the logits of every prompt position (float32, [n x vocab])");
  add_model_flags(cmd, &f->model);
  cmd->add_option("--ids", f->ids, "prompt as comma-separated token ids")->required();
  cmd->add_option("-o,--output", f->out, "output file")->required();
  cmd->add_option("--rows-per-forward", f->rows_per_forward,
                  "feed the prompt in forwards of at most N rows (1: token by token; default: the device's)")
      ->check(CLI::PositiveNumber);
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
