#include "tokenizer/components.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {

const Json& json_at(const Json& j, const char* name, const JsonContext& ctx) {
  if (!j.is_object() || !j.contains(name)) fail("{}: missing key \"{}\"", ctx.where(), name);
  return j.at(name);
}

std::string json_string(const Json& j, const char* name, const JsonContext& ctx) {
  const Json& v = json_at(j, name, ctx);
  if (!v.is_string()) fail("{}.{}: expected a string, got {}", ctx.where(), name, v.type_name());
  return v.get<std::string>();
}

int32_t json_token_id(const Json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId) {
    fail("{}: expected a token id, an integer from 0 to {}, got {}", where, kMaxTokenId, v.dump());
  }
  return v.get<int32_t>();
}

bool json_bool(const Json& j, const char* name, const JsonContext& ctx, bool fallback) {
  if (!j.is_object() || !j.contains(name) || j.at(name).is_null()) return fallback;
  const Json& v = j.at(name);
  if (!v.is_boolean()) fail("{}.{}: expected true or false, got {}", ctx.where(), name, v.type_name());
  return v.get<bool>();
}

std::string json_type(const Json& j, const JsonContext& ctx) {
  if (!j.is_object()) fail("{}: expected an object with a \"type\", got {}", ctx.where(), j.type_name());
  return json_string(j, "type", ctx);
}

char32_t json_char(const Json& j, const char* name, const JsonContext& ctx) {
  std::string s = json_string(j, name, ctx);
  size_t i = 0;
  if (s.empty() || find_invalid_utf8(s) != std::string::npos) fail("{}.{}: expected one character", ctx.where(), name);
  char32_t cp = next_code_point(s, i);
  if (i != s.size()) fail("{}.{}: expected one character, got {:?}", ctx.where(), name, s);
  return cp;
}

Pattern::Pattern(const Json& j, const JsonContext& ctx) {
  if (j.is_object() && j.contains("String") && j.at("String").is_string()) {
    literal_ = j.at("String").get<std::string>();
  } else if (j.is_object() && j.contains("Regex") && j.at("Regex").is_string()) {
    regex_ = std::make_unique<Regex>(j.at("Regex").get<std::string>(), ctx.where());
  } else {
    fail("{}: expected a pattern {{\"String\": ...}} or {{\"Regex\": ...}}", ctx.where());
  }
}

void Pattern::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  if (regex_) {
    regex_->find_all(s, out);
    return;
  }
  if (literal_.empty()) return;
  size_t pos = 0;
  while ((pos = s.find(literal_, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  std::vector<std::pair<size_t, size_t>> m;
  find_all(s, m);
  if (m.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t prev = 0;
  for (auto [a, b] : m) {
    out.append(s.substr(prev, a - prev));
    out.append(content);
    prev = b;
  }
  out.append(s.substr(prev));
  return out;
}

}  // namespace seedling::tok
