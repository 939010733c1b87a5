#include "serve/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <set>

namespace seedling::serve {

using Json = nlohmann::ordered_json;

ApiError::ApiError(int status_, std::string message_, std::string param_, std::string code_)
    : status(status_),
      message(std::move(message_)),
      type(status_ >= 500 ? "server_error" : "invalid_request_error"),
      param(std::move(param_)),
      code(std::move(code_)) {}

std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ApiError::body() const {
  Json e = Json::object();
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? Json(nullptr) : Json(param);
  e["code"] = code.empty() ? Json(nullptr) : Json(code);
  return json_text(Json{{"error", e}});
}

namespace {

ApiError wrong_type(const std::string& param, const char* expected, const Json& got) {
  return ApiError(400, fmt::format("'{}' must be {}, got {}", param, expected, got.type_name()), param, "invalid_type");
}

ApiError bad_value(const std::string& param, const std::string& why) {
  return ApiError(400, fmt::format("'{}': {}", param, why), param, "invalid_value");
}

ApiError unsupported(const std::string& param, const std::string& why) {
  return ApiError(400, fmt::format("'{}' is not supported: {}", param, why), param, "unsupported_parameter");
}

const Json* field(const Json& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const Json& b, const char* key, double lo, double hi) {
  const Json* v = field(b, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw wrong_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) throw bad_value(key, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

std::optional<int64_t> integer(const Json& b, const char* key, int64_t lo, int64_t hi) {
  const Json* v = field(b, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) throw wrong_type(key, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) {
    throw bad_value(key, fmt::format("must be between {} and {}", lo, hi));
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw bad_value(key, fmt::format("must be between {} and {}, got {}", lo, hi, x));
  return x;
}

std::optional<bool> boolean(const Json& b, const char* key) {
  const Json* v = field(b, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> string(const Json& b, const char* key) {
  const Json* v = field(b, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

// Refuses a key that is neither one of the fields both endpoints share nor one of `own`.
void check_known(const Json& body, const std::set<std::string>& own) {
  static const std::set<std::string> shared = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "seed",
                                               "stop",
                                               "stream",
                                               "n",
                                               "logprobs",
                                               "repetition_penalty",
                                               "user",
                                               "metadata",
                                               "stream_options",
                                               "frequency_penalty",
                                               "presence_penalty",
                                               "ignore_eos",
                                               "store",
                                               "service_tier",
                                               "logit_bias"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!shared.count(it.key()) && !own.count(it.key())) {
      throw ApiError(400, fmt::format("unrecognized request argument supplied: '{}'", it.key()), it.key(),
                     "unknown_parameter");
    }
  }
}

// The fields chat and completions share. Sampling defaults are OpenAI's (temperature 1, top_p 1); without a seed,
// a random one.
GenerationParams parse_generation(const Json& b, bool chat) {
  GenerationParams g;
  if (auto v = string(b, "model")) {
    if (v->empty()) throw bad_value("model", "must not be empty");
    g.model = *v;
  }
  std::optional<int64_t> max_tokens = integer(b, "max_tokens", 1, 1 << 30);
  if (chat) {
    if (auto m = integer(b, "max_completion_tokens", 1, 1 << 30)) max_tokens = m;
  }
  if (max_tokens) g.max_tokens = int(*max_tokens);
  if (!chat && !max_tokens) g.max_tokens = 16;  // OpenAI's default for completions
  g.sampling.temperature = float(number(b, "temperature", 0, 2).value_or(1.0));
  g.sampling.top_p = float(number(b, "top_p", 0, 1).value_or(1.0));
  if (field(b, "top_p") && g.sampling.top_p <= 0.0f) throw bad_value("top_p", "must be greater than 0");
  g.sampling.top_k = int(integer(b, "top_k", 0, 1 << 30).value_or(0));
  g.sampling.min_p = float(number(b, "min_p", 0, 1).value_or(0.0));
  g.sampling.repetition_penalty = float(number(b, "repetition_penalty", 0.01, 100).value_or(1.0));
  if (auto seed = integer(b, "seed", INT64_MIN, INT64_MAX)) {
    g.sampling.seed = uint64_t(*seed);
  } else {
    std::random_device rd;
    g.sampling.seed = (uint64_t(rd()) << 32) ^ rd();
  }
  if (const Json* stop = field(b, "stop")) {
    if (stop->is_string()) {
      g.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& s : *stop) {
        if (!s.is_string()) throw wrong_type("stop", "a string or an array of strings", *stop);
        g.stop.push_back(s.get<std::string>());
      }
    } else {
      throw wrong_type("stop", "a string or an array of strings", *stop);
    }
    if (g.stop.size() > 16) throw bad_value("stop", fmt::format("at most 16 stop strings, got {}", g.stop.size()));
    for (const std::string& s : g.stop) {
      if (s.empty()) throw bad_value("stop", "stop strings must not be empty");
    }
  }
  g.stream = boolean(b, "stream").value_or(false);
  g.ignore_eos = boolean(b, "ignore_eos").value_or(false);
  if (const Json* so = field(b, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    for (auto it = so->begin(); it != so->end(); ++it) {
      if (it.key() != "include_usage") throw unsupported("stream_options." + it.key(), "only include_usage is");
    }
    if (auto u = boolean(*so, "include_usage")) g.include_usage = *u;
  }
  g.n = int(integer(b, "n", 1, kMaxChoices).value_or(1));
  g.sampling.frequency_penalty = float(number(b, "frequency_penalty", -2, 2).value_or(0.0));
  g.sampling.presence_penalty = float(number(b, "presence_penalty", -2, 2).value_or(0.0));
  if (auto u = string(b, "user")) (void)u;
  if (const Json* m = field(b, "metadata"); m && !m->is_object()) throw wrong_type("metadata", "an object", *m);
  (void)boolean(b, "store");  // nothing is stored
  (void)string(b, "service_tier");
  if (const Json* lb = field(b, "logit_bias")) {  // {"token id": bias in [-100, 100]}, as OpenAI's
    if (!lb->is_object()) throw wrong_type("logit_bias", "an object", *lb);
    if (lb->size() > 1024) throw bad_value("logit_bias", fmt::format("at most 1024 entries, got {}", lb->size()));
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      const std::string p = fmt::format("logit_bias.{}", key);
      const bool digits = !key.empty() && key.size() <= 10 &&
                          std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (!digits || std::stoll(key) > INT32_MAX) throw bad_value(p, "keys must be token ids (decimal integers)");
      if (!it->is_number()) throw wrong_type(p, "a number", *it);
      const double v = it->get<double>();
      if (!(v >= -100.0 && v <= 100.0)) throw bad_value(p, fmt::format("must be in [-100, 100], got {}", v));
      g.sampling.logit_bias.emplace_back(int32_t(std::stoll(key)), float(v));
    }
  }
  return g;
}

}  // namespace

std::shared_ptr<const grammar::Grammar> parse_response_format(const Json& f, const std::string& param, bool nested) {
  if (!f.is_object()) throw wrong_type(param, "an object", f);
  const Json* type = field(f, "type");
  if (type == nullptr)
    throw ApiError(400, fmt::format("'{}.type' is required", param), param + ".type", "missing_required_parameter");
  if (!type->is_string()) throw wrong_type(param + ".type", "a string", *type);
  const std::string t = type->get<std::string>();
  auto only = [&](const Json& o, const std::string& where, const std::set<std::string>& keys) {
    for (auto it = o.begin(); it != o.end(); ++it) {
      if (!keys.count(it.key())) {
        throw ApiError(400, fmt::format("unrecognized argument supplied: '{}.{}'", where, it.key()),
                       where + "." + it.key(), "unknown_parameter");
      }
    }
  };
  if (t == "text") {
    only(f, param, {"type"});
    return nullptr;
  }
  if (t == "json_object") {
    only(f, param, {"type"});
    return grammar::Grammar::any_object();
  }
  if (t != "json_schema") {
    throw bad_value(param + ".type", fmt::format("'{}' is not one of text, json_object, json_schema", t));
  }
  const Json* spec = &f;
  std::string where = param;
  if (nested) {
    only(f, param, {"type", "json_schema"});
    spec = field(f, "json_schema");
    where = param + ".json_schema";
    if (spec == nullptr)
      throw ApiError(400, fmt::format("'{}' is required", where), where, "missing_required_parameter");
    if (!spec->is_object()) throw wrong_type(where, "an object", *spec);
    only(*spec, where, {"name", "description", "schema", "strict"});
  } else {
    only(f, param, {"type", "name", "description", "schema", "strict"});
  }
  if (auto name = string(*spec, "name"); name && name->empty()) throw bad_value(where + ".name", "must not be empty");
  (void)string(*spec, "description");
  (void)boolean(*spec, "strict");  // the output always follows the schema
  const Json* schema = field(*spec, "schema");
  const std::string sp = where + ".schema";
  if (schema == nullptr) throw ApiError(400, fmt::format("'{}' is required", sp), sp, "missing_required_parameter");
  if (!schema->is_object() && !schema->is_boolean()) throw wrong_type(sp, "an object", *schema);
  try {
    return grammar::Grammar::from_schema(*schema);
  } catch (const grammar::SchemaError& e) {
    throw ApiError(400, fmt::format("'{}': {}", sp, e.what()), sp,
                   e.keyword.empty() ? "invalid_schema" : "unsupported_schema_keyword");
  }
}

namespace {

// Message content as the template wants it: a string. Text parts are joined; other parts are refused.
std::string content_text(const Json& c, const std::string& param) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw wrong_type(param, "a string or an array of content parts", c);
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const Json& part = c[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) throw wrong_type(p, "an object", part);
    auto type = string(part, "type");
    if (type != "text") throw unsupported(p + ".type", "only text content parts are");
    auto t = string(part, "text");
    if (!t) throw bad_value(p + ".text", "missing");
    text += *t;
  }
  return text;
}

Json parse_messages(const Json& b) {
  const Json* ms = field(b, "messages");
  if (ms == nullptr) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
  if (!ms->is_array()) throw wrong_type("messages", "an array", *ms);
  if (ms->empty()) throw bad_value("messages", "at least one message is needed");
  Json out = Json::array();
  for (size_t i = 0; i < ms->size(); ++i) {
    const Json& m = (*ms)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw wrong_type(p, "an object", m);
    const Json* role = field(m, "role");
    if (role == nullptr) throw bad_value(p + ".role", "missing");
    if (!role->is_string()) throw wrong_type(p + ".role", "a string", *role);
    std::string r = role->get<std::string>();
    static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
    if (!roles.count(r)) {
      throw bad_value(p + ".role", fmt::format("'{}' is not one of system, developer, user, assistant, tool", r));
    }
    if (r == "developer") r = "system";
    Json o = Json::object();
    o["role"] = r;
    o["content"] = content_text(m.contains("content") ? m["content"] : Json(nullptr), p + ".content");
    if (auto name = string(m, "name")) o["name"] = *name;
    if (r == "assistant") {
      if (auto rc = string(m, "reasoning_content")) o["reasoning_content"] = *rc;
      if (const Json* calls = field(m, "tool_calls")) {
        if (!calls->is_array()) throw wrong_type(p + ".tool_calls", "an array", *calls);
        Json tc = Json::array();
        for (size_t k = 0; k < calls->size(); ++k) {
          const Json& c = (*calls)[k];
          const std::string cp = fmt::format("{}.tool_calls[{}]", p, k);
          if (!c.is_object()) throw wrong_type(cp, "an object", c);
          const Json* fn = field(c, "function");
          if (fn == nullptr || !fn->is_object()) throw bad_value(cp + ".function", "an object is required");
          auto name = string(*fn, "name");
          if (!name) throw bad_value(cp + ".function.name", "missing");
          Json args = Json::object();
          if (const Json* a = field(*fn, "arguments")) {
            if (a->is_string()) {
              // Templates iterate over arguments as a mapping, as transformers passes them.
              args = Json::parse(a->get<std::string>(), nullptr, false);
              if (args.is_discarded()) args = a->get<std::string>();
            } else if (a->is_object()) {
              args = *a;
            } else {
              throw wrong_type(cp + ".function.arguments", "a string", *a);
            }
          }
          Json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
          if (auto id = string(c, "id")) call["id"] = *id;
          tc.push_back(call);
        }
        o["tool_calls"] = tc;
      }
    }
    if (r == "tool") {
      if (auto id = string(m, "tool_call_id")) o["tool_call_id"] = *id;
    }
    out.push_back(o);
  }
  return out;
}

}  // namespace

Json parse_body(const std::string& body) {
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "", "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_json");
  return j;
}

ChatRequest parse_chat_request(const Json& b, bool template_has_tools) {
  check_known(b, {"messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                  "response_format", "chat_template_kwargs", "reasoning_effort"});
  ChatRequest r;
  r.gen = parse_generation(b, true);
  r.messages = parse_messages(b);
  const bool logprobs = boolean(b, "logprobs").value_or(false);
  const auto top = integer(b, "top_logprobs", 0, 20);
  if (top && !logprobs) throw bad_value("top_logprobs", "needs \"logprobs\": true");
  if (logprobs) r.gen.logprobs = int(top.value_or(0));
  (void)boolean(b, "parallel_tool_calls");
  (void)string(b, "reasoning_effort");  // the template's own switch is chat_template_kwargs.enable_thinking
  if (const Json* rf = field(b, "response_format")) r.gen.grammar = parse_response_format(*rf, "response_format", true);
  if (const Json* kw = field(b, "chat_template_kwargs")) {
    if (!kw->is_object()) throw wrong_type("chat_template_kwargs", "an object", *kw);
    r.template_kwargs = *kw;
  }
  bool tools_off = false;
  if (const Json* choice = field(b, "tool_choice")) {
    if (!choice->is_string()) throw unsupported("tool_choice", "only \"auto\" and \"none\" (no forced calls)");
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      tools_off = true;
    } else if (c != "auto") {
      throw unsupported("tool_choice", fmt::format("'{}': only \"auto\" and \"none\" (no forced calls)", c));
    }
  }
  if (const Json* tools = field(b, "tools")) {
    if (!tools->is_array()) throw wrong_type("tools", "an array", *tools);
    if (!tools->empty() && !template_has_tools && !tools_off) {
      throw unsupported("tools", "this model's chat template has no tool support");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw wrong_type(p, "an object", t);
      if (string(t, "type") != "function") throw unsupported(p + ".type", "only \"function\" tools are");
      const Json* fn = field(t, "function");
      if (fn == nullptr || !fn->is_object()) throw bad_value(p + ".function", "an object is required");
      auto name = string(*fn, "name");
      if (!name || name->empty()) throw bad_value(p + ".function.name", "a non-empty name is required");
    }
    if (!tools->empty() && !tools_off) r.tools = *tools;
  }
  return r;
}

CompletionRequest parse_completion_request(const Json& b) {
  check_known(b, {"prompt", "echo", "suffix", "best_of"});
  CompletionRequest r;
  r.gen = parse_generation(b, false);
  const Json* p = field(b, "prompt");
  if (p == nullptr) throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() &&
             std::all_of(p->begin(), p->end(), [](const Json& v) { return v.is_number_integer(); })) {
    for (const Json& v : *p) {
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id > INT32_MAX) throw bad_value("prompt", fmt::format("token id {} is out of range", id));
      r.prompt_ids.push_back(int32_t(id));
    }
  } else {
    throw wrong_type("prompt", "a string, an array of one string, or an array of token ids", *p);
  }
  if (r.prompt.empty() && r.prompt_ids.empty()) throw bad_value("prompt", "must not be empty");
  if (const Json* lp = field(b, "logprobs"); lp && !lp->is_null()) {  // the legacy form: how many alternatives
    r.gen.logprobs = int(integer(b, "logprobs", 0, 5).value());
  }
  if (auto echo = boolean(b, "echo"); echo && *echo) throw unsupported("echo", "the prompt is not echoed");
  if (field(b, "suffix")) throw unsupported("suffix", "no insertion");
  if (auto bo = integer(b, "best_of", 1, 1 << 30); bo && *bo != 1) throw unsupported("best_of", "only 1");
  return r;
}

namespace {
Json tool_call_json(const ToolCall& c, const std::string& id, int index, bool with_index) {
  Json j = Json::object();
  if (with_index) j["index"] = index;
  j["id"] = fmt::format("call_{}_{}", id, index);
  j["type"] = "function";
  j["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  return j;
}
}  // namespace

Json chat_message(const Reply& r, const std::string& id) {
  Json msg = {{"role", "assistant"}};
  msg["content"] = r.content().empty() && !r.calls().empty() ? Json(nullptr) : Json(r.content());
  if (!r.reasoning().empty()) msg["reasoning_content"] = r.reasoning();
  if (!r.calls().empty()) {
    Json calls = Json::array();
    for (size_t i = 0; i < r.calls().size(); ++i) calls.push_back(tool_call_json(r.calls()[i], id, int(i), false));
    msg["tool_calls"] = calls;
  }
  return msg;
}

Json chat_delta(const Reply::Delta& d, int* next_tool_index, const std::string& id) {
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : d.calls) calls.push_back(tool_call_json(c, id, (*next_tool_index)++, true));
    delta["tool_calls"] = calls;
  }
  return delta;
}

ResponsesRequest parse_responses_request(const Json& b, bool template_has_tools) {
  static const std::set<std::string> known = {"model",
                                              "input",
                                              "instructions",
                                              "max_output_tokens",
                                              "temperature",
                                              "top_p",
                                              "stream",
                                              "tools",
                                              "tool_choice",
                                              "parallel_tool_calls",
                                              "store",
                                              "metadata",
                                              "user",
                                              "reasoning",
                                              "text",
                                              "truncation",
                                              "include",
                                              "service_tier",
                                              "previous_response_id",
                                              "top_k",
                                              "seed"};
  for (auto it = b.begin(); it != b.end(); ++it) {
    if (!known.count(it.key())) {
      throw ApiError(400, fmt::format("unrecognized request argument supplied: '{}'", it.key()), it.key(),
                     "unknown_parameter");
    }
  }
  if (const Json* prev = field(b, "previous_response_id")) {
    throw unsupported(
        "previous_response_id",
        fmt::format("'{}': nothing is stored here; send the whole conversation in 'input'", prev->dump()));
  }
  std::shared_ptr<const grammar::Grammar> format;
  if (const Json* t = field(b, "text")) {
    if (!t->is_object()) throw wrong_type("text", "an object", *t);
    if (const Json* f = field(*t, "format")) format = parse_response_format(*f, "text.format", false);
  }
  if (const Json* r = field(b, "reasoning"); r && !r->is_object()) throw wrong_type("reasoning", "an object", *r);
  if (const Json* inc = field(b, "include"); inc && !inc->is_array()) throw wrong_type("include", "an array", *inc);
  if (auto tr = string(b, "truncation"); tr && *tr != "disabled" && *tr != "auto") {
    throw bad_value("truncation", fmt::format("'{}' is not disabled or auto", *tr));
  }
  // The messages: instructions first, then the input items in order (consecutive function calls form one
  // assistant turn, as chat's tool_calls).
  Json messages = Json::array();
  if (auto ins = string(b, "instructions")) messages.push_back({{"role", "system"}, {"content", *ins}});
  const Json* input = field(b, "input");
  if (input == nullptr) throw ApiError(400, "'input' is required", "input", "missing_required_parameter");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) {
      const Json& it = (*input)[i];
      const std::string p = fmt::format("input[{}]", i);
      if (!it.is_object()) throw wrong_type(p, "an object", it);
      const std::string type = string(it, "type").value_or("message");
      if (type == "message") {
        const Json* c = field(it, "content");
        Json text = c == nullptr ? Json("") : *c;
        if (text.is_array()) {  // input_text / output_text parts: their text
          std::string joined;
          for (size_t k = 0; k < text.size(); ++k) {
            const Json& part = text[k];
            const std::string pp = fmt::format("{}.content[{}]", p, k);
            if (!part.is_object()) throw wrong_type(pp, "an object", part);
            const std::string pt = string(part, "type").value_or("");
            if (pt != "input_text" && pt != "output_text" && pt != "text") {
              throw unsupported(pp + ".type", fmt::format("'{}': only text parts are", pt));
            }
            auto t = string(part, "text");
            if (!t) throw bad_value(pp + ".text", "missing");
            joined += *t;
          }
          text = joined;
        }
        Json m = {{"role", it.contains("role") ? it["role"] : Json("user")}, {"content", text}};
        messages.push_back(std::move(m));
      } else if (type == "function_call") {
        auto name = string(it, "name");
        if (!name) throw bad_value(p + ".name", "missing");
        Json call = {{"type", "function"},
                     {"id", string(it, "call_id").value_or("")},
                     {"function", {{"name", *name}, {"arguments", string(it, "arguments").value_or("{}")}}}};
        if (messages.empty() || messages.back()["role"] != "assistant" || !messages.back().contains("tool_calls")) {
          messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array()}});
        }
        messages.back()["tool_calls"].push_back(std::move(call));
      } else if (type == "function_call_output") {
        const Json* out = field(it, "output");
        if (out == nullptr) throw bad_value(p + ".output", "missing");
        messages.push_back({{"role", "tool"},
                            {"tool_call_id", string(it, "call_id").value_or("")},
                            {"content", out->is_string() ? *out : Json(out->dump())}});
      } else if (type == "reasoning") {
        continue;  // earlier reasoning: templates drop it from past turns
      } else {
        throw unsupported(p + ".type", fmt::format("'{}': only message, function_call, function_call_output and "
                                                   "reasoning items are",
                                                   type));
      }
    }
  } else {
    throw wrong_type("input", "a string or an array of input items", *input);
  }
  // The chat body the rest of the server reads: one validation for both endpoints; a parameter an error names is
  // given back its Responses name.
  Json cb = {{"messages", messages}};
  for (const char* k : {"model", "temperature", "top_p", "top_k", "seed", "stream", "tool_choice",
                        "parallel_tool_calls", "store", "metadata", "user", "service_tier"}) {
    if (b.contains(k)) cb[k] = b[k];
  }
  if (b.contains("max_output_tokens")) cb["max_tokens"] = b["max_output_tokens"];
  if (const Json* tools = field(b, "tools")) {
    if (!tools->is_array()) throw wrong_type("tools", "an array", *tools);
    Json ct = Json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw wrong_type(p, "an object", t);
      if (string(t, "type").value_or("") != "function") {
        throw unsupported(p + ".type", "only function tools are (no hosted tools)");
      }
      Json fn = Json::object();
      for (const char* k : {"name", "description", "parameters", "strict"}) {
        if (t.contains(k)) fn[k] = t[k];
      }
      ct.push_back({{"type", "function"}, {"function", fn}});
    }
    cb["tools"] = ct;
  }
  ResponsesRequest r;
  try {
    r.chat = parse_chat_request(cb, template_has_tools);
  } catch (ApiError& e) {
    if (e.param == "max_tokens") e.param = "max_output_tokens";
    if (e.param.rfind("messages", 0) == 0) e.param = "input" + e.param.substr(8);
    throw;
  }
  r.chat.gen.grammar = format;
  r.echo = {{"instructions", b.contains("instructions") ? b["instructions"] : Json(nullptr)},
            {"max_output_tokens", b.contains("max_output_tokens") ? b["max_output_tokens"] : Json(nullptr)},
            {"temperature", r.chat.gen.sampling.temperature},
            {"top_p", r.chat.gen.sampling.top_p},
            {"tools", b.contains("tools") ? b["tools"] : Json::array()},
            {"tool_choice", b.contains("tool_choice") ? b["tool_choice"] : Json("auto")},
            {"parallel_tool_calls", b.contains("parallel_tool_calls") ? b["parallel_tool_calls"] : Json(true)},
            {"metadata", b.contains("metadata") ? b["metadata"] : Json::object()},
            {"text", {{"format", format ? b["text"]["format"] : Json{{"type", "text"}}}}}};
  return r;
}

std::string response_item_id(const char* kind, const std::string& id, int index) {
  return index < 0 ? fmt::format("{}_{}", kind, id) : fmt::format("{}_{}_{}", kind, id, index);
}

Json response_reasoning_item(const std::string& id, const std::string& text, const char* status) {
  return {{"type", "reasoning"},
          {"id", response_item_id("rs", id)},
          {"summary", Json::array()},
          {"content", Json::array({{{"type", "reasoning_text"}, {"text", text}}})},
          {"status", status}};
}

Json response_message_item(const std::string& id, const std::string& text, const char* status) {
  return {{"type", "message"},
          {"id", response_item_id("msg", id)},
          {"status", status},
          {"role", "assistant"},
          {"content", Json::array({{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}}})}};
}

Json response_call_item(const ToolCall& call, const std::string& id, int index, const char* status) {
  const Json chat_call = tool_call_json(call, id, index, false);
  return {{"type", "function_call"},     {"id", response_item_id("fc", id, index)},
          {"call_id", chat_call["id"]},  {"name", call.name},
          {"arguments", call.arguments}, {"status", status}};
}

Json response_output(const Reply& r, const std::string& id) {
  Json out = Json::array();
  if (!r.reasoning().empty()) out.push_back(response_reasoning_item(id, r.reasoning(), "completed"));
  if (!r.content().empty() || r.calls().empty()) out.push_back(response_message_item(id, r.content(), "completed"));
  for (size_t i = 0; i < r.calls().size(); ++i)
    out.push_back(response_call_item(r.calls()[i], id, int(i), "completed"));
  return out;
}

}  // namespace seedling::serve
