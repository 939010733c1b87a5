// Fuzz target: the bodies of the server's requests (serve/api.h). The first input byte picks the endpoint (bits 0-1:
// chat completions, completions, responses) and whether the model's template has tools (bit 2); the rest is the
// body as it arrives. Any input must end in a typed request or an ApiError with a 4xx status, never a crash, hang,
// sanitizer report or another exception; an accepted request's numbers lie in the ranges api.h promises, and the
// error body and the request's JSON serialise (json_text never throws). Built by tests/fuzz/CMakeLists.txt, run by
// tests/cli/fuzz_api_body.sh.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "serve/api.h"

namespace {

using seedling::serve::ApiError;
using seedling::serve::GenerationParams;

void check(const GenerationParams& g) {
  if (g.n < 1 || g.n > seedling::serve::kMaxChoices) std::abort();
  if (g.max_tokens && *g.max_tokens < 0) std::abort();
  if (g.logprobs < -1 || g.logprobs > 20) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int endpoint = data[0] & 3;
  const bool template_has_tools = (data[0] & 4) != 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const nlohmann::ordered_json j = seedling::serve::parse_body(body);
    if (endpoint == 0 || endpoint == 3) {
      const auto r = seedling::serve::parse_chat_request(j, template_has_tools);
      check(r.gen);
      (void)seedling::serve::json_text(r.messages);
    } else if (endpoint == 1) {
      const auto r = seedling::serve::parse_completion_request(j);
      check(r.gen);
    } else {
      const auto r = seedling::serve::parse_responses_request(j, template_has_tools);
      check(r.chat.gen);
      (void)seedling::serve::json_text(r.chat.messages);
      (void)seedling::serve::json_text(r.echo);
    }
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 499) std::abort();
    (void)e.body();
  }
  return 0;
}
