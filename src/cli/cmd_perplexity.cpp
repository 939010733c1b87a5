// cli/cmd_perplexity.cpp - `seedling perplexity`: perplexity of a text file in non-overlapping windows.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/perplexity.h"

namespace seedling::cli {

namespace {
struct PerplexityFlags {
  ModelFlags model;
  std::string file;
};

int run(const PerplexityFlags& f) {
  auto model = load_model(f.model);
  const std::vector<int32_t> ids = read_text_tokens(model->dir(), f.file);
  const int window = f.model.ctx > 0 ? f.model.ctx : 512;  // --ctx is the window length
  EngineOptions eo;
  eo.max_context = window;
  Engine engine(*model, eo);
  const double t0 = now_seconds();
  const PerplexityResult r = perplexity(engine, ids, window, [&](int done, int total) {
    std::fprintf(stderr, "\rperplexity: window %d/%d", done, total);
  });
  const double dt = now_seconds() - t0;
  std::fprintf(stderr, "\n");
  std::printf("file: %s (%zu tokens); windows: %d of %d tokens; scored: %lld\n", f.file.c_str(), ids.size(), r.windows,
              window, static_cast<long long>(r.scored));
  std::printf("mean nll: %.6f +- %.6f\n", r.mean_nll, r.nll_stderr);
  std::printf("perplexity: %.4f (%.4f .. %.4f at +-1 standard error)\n", r.ppl, std::exp(r.mean_nll - r.nll_stderr),
              std::exp(r.mean_nll + r.nll_stderr));
  std::printf("speed: %.1f tokens/s\n", double(r.windows) * window / dt);
  finish_model(*model, int64_t(r.windows) * window);
  return 0;
}
}  // namespace

void add_perplexity(CLI::App& app, int* status) {
  auto f = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file in non-overlapping windows of --ctx tokens (default 512)");
  add_model_flags(cmd, &f->model);
  cmd->add_option("-f,--file", f->file, "text file")->required();
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
