// grammar_bench: the time of one structured-output token mask over a real vocabulary (default: the Qwen3 tokenizer
// in tests/data, 151,669 tokens), at every token of JSON texts as the tokenizer splits them: each mask computed
// afresh (no cache), then with the per-request cache the server uses. Prints the distribution per text.
//   build/bench/grammar_bench [tokenizer.json[.xz]] [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace {

using seedling::Tokenizer;
using namespace seedling::grammar;
using Json = nlohmann::ordered_json;

std::string read(const std::string& path) {
  if (path.ends_with(".xz")) {
    FILE* p = popen(("xz -dc '" + path + "'").c_str(), "r");
    std::string out;
    char buf[1 << 16];
    size_t n;
    while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (p) pclose(p);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  const char* name;
  const char* schema;  // nullptr: json_object
  std::string text;
};

void run(const Tokenizer& tok, std::shared_ptr<const TokenTrie> trie, const Case& c, int repeats, bool cache) {
  auto g = c.schema ? Grammar::from_schema(Json::parse(c.schema)) : Grammar::any_object();
  const std::vector<int32_t> ids = tok.encode(c.text, false);
  const std::vector<int32_t> ends = {tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")};
  std::vector<double> ms;
  std::vector<uint64_t> bits;
  for (int r = 0; r < repeats; ++r) {
    TokenConstraint tc(g, trie, ends);
    if (!cache) tc.set_cache_size(0);
    for (const int32_t id : ids) {
      const auto t0 = std::chrono::steady_clock::now();
      tc.allowed(bits);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!tc.accept(id)) {
        std::printf("  %s: token %d refused (the text does not match its schema)\n", c.name, id);
        return;
      }
    }
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double x : ms) sum += x;
  auto q = [&](double p) { return sorted[std::min(sorted.size() - 1, size_t(p * double(sorted.size())))]; };
  std::printf("| %s | %s | %zu | %.3f | %.3f | %.3f | %.3f |\n", c.name, cache ? "yes" : "no", ids.size(),
              sum / double(ms.size()), q(0.5), q(0.9), sorted.back());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : std::string(SEEDLING_SOURCE_DIR) + "/tests/data/tokenizer/real/qwen3.json.xz";
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const Tokenizer tok = Tokenizer::from_json(read(path), path);
  const auto t0 = std::chrono::steady_clock::now();
  auto trie = TokenTrie::from_tokenizer(tok, tok.vocab_size());
  std::printf("%s: %zu ids, trie of %zu nodes (max depth %zu) built in %.1f ms\n", path.c_str(), tok.vocab_size(),
              trie->nodes(), trie->max_depth(),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  const char* person = R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string", "maxLength": 64},
      "scores": {"type": "array", "items": {"type": "number"}}, "role": {"enum": ["admin", "user", "guest"]},
      "address": {"$ref": "#/$defs/address"}, "active": {"type": "boolean"}},
      "required": ["name", "age", "role", "address", "active"], "additionalProperties": false,
      "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                "zip": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["street", "city"],
                "additionalProperties": false}}})";
  std::string long_text = "This is a longer free-text field, as a summary or a description would be: ";
  for (int i = 0; i < 6; ++i)
    long_text += "the quick brown fox jumps over the lazy dog, number " + std::to_string(i) + "; ";
  const std::vector<Case> cases = {
      {"schema, short fields", person,
       "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"scores\": [9.5, -0.5e+3, 12], "
       "\"role\": \"admin\", \"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": "
       "\"SW1Y 4JH\"}, \"active\": true}"},
      {"schema, pretty-printed", person,
       "{\n  \"name\": \"Zoë 日本\",\n  \"age\": 7,\n  \"role\": \"guest\",\n  \"address\": {\n    \"street\": \"x\",\n"
       "    \"city\": \"y\",\n    \"zip\": 12345\n  },\n  \"active\": false\n}"},
      {"json_object, long string", nullptr, "{\"summary\": \"" + long_text + "\", \"n\": [1, 2, 3]}"},
  };
  std::printf(
      "\n| text | cache | masks | mean ms | median ms | p90 ms | max ms |\n| --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  for (const Case& c : cases) {
    run(tok, trie, c, repeats, false);
    run(tok, trie, c, repeats, true);
  }
  return 0;
}
