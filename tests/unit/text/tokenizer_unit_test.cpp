// Tokenizer behaviour that can be checked by hand: tiny tokenizer.json files written here, with expected ids worked
// out from their merges; the GPT-2 byte map; NFC; byte fallback; streaming; and the errors bad input must raise.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace seedling {
namespace {

// Byte-level BPE: "hello" merges h+e, l+l, he+ll, hell+o; " world" is Ġ + w + ... with Ġw merged.
const char* kByteLevelJson = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 20, "content": "<|end|>", "special": true, "normalized": false,
                    "lstrip": false, "rstrip": false, "single_word": false}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|end|>", "type_id": 0}}],
    "pair": [], "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [20], "tokens": ["<|end|>"]}}},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "he": 4, "ll": 5, "hell": 6, "hello": 7, "Ġ": 8, "w": 9, "r": 10,
              "d": 11, "Ġw": 12, "Ã": 13, "©": 14, "Ã©": 15},
    "merges": ["h e", "l l", ["he", "ll"], "hell o", "Ġ w", "Ã ©"]}
})";

// Metaspace BPE with byte fallback: <0xNN> are ids 3 + NN.
std::string metaspace_json(const std::string& normalizer = "null") {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  for (int b = 0; b < 256; ++b) vocab += fmt::format(R"(, "<0x{:02X}>": {})", b, 3 + b);
  vocab += R"(, "▁": 259, "a": 260, "▁a": 261, "b": 262)";
  return R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true, "normalized": false},
    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}],
  "normalizer": )" +
         normalizer + R"(,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
    {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {)" +
         vocab + R"(}, "merges": [["▁", "a"]]}})";
}

TEST(TokenizerByteLevel, GptTwoByteMapIsTheKnownTable) {
  const auto& t = tok::byte_level_table();
  EXPECT_EQ(t.byte_to_utf8[' '], "Ġ");   // U+0120
  EXPECT_EQ(t.byte_to_utf8['\n'], "Ċ");  // U+010A
  EXPECT_EQ(t.byte_to_utf8['\t'], "ĉ");  // U+0109
  EXPECT_EQ(t.byte_to_utf8['A'], "A");
  EXPECT_EQ(t.byte_to_utf8[0xAD], "Ń");  // soft hyphen is not printable: U+0143
  EXPECT_EQ(t.byte_to_utf8[0xE9], "é");  // Latin-1 printable bytes map to themselves
  for (int b = 0; b < 256; ++b) {
    size_t i = 0;
    char32_t cp = tok::next_code_point(t.byte_to_utf8[b], i);
    EXPECT_EQ(t.char_to_byte[cp], b);
  }
}

TEST(TokenizerByteLevel, MergesApplyByRankAndRoundTrip) {
  Tokenizer tk = Tokenizer::from_json(kByteLevelJson, "inline.json");
  EXPECT_EQ(tk.encode("hello", false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tk.encode("hello world", false), (std::vector<int32_t>{7, 12, 3, 10, 2, 11}));
  EXPECT_EQ(tk.encode("hello", true), (std::vector<int32_t>{7, 20}));
  EXPECT_EQ(tk.encode("hello<|end|>", false), (std::vector<int32_t>{7, 20}));
  // é as e + U+0301 is composed by NFC first, then is bytes C3 A9 -> "Ã©".
  EXPECT_EQ(tk.encode("e\xCC\x81", false), (std::vector<int32_t>{15}));
  EXPECT_EQ(tk.decode(std::vector<int32_t>{7, 12, 3, 10, 2, 11, 20}, false), "hello world<|end|>");
  EXPECT_EQ(tk.decode(std::vector<int32_t>{7, 20}, true), "hello");
  EXPECT_EQ(tk.decode(std::vector<int32_t>{13}, false), "\xEF\xBF\xBD");  // a lone C3 byte
  EXPECT_EQ(tk.token_to_id("<|end|>"), 20);
  EXPECT_EQ(tk.id_to_token(12), "Ġw");
  EXPECT_EQ(tk.vocab_size(), 21u);
}

// A merge listed twice: HF builds its merge map with HashMap::collect, so the later rank overwrites the earlier.
// Here "a b" ranks 2 (not 0), below "b c" (rank 1), so "abc" is a + bc, not ab + c.
TEST(TokenizerBpe, DuplicateMergeKeepsItsLastRank) {
  const char* json = R"({"added_tokens": [], "normalizer": null, "pre_tokenizer": null, "decoder": null,
    "post_processor": null,
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4},
      "merges": [["a", "b"], ["b", "c"], ["a", "b"]]}})";
  Tokenizer tk = Tokenizer::from_json(json, "inline.json");
  EXPECT_EQ(tk.encode("abc", false), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(tk.encode("abab", false), (std::vector<int32_t>{3, 3}));
}

TEST(TokenizerMetaspace, ByteFallbackSpellsUnknownCharsAsBytes) {
  Tokenizer tk = Tokenizer::from_json(metaspace_json(), "inline.json");
  // "a€": ▁a, then € = E2 82 AC as byte tokens.
  std::vector<int32_t> ids = tk.encode("a\xE2\x82\xAC", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{261, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}));
  EXPECT_EQ(tk.decode(ids, false), "a\xE2\x82\xAC");
  EXPECT_EQ(tk.encode("a", true), (std::vector<int32_t>{1, 261}));
  // A lone continuation byte decodes as one U+FFFD per byte token.
  EXPECT_EQ(tk.decode(std::vector<int32_t>{261, 3 + 0x82, 262}, false),
            "a\xEF\xBF\xBD"
            "b");
  // "first": only the piece that starts the input gets the ▁.
  EXPECT_EQ(tk.encode("<s>a", false), (std::vector<int32_t>{1, 260}));
}

TEST(TokenizerStream, NeverSplitsACharacterAndEqualsDecode) {
  Tokenizer tk = Tokenizer::from_json(metaspace_json(), "inline.json");
  std::vector<int32_t> ids = {1, 261, 3 + 0xE2, 3 + 0x82, 3 + 0xAC, 261, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 262};
  StreamDecoder sd(tk, false);
  std::vector<std::string> parts;
  std::string all;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    EXPECT_EQ(tok::find_invalid_utf8(piece), std::string::npos) << "a piece splits a character";
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "an incomplete character was shown";
    parts.push_back(piece);
    all += piece;
  }
  all += sd.finish();
  EXPECT_EQ(all, tk.decode(ids, false));
  EXPECT_EQ(parts[2], "");  // E2 alone: held back
  EXPECT_EQ(parts[3], "");  // E2 82: still held back
  EXPECT_EQ(parts[4], "");  // complete, but a following byte token could still join the group
  EXPECT_EQ(parts[5], "\xE2\x82\xAC a");
}

TEST(TokenizerStream, TrulyInvalidBytesComeOutAtFinish) {
  Tokenizer tk = Tokenizer::from_json(metaspace_json(), "inline.json");
  std::vector<int32_t> ids = {261, 3 + 0xE2};
  StreamDecoder sd(tk, false);
  std::string all = sd.push(ids[0]);
  all += sd.push(ids[1]);
  all += sd.finish();
  EXPECT_EQ(all, tk.decode(ids, false));
  EXPECT_EQ(all, "a\xEF\xBF\xBD");
}

TEST(TokenizerUnicode, NfcComposesAndLossyDecodeMatchesRust) {
  EXPECT_EQ(tok::normalize_form("e\xCC\x81", tok::NormalForm::kNFC), "\xC3\xA9");
  EXPECT_EQ(tok::normalize_form("\xEF\xAC\x81", tok::NormalForm::kNFKC), "fi");  // the ﬁ ligature
  EXPECT_EQ(tok::to_lowercase("\xC4\xB0X"), "i\xCC\x87x");                       // İ -> i + U+0307
  std::string out;
  tok::append_utf8_lossy(out,
                         "a\xE2\x82"
                         "b\xF0\x80z\xFF");
  // E2 82 is one maximal prefix -> one U+FFFD; F0 80 is invalid at 80 -> two; FF -> one.
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD"
            "z\xEF\xBF\xBD");
  EXPECT_EQ(tok::find_invalid_utf8("ok\xED\xA0\x80"), 2u);  // a surrogate is invalid
}

TEST(TokenizerErrors, InvalidUtf8InputIsAClearError) {
  Tokenizer tk = Tokenizer::from_json(kByteLevelJson, "inline.json");
  try {
    tk.encode("ab\xC3(", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offset 2"), std::string::npos) << e.what();
  }
}

std::string replace_first(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

void expect_error(const std::string& json, const std::string& needle) {
  try {
    Tokenizer::from_json(json, "bad/tokenizer.json");
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_NE(what.find("bad/tokenizer.json"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

TEST(TokenizerErrors, MalformedOrUnsupportedFilesNameTheComponentAndFile) {
  expect_error("{ not json", "not valid JSON");
  expect_error("[1, 2]", "expected a JSON object");
  expect_error(R"({"added_tokens": []})", "missing key \"model\"");
  expect_error(metaspace_json(R"({"type": "BertNormalizer"})"), "normalizer type \"BertNormalizer\"");
  std::string s = kByteLevelJson;
  expect_error(replace_first(s, R"("type": "ByteLevel", "add_prefix_space": false)", R"("type": "Whitespace")"),
               "pre-tokenizer type \"Whitespace\"");
  expect_error(replace_first(s, R"("type": "BPE")", R"("type": "Unigram")"), "model type \"Unigram\"");
  expect_error(replace_first(s, R"("truncation": null)", R"("truncation": {"max_length": 5})"), "truncation");
  expect_error(replace_first(s, R"("Ã ©")", R"("Ã zz")"), "merges[5]");
  expect_error(
      replace_first(s, R"("type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})",
                    R"("type": "WordPiece"})"),
      "decoder type \"WordPiece\"");
  expect_error(metaspace_json(R"({"type": "Replace", "pattern": {"Regex": "(unclosed"}, "content": ""})"),
               "does not compile");
}

// Found by fuzz_tokenizer (2026-12-02): one vocab entry with id 1184467416 in a 69-byte file sized the id tables to
// 1.2 billion entries (out of memory). Every id a tokenizer.json names is bounded by tok::kMaxTokenId (2^22 - 1).
TEST(TokenizerErrors, TokenIdsBeyondTheBoundAreRefusedNotAllocated) {
  const std::string s = kByteLevelJson;
  expect_error(replace_first(s, R"("h": 0,)", R"("h": 1184467416,)"),
               "model.vocab[\"h\"]: expected a token id, an integer from 0 to 4194303, got 1184467416");
  expect_error(replace_first(s, R"("h": 0,)", R"("h": -1,)"), "model.vocab[\"h\"]: expected a token id");
  expect_error(replace_first(s, R"("id": 20,)", R"("id": 4194304,)"),
               "added_tokens[0].id: expected a token id, an integer from 0 to 4194303, got 4194304");
  // Gemma's largest id is legal.
  EXPECT_NO_THROW(Tokenizer::from_json(replace_first(s, R"("id": 20,)", R"("id": 262143,)"), "ok.json"));
}

TEST(TokenizerFiles, ModelFolderOrBareFile) {
  auto dir = std::filesystem::temp_directory_path() / "seedling_tok_find";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << kByteLevelJson;
  EXPECT_EQ(find_tokenizer_file(dir), dir / "tokenizer.json");
  EXPECT_EQ(find_tokenizer_file(dir / "tokenizer.json"), dir / "tokenizer.json");
  EXPECT_THROW(find_tokenizer_file(dir / "missing"), Error);
  Tokenizer tk = Tokenizer::from_file(find_tokenizer_file(dir));
  EXPECT_EQ(tk.encode("hello", false), (std::vector<int32_t>{7}));
  std::filesystem::remove_all(dir);
  EXPECT_THROW(find_tokenizer_file(dir), Error);
}

// Kimi-K2 ships tiktoken files (tiktoken.model + tokenization_kimi.py), no tokenizer.json: refused naming the file.
TEST(TokenizerFiles, TiktokenFolderIsRefusedNamingTheFile) {
  auto dir = std::filesystem::temp_directory_path() / "seedling_tok_tiktoken";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiktoken.model") << "aGVsbG8= 0\n";
  try {
    find_tokenizer_file(dir);
    ADD_FAILURE() << "a tiktoken folder gave a tokenizer file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "tiktoken.model").string()), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(TokenizerReal, MistralLoadsAndRoundTrips) {
  auto path = std::filesystem::path(SEEDLING_TEST_DATA) / "tokenizer/real/mistral-7b-v0.1.json.xz";
  Tokenizer tk = Tokenizer::from_json(test::read_test_file(path), path.string());
  EXPECT_EQ(tk.vocab_size(), 32000u);
  EXPECT_EQ(tk.token_to_id("<s>"), 1);
  EXPECT_EQ(tk.token_to_id("<0x0A>"), 13);  // Llama/Mistral byte tokens start at id 3
  std::string text = "Hello, world! Ünïcødé 日本語 😀\n\tcode()";
  std::vector<int32_t> ids = tk.encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tk.decode(ids, true), text);
}

}  // namespace
}  // namespace seedling
