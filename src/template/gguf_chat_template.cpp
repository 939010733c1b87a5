// template/gguf_chat_template.cpp - a GGUF file's chat template (template/chat_template.h).
#include "core/error.h"
#include "io/gguf.h"
#include "template/chat_template.h"

namespace seedling {

namespace {

// The text of token `id` (tokenizer.ggml.tokens), when the file names one under `key`.
void token_text(const GgufFile& g, const char* key, std::string& out, bool& present) {
  if (!g.has(key) || !g.has("tokenizer.ggml.tokens")) return;
  const std::vector<std::string_view>& tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) return;
  out = std::string(tokens[size_t(g.get_int(key, 0, int64_t(tokens.size()) - 1))]);
  present = true;
}

}  // namespace

ModelChatTemplate gguf_chat_template(const GgufFile& g) {
  if (!g.has("tokenizer.chat_template")) {
    fail("{}: no chat template (no key 'tokenizer.chat_template')", g.path());
  }
  ModelChatTemplate t;
  t.source = std::string(g.get_string("tokenizer.chat_template"));
  t.origin = g.path() + " (tokenizer.chat_template)";
  token_text(g, "tokenizer.ggml.bos_token_id", t.bos_token, t.has_bos_token);
  token_text(g, "tokenizer.ggml.eos_token_id", t.eos_token, t.has_eos_token);
  return t;
}

}  // namespace seedling
