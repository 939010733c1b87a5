// chat/chat_session.h - a conversation with a model folder's chat template: messages in, prompt ids out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace seedling {

class ChatSession {
 public:
  // Reads the template of `model_dir` (chat_template.jinja or tokenizer_config.json); Error when there is none.
  ChatSession(const std::string& model_dir, const Tokenizer& tokenizer);

  void set_system(std::string text) { system_ = std::move(text); }
  void add(const std::string& role, const std::string& content);
  void reset() { messages_ = nlohmann::ordered_json::array(); }
  // Extra template variables, e.g. {"enable_thinking": false}.
  nlohmann::ordered_json& template_kwargs() { return kwargs_; }

  // The conversation rendered by the template, ending with the assistant's generation prompt.
  std::string render_prompt() const;
  // Any conversation: OpenAI-style `messages` and `tools` (null: none) rendered with the generation prompt, the
  // template kwargs and then `extra_kwargs` (which win).
  std::string render_messages(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              const nlohmann::ordered_json& extra_kwargs) const;
  // Whether the template reads a `tools` variable at all (templates without it would drop the tools silently).
  bool template_uses_tools() const;
  // render_prompt() as ids (the template writes every special token itself, so none are added).
  std::vector<int32_t> prompt_ids() const;
  // Ids that end the assistant's turn: the model's eos ids and the template's eos_token.
  std::vector<int32_t> stop_ids(const ModelConfig& config) const;

 private:
  const Tokenizer& tokenizer_;
  ModelChatTemplate found_;
  ChatTemplate template_;
  std::string system_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json kwargs_ = nlohmann::ordered_json::object();
};

}  // namespace seedling
