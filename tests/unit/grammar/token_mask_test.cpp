// Token masks over real vocabularies: the trie walk gives exactly the tokens whose bytes the matcher takes one by
// one (each token tried alone on a copy of the state), the end ids only where the value may end and alone once it is
// complete; cached masks equal computed ones. The per-mask time on the Qwen3 vocabulary is printed, not asserted
// (bench/grammar_bench.cpp measures it; docs/results/2026-12-02-structured-output.md records it).
#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "text/tokenizer_test_util.h"
#include "tokenizer/tokenizer.h"

namespace seedling::grammar {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

bool bit(const std::vector<uint64_t>& bits, size_t id) {
  return (bits[id >> 6] >> (id & 63)) & 1;
}

// The mask by brute force: every token's bytes through a copy of the matcher.
std::vector<uint64_t> brute_mask(const TokenTrie& trie, const JsonMatcher& m, const std::vector<int32_t>& ends) {
  std::vector<uint64_t> bits((trie.vocab() + 63) / 64, 0);
  for (size_t id = 0; id < trie.vocab(); ++id) {
    const std::string* b = trie.bytes(int32_t(id));
    if (b == nullptr) continue;
    JsonMatcher copy = m;
    if (copy.advance(*b)) bits[id >> 6] |= uint64_t(1) << (id & 63);
  }
  if (m.can_end()) {
    for (int32_t e : ends) bits[size_t(e) >> 6] |= uint64_t(1) << (e & 63);
  }
  return bits;
}

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "long tag"]}, "maxItems": 4},
    "ok": {"type": "boolean"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["name", "age", "ok"], "additionalProperties": false})";
const char* kText =
    "{\"name\": \"Zoë \\\"日本\\\" 😀\", \"age\": -42, \"score\": -0.5e+3,\n  \"tags\": [\"a\", \"long tag\"], "
    "\"ok\": true, \"note\": null}";

TEST(TokenMask, EqualsEachTokenTriedAloneOnTheDemoVocabulary) {
  const fs::path demo = fs::path(SEEDLING_TEST_DATA) / "../../models/seedling-demo-moe/tokenizer.json";
  const Tokenizer tok = Tokenizer::from_file(demo);
  auto trie = TokenTrie::from_tokenizer(tok, 4096);
  auto g = Grammar::from_schema(Json::parse(kSchema));
  const std::vector<int32_t> ends = {0};
  TokenConstraint c(g, trie, ends);
  ASSERT_TRUE(JsonMatcher::matches(g, kText));
  const std::vector<int32_t> ids = tok.encode(kText, false);
  std::vector<uint64_t> bits;
  for (size_t k = 0; k < ids.size(); ++k) {
    c.allowed(bits);
    EXPECT_EQ(bits, brute_mask(*trie, c.matcher(), ends)) << "after " << k << " tokens";
    EXPECT_EQ(bit(bits, 0), c.can_end());
    ASSERT_TRUE(bit(bits, size_t(ids[k]))) << "token " << k << " of the text is not allowed";
    ASSERT_TRUE(c.accept(ids[k]));
  }
  EXPECT_TRUE(c.done());
  c.allowed(bits);  // complete: the end id only
  for (size_t id = 0; id < 4096; ++id) EXPECT_EQ(bit(bits, id), id == 0) << id;
  EXPECT_FALSE(c.accept(5));
  EXPECT_TRUE(c.accept(0));
}

TEST(TokenMask, QwenThreeVocabularyMatchesBruteForceAndIsTimed) {
  const Tokenizer tok = Tokenizer::from_json(
      test::read_test_file(fs::path(SEEDLING_TEST_DATA) / "tokenizer/real/qwen3.json.xz"), "qwen3");
  auto t0 = std::chrono::steady_clock::now();
  auto trie = TokenTrie::from_tokenizer(tok, 151936);
  const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int32_t im_end = tok.token_to_id("<|im_end|>"), eot = tok.token_to_id("<|endoftext|>");
  const std::vector<int32_t> ends = {im_end, eot};
  auto g = Grammar::from_schema(Json::parse(kSchema));
  TokenConstraint c(g, trie, ends);
  c.set_cache_size(0);
  const std::vector<int32_t> ids = tok.encode(kText, false);
  std::vector<uint64_t> bits;
  double total = 0, worst = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    auto s = std::chrono::steady_clock::now();
    c.allowed(bits);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    total += dt;
    worst = std::max(worst, dt);
    if (k % 7 == 0) {
      EXPECT_EQ(bits, brute_mask(*trie, c.matcher(), ends)) << "after " << k << " tokens";
    }
    for (size_t id = 151669; id < 151936; ++id) {
      EXPECT_FALSE(bit(bits, id));  // ids the tokenizer does not have
    }
    EXPECT_FALSE(bit(bits, size_t(tok.token_to_id("<think>"))));
    ASSERT_TRUE(bit(bits, size_t(ids[k]))) << k;
    ASSERT_TRUE(c.accept(ids[k]));
  }
  EXPECT_TRUE(c.done());
  std::printf("[ mask ] Qwen3: %zu trie nodes built in %.0f ms; %zu masks, mean %.2f ms, worst %.2f ms (no cache)\n",
              trie->nodes(), build * 1e3, ids.size(), total / double(ids.size()) * 1e3, worst * 1e3);
}

TEST(TokenMask, CachedMasksEqualComputedOnes) {
  const fs::path demo = fs::path(SEEDLING_TEST_DATA) / "../../models/seedling-demo-moe/tokenizer.json";
  const Tokenizer tok = Tokenizer::from_file(demo);
  auto trie = TokenTrie::from_tokenizer(tok, 4096);
  auto g = Grammar::any_object();
  TokenConstraint cached(g, trie, {0}), plain(g, trie, {0});
  plain.set_cache_size(0);
  const std::string text = "{\"a\": \"" + std::string(200, 'x') + "\", \"b\": [1, 2, 1, 2, 1, 2]}";
  std::vector<uint64_t> x, y;
  for (int32_t id : tok.encode(text, false)) {
    cached.allowed(x);
    plain.allowed(y);
    ASSERT_EQ(x, y);
    ASSERT_TRUE(cached.accept(id));
    ASSERT_TRUE(plain.accept(id));
  }
  EXPECT_GT(cached.cached(), 0u);
}

TEST(TokenMask, ReasoningFirstThenTheGrammar) {
  const fs::path demo = fs::path(SEEDLING_TEST_DATA) / "../../models/seedling-demo-moe/tokenizer.json";
  const Tokenizer tok = Tokenizer::from_file(demo);
  TokenConstraint c(Grammar::any_object(), TokenTrie::from_tokenizer(tok, 4096), {0});
  c.start_after(2);
  EXPECT_FALSE(c.active());
  EXPECT_TRUE(c.accept(100));  // anything before the end of reasoning
  EXPECT_TRUE(c.accept(2));
  EXPECT_TRUE(c.active());
  EXPECT_FALSE(c.accept(tok.encode("x", false).at(0)));
  EXPECT_TRUE(c.accept(tok.encode("{", false).at(0)));
}

}  // namespace
}  // namespace seedling::grammar
