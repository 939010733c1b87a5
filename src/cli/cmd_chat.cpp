// cli/cmd_chat.cpp - `seedling chat`: an interactive conversation through the model's chat template.
//
// Each turn renders the whole conversation, keeps the KV cache of the longest common prefix with what the sequence
// already holds, and feeds only the rest. Commands: /reset, /system TEXT, /exit. A footer gives prompt and decode
// speed. Reasoning (<think>) is shown dimmed before the answer and is not kept in the history.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "chat/chat_session.h"
#include "chat/text_output.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "engine/generate.h"

namespace seedling::cli {

namespace {
struct ChatFlags {
  ModelFlags model;
  std::string system;
  bool no_think = false;
  int n = 512;
  SamplerParams sampling = {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f};
};

int run(const ChatFlags& f) {
  auto model = load_model(f.model);
  const Tokenizer tok = Tokenizer::from_file(find_tokenizer_file(model->dir()));
  ChatSession session(model->dir(), tok);
  session.set_system(f.system);
  if (f.no_think) session.template_kwargs()["enable_thinking"] = false;
  EngineOptions eo;
  eo.max_context = f.model.ctx;
  Engine engine(*model, eo);
  int seq = engine.add_sequence();
  std::vector<int32_t> fed;  // ids the sequence holds, in order
  GenerateOptions go;
  go.max_new_tokens = f.n;
  go.sampling = f.sampling;
  go.stop_ids = session.stop_ids(model->config());
  const bool tty = isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
  std::fprintf(stderr,
               "seedling chat: %s (%s). /reset clears the conversation, /system TEXT sets the system "
               "message, /exit quits.\n",
               model->dir().c_str(), model->config().model_type.c_str());
  std::string line;
  for (;;) {
    if (tty) std::printf("\n> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      session.reset();
      engine.remove_sequence(seq);
      seq = engine.add_sequence();
      fed.clear();
      std::printf("(conversation cleared)\n");
      continue;
    }
    if (line.rfind("/system", 0) == 0) {
      session.set_system(line.size() > 8 ? line.substr(8) : "");
      std::printf("(system message set)\n");
      continue;
    }
    session.add("user", line);
    const std::string prompt_text = session.render_prompt();
    const std::vector<int32_t> ids = tok.encode(prompt_text, false);
    size_t keep = 0;
    while (keep < fed.size() && keep < ids.size() && fed[keep] == ids[keep]) ++keep;
    if (keep == ids.size()) --keep;  // at least one token must be fed to get logits
    engine.truncate(seq, int(keep));
    fed.assign(ids.begin(), ids.end());
    std::vector<int32_t> context = fed;
    TextOutput out(tok, {}, prompt_opens_reasoning(prompt_text));
    auto show = [&](const TextOutput::Piece& p) {
      if (!p.reasoning.empty()) std::printf("\x1b[2m%s\x1b[0m", p.reasoning.c_str());
      std::fwrite(p.content.data(), 1, p.content.size(), stdout);
      std::fflush(stdout);
    };
    const GenerateResult r = generate_on(
        engine, seq, {ids.data() + keep, ids.size() - keep}, go,
        [&](int32_t t) {
          show(out.push(t));
          return true;
        },
        context);
    show(out.finish());
    // The sequence holds every generated id but the last sampled one.
    fed.insert(fed.end(), r.tokens.begin(), r.tokens.end() - 1);
    session.add("assistant", out.content());
    const double decode_rate = r.tokens.size() > 1 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0;
    std::printf("\n");
    std::fprintf(stderr, "[prompt %zu new of %zu tokens, %.1f tok/s | decode %zu tokens, %.1f tok/s | %s]\n",
                 ids.size() - keep, ids.size(), double(ids.size() - keep) / r.prompt_seconds, r.tokens.size(),
                 decode_rate, r.stop_reason.c_str());
  }
  finish_model(*model, int64_t(fed.size()));
  return 0;
}
}  // namespace

void add_chat(CLI::App& app, int* status) {
  auto f = std::make_shared<ChatFlags>();
  CLI::App* cmd = app.add_subcommand("chat", "Talk with a model interactively");
  add_model_flags(cmd, &f->model);
  cmd->add_option("--system", f->system, "system message");
  cmd->add_flag("--no-think", f->no_think, "pass enable_thinking=false to the chat template");
  cmd->add_option("-n,--n-predict", f->n, "most tokens per answer")->check(CLI::PositiveNumber);
  add_sampling_flags(cmd, &f->sampling);
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
