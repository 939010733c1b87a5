#include "serve/reply.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace seedling::serve {

namespace {
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Qwen3-Coder: <function=NAME> <parameter=P>VALUE</parameter> ... </function>. A value that parses as JSON (a
// number, an object) is kept as that; anything else is a string.
std::optional<ToolCall> parse_xml_call(std::string_view body) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kPar = "<parameter=", kParEnd = "</parameter>";
  if (body.substr(0, kFn.size()) != kFn) return std::nullopt;
  const size_t name_end = body.find('>');
  const size_t fn_end = body.rfind(kFnEnd);
  if (name_end == std::string_view::npos || fn_end == std::string_view::npos || fn_end < name_end) return std::nullopt;
  ToolCall call;
  call.name = std::string(trim(body.substr(kFn.size(), name_end - kFn.size())));
  if (call.name.empty()) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  std::string_view rest = body.substr(name_end + 1, fn_end - name_end - 1);
  for (;;) {
    rest = trim(rest);
    if (rest.empty()) break;
    if (rest.substr(0, kPar.size()) != kPar) return std::nullopt;
    const size_t pn = rest.find('>');
    const size_t pe = rest.find(kParEnd);
    if (pn == std::string_view::npos || pe == std::string_view::npos || pe < pn) return std::nullopt;
    const std::string key(trim(rest.substr(kPar.size(), pn - kPar.size())));
    std::string_view value = rest.substr(pn + 1, pe - pn - 1);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    auto parsed = nlohmann::ordered_json::parse(value, nullptr, false);
    args[key] = parsed.is_discarded() ? nlohmann::ordered_json(std::string(value)) : parsed;
    rest = rest.substr(pe + kParEnd.size());
  }
  call.arguments = args.dump();
  return call;
}
}  // namespace

std::optional<ToolCall> parse_tool_call(std::string_view body) {
  body = trim(body);
  if (auto xml = parse_xml_call(body)) return xml;
  const auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.name = j["name"].get<std::string>();
  if (call.name.empty()) return std::nullopt;
  const auto args = j.contains("arguments") ? j["arguments"] : nlohmann::ordered_json::object();
  if (args.is_string()) {
    call.arguments = args.get<std::string>();  // already JSON text, as some models write it
  } else if (args.is_object()) {
    call.arguments = args.dump();
  } else {
    return std::nullopt;
  }
  return call;
}

ToolCallParser::Piece ToolCallParser::push(std::string_view text) {
  buf_ += text;
  Piece out;
  for (;;) {
    if (after_block_) {
      size_t ws = 0;
      while (ws < buf_.size() && std::isspace(static_cast<unsigned char>(buf_[ws]))) ++ws;
      buf_.erase(0, ws);
      if (buf_.empty()) break;
      after_block_ = false;
    }
    if (!inside_) {
      const size_t at = buf_.find(kOpen);
      if (at == std::string::npos) {
        const size_t hold = partial_suffix(buf_, kOpen);
        out.content += buf_.substr(0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        break;
      }
      out.content += buf_.substr(0, at);
      buf_.erase(0, at + kOpen.size());
      inside_ = true;
      continue;
    }
    const size_t end = buf_.find(kClose);
    if (end == std::string::npos) break;
    if (auto call = parse_tool_call(std::string_view(buf_).substr(0, end))) {
      out.calls.push_back(std::move(*call));
      after_block_ = true;
    } else {
      out.content += std::string(kOpen) + buf_.substr(0, end + kClose.size());
    }
    buf_.erase(0, end + kClose.size());
    inside_ = false;
  }
  return out;
}

ToolCallParser::Piece ToolCallParser::finish() {
  Piece out;
  if (inside_) {
    if (auto call = parse_tool_call(buf_)) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content = std::string(kOpen) + buf_;
    }
  } else {
    out.content = buf_;
  }
  buf_.clear();
  inside_ = false;
  return out;
}

Reply::Reply(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, bool starts_in_reasoning,
             bool parse_tools, bool chat)
    : text_(tokenizer, std::move(stop_strings), starts_in_reasoning, chat), parse_tools_(parse_tools && chat) {}

Reply::Delta Reply::take(TextOutput::Piece p, bool last) {
  Delta d;
  d.reasoning = std::move(p.reasoning);
  if (!parse_tools_) {
    d.content = std::move(p.content);
  } else {
    ToolCallParser::Piece t = tools_.push(p.content);
    if (last) {
      ToolCallParser::Piece end = tools_.finish();
      t.content += end.content;
      for (auto& c : end.calls) t.calls.push_back(std::move(c));
    }
    d.content = std::move(t.content);
    d.calls = std::move(t.calls);
  }
  content_ += d.content;
  calls_.insert(calls_.end(), d.calls.begin(), d.calls.end());
  return d;
}

Reply::Delta Reply::push(int32_t id) {
  return take(text_.push(id), false);
}

Reply::Delta Reply::finish() {
  return take(text_.finish(), true);
}

}  // namespace seedling::serve
