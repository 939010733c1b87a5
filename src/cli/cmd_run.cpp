// cli/cmd_run.cpp - `seedling run`: generate from a prompt of ids (text prompts come with the tokenizer).
#include <cstdio>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/generate.h"

namespace seedling::cli {

namespace {
struct RunFlags {
  ModelFlags model;
  std::string prompt;
  std::string ids;
  int n = 32;
  float temp = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  bool print_ids = false;
  bool ignore_eos = false;
};

int run(const RunFlags& f) {
  if (f.prompt.empty() == f.ids.empty()) fail("run: give exactly one of -p TEXT or --ids 1,2,3");
  if (!f.prompt.empty()) fail("run: -p needs the tokenizer, which this build does not have yet; use --ids");
  const std::vector<int32_t> prompt = parse_ids(f.ids, "--ids");
  auto model = load_model(f.model);
  EngineOptions eo;
  eo.max_context = f.model.ctx;
  Engine engine(*model, eo);
  GenerateOptions go;
  go.max_new_tokens = f.n;
  go.sampling = {f.temp, f.top_k, f.top_p, f.min_p, f.repeat_penalty, f.seed};
  if (!f.ignore_eos) go.stop_ids = model->config().eos_token_ids;
  const GenerateResult r = generate(engine, prompt, go, [&](int32_t t) {
    std::printf("%d ", t);
    std::fflush(stdout);
    return true;
  });
  std::printf("\n");
  if (f.print_ids) std::printf("%s\n", join_ids(r.tokens).c_str());
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tok/s); decode: %zu tokens in %.3f s (%.1f tok/s); stop: %s\n",
               prompt.size(), r.prompt_seconds, double(prompt.size()) / r.prompt_seconds, r.tokens.size(),
               r.decode_seconds, r.tokens.size() > 1 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0,
               r.stop_reason.c_str());
  return 0;
}
}  // namespace

void add_run(CLI::App& app, int* status) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a continuation of a prompt");
  add_model_flags(cmd, &f->model);
  cmd->add_option("-p,--prompt", f->prompt, "prompt text");
  cmd->add_option("--ids", f->ids, "prompt as comma-separated token ids");
  cmd->add_option("-n,--n-predict", f->n, "tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", f->temp, "temperature; 0 is greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass (1: off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", f->min_p, "drop tokens below min-p times the best (0: off)")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", f->repeat_penalty, "repetition penalty (1: off)")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->seed, "sampling seed");
  cmd->add_flag("--print-ids", f->print_ids, "print the generated ids, comma-separated, as the last line");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "do not stop at the model's end-of-sequence ids");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
