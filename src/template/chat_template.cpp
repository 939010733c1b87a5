// template/chat_template.cpp - the public face of the template interpreter and the model-folder lookup.
#include "template/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"
#include "template/template_ast.h"
#include "template/template_render.h"

namespace seedling {

ChatTemplate ChatTemplate::from_string(std::string source, std::string origin_name) {
  ChatTemplate t;
  t.body_ = std::make_shared<const tmpl::Body>(tmpl::parse_template(source, origin_name));
  t.source_ = std::move(source);
  t.origin_ = std::move(origin_name);
  return t;
}

std::string ChatTemplate::render(const nlohmann::json& context, std::optional<std::tm> now) const {
  return render(nlohmann::ordered_json(context), now);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, std::optional<std::tm> now) const {
  if (!context.is_object()) fail("{}: the render context must be a JSON object, got {}", origin_, context.type_name());
  tmpl::DictItems items;
  for (auto it = context.begin(); it != context.end(); ++it) {
    items.emplace_back(it.key(), tmpl::Value::from_json(it.value()));
  }
  tmpl::RenderOptions options;
  options.origin = origin_;
  if (now) {
    options.now = *now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &options.now);
  }
  return tmpl::render_template(*body_, items, options);
}

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void read_special_token(const nlohmann::json& config, const char* key, const std::filesystem::path& path,
                        std::string& out, bool& present) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return;
  if (it->is_string()) {
    out = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    out = (*it)["content"].get<std::string>();
  } else {
    fail("{}: \"{}\" must be a string or an object with a string \"content\"", path.string(), key);
  }
  present = true;
}

}  // namespace

ModelChatTemplate find_model_chat_template(const std::filesystem::path& model_dir) {
  if (is_gguf_file(model_dir.string())) return gguf_chat_template(GgufFile(model_dir.string()));
  ModelChatTemplate result;
  const auto jinja_path = model_dir / "chat_template.jinja";
  const auto config_path = model_dir / "tokenizer_config.json";
  nlohmann::json config;
  bool have_config = std::filesystem::exists(config_path);
  if (have_config) {
    try {
      config = nlohmann::json::parse(read_text(config_path));
    } catch (const nlohmann::json::parse_error& e) {
      fail("{}: not valid JSON: {}", config_path.string(), e.what());
    }
    if (!config.is_object()) fail("{}: expected a JSON object", config_path.string());
    read_special_token(config, "bos_token", config_path, result.bos_token, result.has_bos_token);
    read_special_token(config, "eos_token", config_path, result.eos_token, result.has_eos_token);
  }
  if (std::filesystem::exists(jinja_path)) {
    result.source = read_text(jinja_path);
    result.origin = jinja_path.string();
    return result;
  }
  if (!have_config || !config.contains("chat_template") || config["chat_template"].is_null()) {
    fail("{}: no chat template (expected chat_template.jinja or a \"chat_template\" key in tokenizer_config.json)",
         model_dir.string());
  }
  const auto& ct = config["chat_template"];
  result.origin = config_path.string();
  if (ct.is_string()) {
    result.source = ct.get<std::string>();
    return result;
  }
  if (ct.is_array()) {
    for (const auto& entry : ct) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        result.source = entry["template"].get<std::string>();
        return result;
      }
    }
    fail("{}: \"chat_template\" is a list without an entry named \"default\"", config_path.string());
  }
  fail("{}: \"chat_template\" must be a string or a list of {{name, template}}", config_path.string());
}

}  // namespace seedling
