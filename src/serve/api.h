// serve/api.h - the OpenAI request bodies read into typed requests, and OpenAI-style errors.
//
// Every field is checked for its type and range; a field the server does not implement (tools when the template
// has none, a schema keyword the matcher does not check, ...) or does not know is refused with a 400 naming it.
// presence_penalty, frequency_penalty and logit_bias are honoured (engine/sampler.h), response_format by constrained
// decoding. Fields that change nothing here are checked and ignored: store, metadata, service_tier, reasoning_effort,
// user, parallel_tool_calls. Nothing wrong is silently ignored or defaulted.
#pragma once

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "grammar/json_schema.h"
#include "serve/reply.h"

namespace seedling::serve {

// An HTTP error with OpenAI's body: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::exception {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});
  const char* what() const noexcept override { return message.c_str(); }
  std::string body() const;

  int status;
  std::string message;
  std::string type;   // invalid_request_error (4xx) or server_error (5xx)
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// JSON text of `j`, with any invalid UTF-8 (a path, a parser's message quoting the body) as U+FFFD: building a reply
// never throws.
std::string json_text(const nlohmann::ordered_json& j);

struct GenerationParams {
  std::string model;              // "" when the request names none
  std::optional<int> max_tokens;  // none: up to the context limit
  SamplerParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // extension (as vLLM's): generate up to max_tokens whatever the model says
  int logprobs = -1;           // -1: none; else each token's log-probability with this many alternatives
  int n = 1;                   // choices: n sequences from the one prompt, choice i sampled with seed + i
  // response_format json_object / json_schema (text.format for /v1/responses): the grammar the output follows, by
  // constrained decoding (grammar/token_mask.h); null for text.
  std::shared_ptr<const grammar::Grammar> grammar;
};
inline constexpr int kMaxChoices = 16;  // the largest n a request may ask

struct ChatRequest {
  nlohmann::ordered_json messages;  // as the chat template expects them (content as a string, arguments as objects)
  nlohmann::ordered_json tools;     // null: none
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  GenerationParams gen;
};

struct CompletionRequest {
  std::string prompt;               // text, or
  std::vector<int32_t> prompt_ids;  // token ids (prompt given as an array of integers)
  GenerationParams gen;
};

// POST /v1/responses (OpenAI's Responses API) read into a chat request: `instructions` and `input` (a string, or
// message items with text parts, function_call and function_call_output items) become the messages, function
// tools the chat tools; `echo` keeps what a response object repeats back (instructions, max_output_tokens,
// temperature, top_p, tools, tool_choice, parallel_tool_calls, metadata). Nothing is stored, so
// previous_response_id is refused; text.format json_object and json_schema are structured output, as chat's.
struct ResponsesRequest {
  ChatRequest chat;
  nlohmann::ordered_json echo;
};
ResponsesRequest parse_responses_request(const nlohmann::ordered_json& body, bool template_has_tools);
// A response's output items for a whole reply: a reasoning item (when the model reasoned), the assistant message
// (when it wrote text, or wrote nothing at all) and one function_call item per tool call; ids derive from `id`.
nlohmann::ordered_json response_output(const Reply& reply, const std::string& id);
// The parts of a response's items, one piece of code for the whole reply and the stream: the ids, and the items as
// they are when complete (function call ids and arguments as chat's tool_calls have them).
std::string response_item_id(const char* kind, const std::string& id, int index = -1);
nlohmann::ordered_json response_reasoning_item(const std::string& id, const std::string& text, const char* status);
nlohmann::ordered_json response_message_item(const std::string& id, const std::string& text, const char* status);
nlohmann::ordered_json response_call_item(const ToolCall& call, const std::string& id, int index, const char* status);

// A response format read into a grammar (null for {"type": "text"}): chat's response_format (`nested`: the schema
// under "json_schema") or the Responses API's text.format (name, schema and strict beside the type). `param` names
// it in errors; a schema the compiler refuses is a 400 naming the keyword and where it is.
std::shared_ptr<const grammar::Grammar> parse_response_format(const nlohmann::ordered_json& format,
                                                              const std::string& param, bool nested);

// The request body as a JSON object; 400 when it is not one.
nlohmann::ordered_json parse_body(const std::string& body);
ChatRequest parse_chat_request(const nlohmann::ordered_json& body, bool template_has_tools);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body);

// The assistant message of a whole reply: content (null when there are only tool calls), reasoning_content, and
// tool_calls with ids derived from the completion id `id`.
nlohmann::ordered_json chat_message(const Reply& reply, const std::string& id);
// The delta of a streamed chunk: its reasoning, content and tool calls, numbered from *next_tool_index (advanced),
// with the ids chat_message gives them.
nlohmann::ordered_json chat_delta(const Reply::Delta& d, int* next_tool_index, const std::string& id);

}  // namespace seedling::serve
