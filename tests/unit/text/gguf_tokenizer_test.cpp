// A GGUF file's tokenizer and chat template (tokenizer/gguf_vocab.h, template/chat_template.h): the demo's vocabulary
// as llama.cpp's converter wrote it (tests/data/gguf/llama_cpp/demo_vocab.gguf) tokenizes every hard text as the
// demo's tokenizer.json does and renders the folder's chat template; GGUF files written here from golden
// tokenizer.json files the way the converter writes them (tokens by id, token types, merges or SentencePiece scores)
// tokenize as Hugging Face `tokenizers` did (tests/data/tokenizer/golden/).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "gguf_builder.h"
#include "template/chat_template.h"
#include "test_util.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace seedling {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

const fs::path kTokData = fs::path(SEEDLING_TEST_DATA) / "tokenizer";
const std::string kDemo = std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe";
const std::string kDemoGguf = test::data_path("gguf/llama_cpp/demo_vocab.gguf");

Json golden(const std::string& name) {
  return Json::parse(test::read_test_file(kTokData / "golden" / (name + ".json.xz")));
}

// Every text of the golden cases of `goldens` (whitespace, scripts, emoji, code, long runs, added tokens, ...).
std::vector<std::string> hard_texts() {
  std::vector<std::string> out;
  for (const char* name : {"bytelevel_bpe", "real_mistral-7b-v0.1"}) {
    const Json g = golden(name);
    for (const Json& c : g.at("cases")) out.push_back(c.at("text").get<std::string>());
  }
  return out;
}

// What llama.cpp's converter writes for a tokenizer.json (convert_hf_to_gguf.py, get_vocab_base and
// _set_vocab_sentencepiece): each id's token ("[PADi]" where no token has it), control type for special added
// tokens, user-defined for other added ones, byte for <0xNN> pieces, and the merges (gpt2) or scores (llama: each
// piece's score the rank of the first merge that makes it, so that the merges ranked by score are the file's).
test::GgufBuilder converted(const Json& tj, const std::string& model, const std::string& pre) {
  const Json& m = tj.at("model");
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (token, type)
  for (auto it = m.at("vocab").begin(); it != m.at("vocab").end(); ++it) {
    const std::string& t = it.key();
    const bool byte = model == "llama" && t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>';
    by_id[it.value().get<int64_t>()] = {t, byte ? 6 : 1};
  }
  for (const Json& a : tj.at("added_tokens")) {
    by_id[a.at("id").get<int64_t>()] = {a.at("content").get<std::string>(), a.value("special", false) ? 3 : 4};
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const int64_t n = by_id.rbegin()->first + 1;
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    tokens.push_back(it == by_id.end() ? "[PAD" + std::to_string(i) + "]" : it->second.first);
    types.push_back(it == by_id.end() ? 5 : it->second.second);
  }
  std::vector<std::string> merges;
  for (const Json& x : m.at("merges")) {
    merges.push_back(x.is_string() ? x.get<std::string>() : x[0].get<std::string>() + " " + x[1].get<std::string>());
  }
  test::GgufBuilder b;
  b.str("general.architecture", "qwen3moe").str("tokenizer.ggml.model", model).strings("tokenizer.ggml.tokens", tokens);
  b.array<int32_t>("tokenizer.ggml.token_type", GgufType::I32, types);
  if (model == "gpt2") {
    b.str("tokenizer.ggml.pre", pre).strings("tokenizer.ggml.merges", merges);
  } else {
    std::map<std::string, size_t> first;
    for (size_t r = 0; r < merges.size(); ++r) {
      const size_t sp = merges[r].find(' ');
      first.emplace(merges[r].substr(0, sp) + merges[r].substr(sp + 1), r);
    }
    std::vector<float> scores;
    for (const std::string& t : tokens) scores.push_back(first.count(t) ? -float(first[t]) : -1e9f);
    b.array<float>("tokenizer.ggml.scores", GgufType::F32, scores);
  }
  return b;
}

Tokenizer open(const test::GgufBuilder& b, const test::ScratchDir& dir, const std::string& name) {
  test::write_file(dir / name, b.bytes());
  return Tokenizer::from_file(dir / name);
}

}  // namespace

// Oracle 2: the demo's vocabulary as llama.cpp's convert_hf_to_gguf.py wrote it (tokenizer.ggml.pre "qwen2").
TEST(GgufTokenizer, DemoVocabEncodesAndDecodesAsTheFolder) {
  const Tokenizer gguf = Tokenizer::from_file(kDemoGguf);
  const Tokenizer folder = Tokenizer::from_file(find_tokenizer_file(kDemo));
  EXPECT_EQ(gguf.vocab_size(), folder.vocab_size());
  size_t n = 0;
  for (const std::string& text : hard_texts()) {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = folder.encode(text, special);
      ASSERT_EQ(gguf.encode(text, special), ids) << "text: " << text;
      for (bool skip : {false, true}) ASSERT_EQ(gguf.decode(ids, skip), folder.decode(ids, skip)) << text;
    }
    ++n;
  }
  EXPECT_GT(n, 150u);
  for (int32_t id = 0; id < 4096; ++id) {
    ASSERT_EQ(gguf.id_to_token(id), folder.id_to_token(id)) << id;
    ASSERT_EQ(gguf.is_special(id), folder.is_special(id)) << id;
  }
}

// The same file against Hugging Face itself: tokenizers' ids for the hard texts on the demo folder's tokenizer.json
// (golden real_seedling-demo-moe, tools/make_tokenizer_goldens.py on the GPU machine), with and without special
// tokens, and its decodes.
TEST(GgufTokenizer, DemoVocabEncodesAsHuggingFaceTokenizersOnTheFolder) {
  const Tokenizer gguf = Tokenizer::from_file(kDemoGguf);
  const Json g = golden("real_seedling-demo-moe");
  size_t n = 0;
  for (const Json& c : g.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> ids = c.at("ids").get<std::vector<int32_t>>();
    ASSERT_EQ(gguf.encode(text, false), ids) << "text: " << text;
    ASSERT_EQ(gguf.encode(text, true), c.at("ids_special").get<std::vector<int32_t>>()) << "text: " << text;
    ASSERT_EQ(gguf.decode(ids, false), c.at("decoded").get<std::string>()) << "text: " << text;
    ++n;
  }
  EXPECT_GE(n, 20u);
}

// The file's chat template is the folder's byte for byte, and that template is
// tests/data/templates/seedling-demo.jinja, which TemplateGolden renders byte-equal to transformers'
// apply_chat_template on every conversation (golden seedling-demo.json, tools/make_template_goldens.py): the GGUF's
// template renders as transformers renders the folder's.
TEST(GgufTokenizer, DemoChatTemplateIsTheOneTransformersRendered) {
  const ModelChatTemplate g = find_model_chat_template(kDemoGguf);
  EXPECT_EQ(g.source, test::read_test_file(fs::path(SEEDLING_TEST_DATA) / "templates" / "seedling-demo.jinja"));
  const Json golden_renders =
      Json::parse(test::read_test_file(fs::path(SEEDLING_TEST_DATA) / "templates" / "golden" / "seedling-demo.json"));
  EXPECT_EQ(golden_renders.at("template").get<std::string>(), "seedling-demo.jinja");
  EXPECT_EQ(golden_renders.at("route").get<std::string>(),
            "transformers.PreTrainedTokenizerFast.apply_chat_template(tokenize=False)");
}

TEST(GgufTokenizer, DemoChatTemplateRendersAsTheFolders) {
  const ModelChatTemplate g = find_model_chat_template(kDemoGguf), f = find_model_chat_template(kDemo);
  EXPECT_EQ(g.source, f.source);
  EXPECT_EQ(g.eos_token, f.eos_token);
  EXPECT_EQ(g.has_eos_token, f.has_eos_token);
  EXPECT_EQ(g.has_bos_token, f.has_bos_token);
  EXPECT_HAS(g.origin, "demo_vocab.gguf (tokenizer.chat_template)");
  nlohmann::ordered_json ctx = {{"messages",
                                 {{{"role", "system"}, {"content", "Be brief."}},
                                  {{"role", "user"}, {"content", "héllo <|im_end|> 日本"}},
                                  {{"role", "assistant"}, {"content", "hi"}},
                                  {{"role", "user"}, {"content", "again"}}}},
                                {"add_generation_prompt", true},
                                {"bos_token", g.bos_token},
                                {"eos_token", g.eos_token}};
  const std::string a = ChatTemplate::from_string(g.source, g.origin).render(ctx);
  EXPECT_EQ(a, ChatTemplate::from_string(f.source, f.origin).render(ctx));
  EXPECT_HAS(a, "<|im_start|>assistant\n");
}

// llama3's byte-level BPE with ignore_merges (tokenizer.ggml.pre "llama-bpe") and DeepSeek-V3's three splits
// ("deepseek-v3"): tokens and merges as the converter stores them, against Hugging Face's ids.
TEST(GgufTokenizer, ByteLevelPreTokenizersAsHuggingFace) {
  test::ScratchDir dir("gguf-tok");
  for (auto [name, pre] :
       {std::pair{"bytelevel_llama3_ignore_merges", "llama-bpe"}, std::pair{"deepseek_style", "deepseek-v3"}}) {
    const Json g = golden(name);
    const Json tj = Json::parse(test::read_test_file(kTokData / g.at("tokenizer").get<std::string>()));
    test::GgufBuilder b = converted(tj, "gpt2", pre);
    b.key("tokenizer.ggml.add_bos_token", GgufType::Bool, uint8_t(0));
    const Tokenizer t = open(b, dir, std::string(name) + ".gguf");
    for (const Json& c : g.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      ASSERT_EQ(t.encode(text, false), c.at("ids").get<std::vector<int32_t>>()) << name << ": " << text;
      if (c.at("decoded").is_string()) {
        ASSERT_EQ(t.decode(c.at("ids").get<std::vector<int32_t>>(), false), c.at("decoded").get<std::string>());
      }
    }
  }
}

// SentencePiece (tokenizer.ggml.model "llama"): Mistral-7B's pieces with scores, byte fallback, <s> added. llama.cpp
// prefixes the text with a space as Hugging Face's legacy Llama tokenizer does (Prepend "▁" to each stretch of text);
// Mistral's tokenizer.json is the newer Metaspace (prepend_scheme "first"), which differs where a text starts with a
// space or a "▁" (none is prepended) or holds a special token (no "▁" after it): those cases are held to the legacy
// tokenizer.json instead.
TEST(GgufTokenizer, SentencePieceAsHuggingFace) {
  test::ScratchDir dir("gguf-spm");
  const Json g = golden("real_mistral-7b-v0.1");
  Json tj = Json::parse(test::read_test_file(kTokData / g.at("tokenizer").get<std::string>()));
  test::GgufBuilder b = converted(tj, "llama", "");
  b.key("tokenizer.ggml.bos_token_id", GgufType::U32, uint32_t(1))
      .key("tokenizer.ggml.eos_token_id", GgufType::U32, uint32_t(2))
      .key("tokenizer.ggml.unknown_token_id", GgufType::U32, uint32_t(0));
  const Tokenizer t = open(b, dir, "mistral.gguf");
  tj["pre_tokenizer"] = nullptr;
  tj["normalizer"] = {{"type", "Sequence"},
                      {"normalizers",
                       {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
  const Tokenizer legacy = Tokenizer::from_json(tj.dump(), "mistral-legacy");
  size_t as_hf = 0;
  for (const Json& c : g.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    bool has_added = false;
    for (const char* s : {"<s>", "</s>", "<unk>"}) has_added = has_added || text.find(s) != std::string::npos;
    const bool differs = has_added || text.rfind(' ', 0) == 0 || text.rfind("\u2581", 0) == 0;
    for (bool special : {false, true}) {
      const std::vector<int32_t> got = t.encode(text, special);
      if (!differs) {
        ASSERT_EQ(got, c.at(special ? "ids_special" : "ids").get<std::vector<int32_t>>()) << c.at("name") << special;
        ++as_hf;
      }
      ASSERT_EQ(got, legacy.encode(text, special)) << c.at("name");
    }
    if (c.at("decoded").is_string()) {
      ASSERT_EQ(t.decode(c.at("ids").get<std::vector<int32_t>>(), false), c.at("decoded").get<std::string>())
          << c.at("name");
    }
  }
  EXPECT_GE(as_hf, 138u);  // of 182: the 91 texts with and without BOS
}

TEST(GgufTokenizer, UnusableTokenizersSayWhy) {
  test::ScratchDir dir("gguf-tok-bad");
  auto error = [&](const test::GgufBuilder& b) {
    test::write_file(dir / "t.gguf", b.bytes());
    return test::error_of([&] { Tokenizer::from_file(dir / "t.gguf"); });
  };
  test::GgufBuilder none;
  none.str("general.architecture", "qwen3moe").str("tokenizer.ggml.model", "none");
  EXPECT_HAS(error(none), "t.gguf: key 'tokenizer.ggml.model' is \"none\": no tokenizer");
  test::GgufBuilder absent;
  absent.str("general.architecture", "qwen3moe");
  EXPECT_HAS(error(absent), "t.gguf: no tokenizer (no key 'tokenizer.ggml.model')");
  test::GgufBuilder rwkv;
  rwkv.str("tokenizer.ggml.model", "rwkv");
  EXPECT_HAS(error(rwkv), "\"rwkv\": a tokenizer Seedling does not read (it reads gpt2 and llama)");
  test::GgufBuilder pre;
  pre.str("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a", "b"}).str("tokenizer.ggml.pre", "x");
  EXPECT_HAS(error(pre), "key 'tokenizer.ggml.pre': pre-tokenizer 'x' is not mapped (mapped: default, llama3,");
  test::GgufBuilder merges;
  merges.str("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a", "b"});
  EXPECT_HAS(error(merges), "missing key 'tokenizer.ggml.merges' (a gpt2 tokenizer needs its merges)");
  test::GgufBuilder types;
  types.str("tokenizer.ggml.model", "gpt2")
      .strings("tokenizer.ggml.tokens", {"a", "b"})
      .strings("tokenizer.ggml.merges", {"a b"})
      .array<int32_t>("tokenizer.ggml.token_type", GgufType::I32, {1});
  EXPECT_HAS(error(types), "key 'tokenizer.ggml.token_type' has 1 entries for 2 tokens");
  test::GgufBuilder bos;
  bos.str("tokenizer.ggml.model", "gpt2")
      .strings("tokenizer.ggml.tokens", {"a", "b"})
      .strings("tokenizer.ggml.merges", {"a b"})
      .key("tokenizer.ggml.add_bos_token", GgufType::Bool, uint8_t(1));
  EXPECT_HAS(error(bos), "key 'tokenizer.ggml.add_bos_token' is true but there is no 'tokenizer.ggml.bos_token_id'");
  test::GgufBuilder spm;
  spm.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b"});
  EXPECT_HAS(error(spm), "missing key 'tokenizer.ggml.scores'");
  EXPECT_HAS(test::error_of([&] { find_model_chat_template(dir / "t.gguf"); }),
             "t.gguf: no chat template (no key 'tokenizer.chat_template')");
}

TEST(GgufTokenizer, PreTokenizerNames) {
  for (const char* name : {"qwen2", "llama3", "llama-bpe", "deepseek-v3", "gpt-4o", "default"}) {
    ASSERT_NE(gguf_pre_tokenizer_regexes(name), nullptr) << name;
  }
  EXPECT_EQ(gguf_pre_tokenizer_regexes("deepseek-v3")->size(), 3u);
  EXPECT_EQ(gguf_pre_tokenizer_regexes("nonsense"), nullptr);
}

}  // namespace seedling
