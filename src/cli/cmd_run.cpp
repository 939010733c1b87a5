// cli/cmd_run.cpp - `seedling run`: generate from a text prompt (raw or through the chat template) or from ids.
//
// The answer goes to stdout as it is generated; a <think> block goes to stderr (dimmed on a terminal), so a pipe
// gets the answer alone. With --print-ids the last line of stdout is the generated ids, comma-separated.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "chat/chat_session.h"
#include "chat/text_output.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "engine/generate.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace seedling::cli {

namespace {
struct RunFlags {
  ModelFlags model;
  std::string prompt;
  std::string ids;
  bool chat = false;
  std::string system;
  bool no_think = false;
  std::vector<std::string> stop;
  int n = 64;
  SamplerParams sampling;
  bool print_ids = false;
  bool ignore_eos = false;
};

void write(FILE* fp, const std::string& s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), fp);
  std::fflush(fp);
}

int run(const RunFlags& f) {
  if (f.prompt.empty() == f.ids.empty()) fail("run: give exactly one of -p TEXT or --ids 1,2,3");
  auto model = load_model(f.model);
  std::optional<Tokenizer> tok;
  if (model->gguf() != nullptr) {  // its tokenizer.ggml.* metadata, when it has a tokenizer Seedling runs
    try {
      tok = gguf_tokenizer(*model->gguf());
    } catch (const Error& e) {
      if (!f.prompt.empty()) fail("{}; so -p cannot be used: give --ids", e.what());
    }
  } else if (std::filesystem::exists(std::filesystem::path(model->dir()) / "tokenizer.json")) {
    tok = Tokenizer::from_file(find_tokenizer_file(model->dir()));
  }
  if (!f.prompt.empty() && !tok) {
    find_tokenizer_file(model->dir());  // names a tokenizer it cannot read (tiktoken.model)
    fail("{}: no tokenizer.json, so -p cannot be used; give --ids", model->dir());
  }
  if (f.chat && f.prompt.empty()) fail("run: --chat needs -p TEXT");

  GenerateOptions go;
  go.max_new_tokens = f.n;
  go.sampling = f.sampling;
  std::vector<int32_t> prompt;
  std::string prompt_text;
  if (f.chat) {
    ChatSession session(model->dir(), *tok);
    if (!f.system.empty()) session.set_system(f.system);
    if (f.no_think) session.template_kwargs()["enable_thinking"] = false;
    session.add("user", f.prompt);
    prompt_text = session.render_prompt();
    prompt = tok->encode(prompt_text, false);
    go.stop_ids = session.stop_ids(model->config());
  } else if (!f.prompt.empty()) {
    prompt_text = f.prompt;
    prompt = tok->encode(f.prompt, true);
    go.stop_ids = model->config().eos_token_ids;
  } else {
    prompt = parse_ids(f.ids, "--ids");
    go.stop_ids = model->config().eos_token_ids;
  }
  if (f.ignore_eos) go.stop_ids.clear();
  if (!f.chat && !f.prompt.empty()) write(stdout, f.prompt);  // a raw prompt is echoed, the completion follows it

  EngineOptions eo;
  eo.max_context = f.model.ctx;
  Engine engine(*model, eo);
  const bool dim = isatty(STDERR_FILENO) != 0;
  std::optional<TextOutput> out;
  if (tok) out.emplace(*tok, f.stop, prompt_opens_reasoning(prompt_text));
  auto show = [&](const TextOutput::Piece& p) {
    if (!p.reasoning.empty()) write(stderr, dim ? "\x1b[2m" + p.reasoning + "\x1b[0m" : p.reasoning);
    write(stdout, p.content);
  };
  const GenerateResult r = generate(engine, prompt, go, [&](int32_t t) {
    if (!out) {
      std::printf("%d ", t);
      std::fflush(stdout);
      return true;
    }
    show(out->push(t));
    return !out->stopped();
  });
  if (out) show(out->finish());
  std::printf("\n");
  if (f.print_ids) std::printf("%s\n", join_ids(r.tokens).c_str());
  std::fflush(stdout);
  const double decode_rate = r.tokens.size() > 1 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0;
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s; decode: %zu tokens, %.1f tok/s; stop: %s\n", prompt.size(),
               double(prompt.size()) / r.prompt_seconds, r.tokens.size(), decode_rate, r.stop_reason.c_str());
  finish_model(*model, int64_t(prompt.size() + r.tokens.size()));
  return 0;
}
}  // namespace

void add_run(CLI::App& app, int* status) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Generate a continuation of a prompt");
  add_model_flags(cmd, &f->model);
  add_devices_flags(cmd, &f->model);
  cmd->add_option("-p,--prompt", f->prompt, "prompt text");
  cmd->add_option("--ids", f->ids, "prompt as comma-separated token ids");
  cmd->add_flag("--chat", f->chat, "wrap the prompt as a user message in the model's chat template");
  cmd->add_option("--system", f->system, "system message (with --chat)");
  cmd->add_flag("--no-think", f->no_think, "pass enable_thinking=false to the chat template");
  cmd->add_option("--stop", f->stop, "stop when this text appears (repeatable); it is not printed");
  cmd->add_option("-n,--n-predict", f->n, "tokens to generate")->check(CLI::PositiveNumber);
  add_sampling_flags(cmd, &f->sampling);
  cmd->add_flag("--print-ids", f->print_ids, "print the generated ids, comma-separated, as the last line");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "do not stop at the model's end-of-sequence ids");
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
