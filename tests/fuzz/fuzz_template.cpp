// Fuzz target: parse and render arbitrary template text. Any input must end in output or a seedling::Error, never a
// crash, hang or sanitizer report. Built and run by tests/cli/fuzz_template.sh (clang -fsanitize=fuzzer,address).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "héllo"},
                 {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [
                   {"type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null]}}}]},
                 {"role": "tool", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
               "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  std::tm now{};
  try {
    auto tmpl = seedling::ChatTemplate::from_string(source, "fuzz.jinja");
    (void)tmpl.render(context, now);
  } catch (const seedling::Error&) {
  }
  return 0;
}
