#include "chat/chat_session.h"

#include <algorithm>

namespace seedling {

ChatSession::ChatSession(const std::string& model_dir, const Tokenizer& tokenizer)
    : tokenizer_(tokenizer),
      found_(find_model_chat_template(model_dir)),
      template_(ChatTemplate::from_string(found_.source, found_.origin)) {}

void ChatSession::add(const std::string& role, const std::string& content) {
  messages_.push_back({{"role", role}, {"content", content}});
}

std::string ChatSession::render_prompt() const {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
  for (const auto& m : messages_) messages.push_back(m);
  return render_messages(messages, nullptr, nlohmann::ordered_json::object());
}

std::string ChatSession::render_messages(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& extra_kwargs) const {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  if (!tools.is_null()) ctx["tools"] = tools;
  ctx["add_generation_prompt"] = true;
  ctx["bos_token"] = found_.bos_token;
  ctx["eos_token"] = found_.eos_token;
  for (auto it = kwargs_.begin(); it != kwargs_.end(); ++it) ctx[it.key()] = it.value();
  for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) ctx[it.key()] = it.value();
  return template_.render(ctx);
}

bool ChatSession::template_uses_tools() const {
  return found_.source.find("tools") != std::string::npos;
}

std::vector<int32_t> ChatSession::prompt_ids() const {
  return tokenizer_.encode(render_prompt(), false);
}

std::vector<int32_t> ChatSession::stop_ids(const ModelConfig& config) const {
  std::vector<int32_t> ids(config.eos_token_ids.begin(), config.eos_token_ids.end());
  auto add = [&](const std::string& token) {
    const int32_t id = tokenizer_.token_to_id(token);
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (found_.has_eos_token) add(found_.eos_token);
  // End-of-turn markers of the common templates, when the vocabulary has them as special tokens: a ChatML model
  // whose generation_config names only <|endoftext|> still ends its turn with <|im_end|>.
  for (const char* t : {"<|im_end|>", "<|eot_id|>", "<|end|>", "<|return|>", "<|call|>", "<|endoftext|>"}) {
    const int32_t id = tokenizer_.token_to_id(t);
    if (id >= 0 && tokenizer_.is_special(id)) add(t);
  }
  return ids;
}

}  // namespace seedling
