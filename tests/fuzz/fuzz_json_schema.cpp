// Fuzz target: the JSON Schema compiler and the JSON matcher (grammar/json_schema.h, grammar/json_matcher.h). An
// input is a schema, a NUL byte, then a text. A schema that is not JSON or that the compiler refuses (SchemaError) is
// fine; any other exception, crash or sanitizer report is not. The text is fed byte by byte; the matcher's promises
// are checked: a text it accepts whole is JSON that nlohmann accepts, and every prefix it takes can still be
// completed (some byte is taken, or the value may end). Built by tests/fuzz/CMakeLists.txt, run by
// tests/cli/fuzz_json_schema.sh.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/json_matcher.h"
#include "grammar/json_schema.h"

using seedling::grammar::Grammar;
using seedling::grammar::JsonMatcher;
using seedling::grammar::SchemaError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view schema_text = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1, 256);
  const auto schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const Grammar> g;
  try {
    g = Grammar::from_schema(schema);
  } catch (const SchemaError&) {
    return 0;
  }
  // The bytes JSON continues with most often come first, so a live state is usually shown live in a few tries; every
  // byte is still tried before a state is called dead.
  static const std::string order = [] {
    std::string o = "\"0123456789{}[],:-.eEtrufalsn ";
    for (int c = 0; c < 256; ++c) {
      if (o.find(char(c)) == std::string::npos) o.push_back(char(c));
    }
    return o;
  }();
  JsonMatcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.advance(text.substr(i, 1))) break;
    bool live = m.can_end();
    for (size_t c = 0; c < order.size() && !live; ++c) {
      JsonMatcher copy = m;
      live = copy.advance(std::string_view(&order[c], 1));
    }
    if (!live) std::abort();  // a state with no way on
  }
  if (JsonMatcher::matches(g, text) && !nlohmann::json::accept(text)) std::abort();
  return 0;
}
