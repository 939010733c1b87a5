// cli/cmd_text.cpp - `seedling tokenize` and `seedling detokenize`: the tokenizer alone, for scripts and checks.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace seedling::cli {

namespace {
struct TokenizeFlags {
  std::string model;
  bool no_special = false;
};

struct DetokenizeFlags {
  std::string model;
  std::string ids;
  bool skip_special = false;
};

// A folder's tokenizer.json, a tokenizer.json, or a GGUF file (Tokenizer::from_file reads its metadata).
std::string tokenizer_path(const std::string& m) {
  return find_tokenizer_file(m.empty() ? default_model_dir() : m);
}

int tokenize(const TokenizeFlags& f) {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_path(f.model));
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const std::vector<int32_t> ids = tok.encode(text, !f.no_special);
  std::printf("%s\n", join_ids(ids).c_str());
  return 0;
}

int detokenize(const DetokenizeFlags& f) {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_path(f.model));
  const std::vector<int32_t> ids = parse_ids(f.ids, "--ids");
  for (int32_t id : ids) {
    if (size_t(id) >= tok.vocab_size()) fail("--ids: {} is not in the vocabulary ({} ids)", id, tok.vocab_size());
  }
  const std::string text = tok.decode(ids, f.skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
}  // namespace

void add_tokenize(CLI::App& app, int* status) {
  auto f = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text on stdin -> token ids, comma-separated, on the last line");
  cmd->add_option("-m,--model", f->model, "model folder, tokenizer.json or GGUF file (default: the bundled model)");
  cmd->add_flag("--no-special", f->no_special, "do not add the tokenizer's special tokens (BOS/EOS)");
  cmd->callback([f, status] { *status = tokenize(*f); });
}

void add_detokenize(CLI::App& app, int* status) {
  auto f = std::make_shared<DetokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Token ids -> text on stdout");
  cmd->add_option("-m,--model", f->model, "model folder or tokenizer.json (default: the bundled model)");
  cmd->add_option("--ids", f->ids, "comma-separated token ids")->required();
  cmd->add_flag("--skip-special", f->skip_special, "leave special tokens out of the text");
  cmd->callback([f, status] { *status = detokenize(*f); });
}

}  // namespace seedling::cli
