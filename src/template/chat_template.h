// template/chat_template.h - a model's chat template, rendered as transformers' apply_chat_template renders it.
//
// ChatTemplate parses a Jinja2 chat template once and renders conversations byte-for-byte as
// transformers.apply_chat_template(..., tokenize=False) does (jinja2 with trim_blocks, lstrip_blocks, loopcontrols,
// transformers' tojson/raise_exception/strftime_now). Every unsupported construct and every template error is a
// seedling::Error naming the template file, line and column; raise_exception() in a template throws
// tmpl::TemplateRaised, whose message() is the template's own text.
#pragma once

#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace seedling {

class GgufFile;

namespace tmpl {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses `source`; `origin_name` (a file path or a label) prefixes every error message.
  static ChatTemplate from_string(std::string source, std::string origin_name);

  // Renders with `context` = {messages, tools?, add_generation_prompt, bos_token, eos_token, ...template kwargs}.
  // strftime_now() reads the local clock unless `now` is given (tests pin it). Pass ordered_json: key order is
  // part of the output (tojson of tools prints keys in insertion order); nlohmann::json sorts keys.
  std::string render(const nlohmann::ordered_json& context, std::optional<std::tm> now = std::nullopt) const;
  std::string render(const nlohmann::json& context, std::optional<std::tm> now = std::nullopt) const;

  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string origin_;
  std::shared_ptr<const std::vector<std::shared_ptr<const tmpl::Stmt>>> body_;
};

// What a model folder says about its chat template.
struct ModelChatTemplate {
  std::string source;     // the Jinja text
  std::string origin;     // file it came from ("<dir>/chat_template.jinja" or "<dir>/tokenizer_config.json")
  std::string bos_token;  // "" when the folder names none
  std::string eos_token;
  bool has_bos_token = false;
  bool has_eos_token = false;
};

// Finds the chat template of a model folder (or of a GGUF file: gguf_chat_template): chat_template.jinja beside
// tokenizer.json (what transformers 5.x writes), else the "chat_template" key of tokenizer_config.json (a string, or a
// list of {name, template} from which "default" is taken). bos_token/eos_token come from tokenizer_config.json (a
// string or {"content": ...}). Fails when the folder has no template.
ModelChatTemplate find_model_chat_template(const std::filesystem::path& model_dir);

// The chat template of a GGUF file (template/gguf_chat_template.cpp): `tokenizer.chat_template`, with the texts of
// tokenizer.ggml.bos_token_id and eos_token_id as bos_token and eos_token. Fails, naming the file and the key, when
// it has none.
ModelChatTemplate gguf_chat_template(const GgufFile& g);

}  // namespace seedling
