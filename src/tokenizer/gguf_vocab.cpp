// tokenizer/gguf_vocab.cpp - tokenizer.ggml.* -> tokenizer.json (see the header).
#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace seedling {

using nlohmann::json;

namespace {

// Token types (llama.cpp's llama_token_type, gguf-py's TokenType).
enum : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// llama.cpp's pre-tokenizer names (llama-vocab.cpp, llama_vocab::impl::load) and their split regexes, written as the
// Hugging Face tokenizer.json of each model writes them (llama.cpp rewrites (?i:...) by hand for its own engine;
// PCRE2 runs the originals).
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kDeepseekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

struct PreTokenizer {
  std::vector<const char*> names;
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a whole pre-token in the vocabulary is taken as it is (llama3's tokenizer.json)
  bool add_bos = false;        // llama.cpp's default for add_bos_token
};

const std::vector<PreTokenizer>& pre_tokenizers() {
  static const std::vector<PreTokenizer> table = {
      {{"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}, false, false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}, {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, {kLlama3}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"}, {kQwen2}, false, false},
      {{"qwen35"}, {kQwen35}, false, false},
      {{"deepseek-v3"}, {R"re(\p{N}{1,3})re", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3Words}, false, false},
      {{"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", "[一-龥ࠀ-一가-퟿]+", R"re(\p{N})re"},
       false,
       false},
      {{"gpt-4o", "llama4", "minimax-m2", "kanana2"}, {kGpt4o}, false, false},
      {{"tekken"}, {kTekken}, true, true},
      {{"gpt-2", "phi-2", "olmo", "mpt", "jais", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de"},
       {kGpt2},
       false,
       false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"re(\p{N})re", kGpt2},
       false,
       false},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}, false, false},
  };
  return table;
}

const PreTokenizer* find_pre(std::string_view name) {
  for (const PreTokenizer& p : pre_tokenizers()) {
    for (const char* n : p.names) {
      if (name == n) return &p;
    }
  }
  return nullptr;
}

// The text of `key` as a string when present, else `fallback`.
std::string string_or(const GgufFile& g, const char* key, const std::string& fallback) {
  return g.has(key) ? std::string(g.get_string(key)) : fallback;
}

bool bool_or(const GgufFile& g, const char* key, bool fallback) {
  return g.has(key) ? g.get_bool(key) : fallback;
}

// The tokens, checked: UTF-8 (a JSON string must be), and their types (tokenizer.ggml.token_type, NORMAL where
// absent), one per token.
struct Vocab {
  std::vector<std::string_view> tokens;
  std::vector<int64_t> types;
};

Vocab read_vocab(const GgufFile& g) {
  Vocab v;
  v.tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (v.tokens.empty()) fail("{}: key 'tokenizer.ggml.tokens' is empty", g.path());
  if (v.tokens.size() > size_t(INT32_MAX)) fail("{}: key 'tokenizer.ggml.tokens' has too many tokens", g.path());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const size_t bad = tok::find_invalid_utf8(v.tokens[i]);
    if (bad != std::string_view::npos) {
      fail("{}: key 'tokenizer.ggml.tokens': token {} is not valid UTF-8 (byte {})", g.path(), i, bad);
    }
  }
  if (g.has("tokenizer.ggml.token_type")) {
    v.types = g.get_int_array("tokenizer.ggml.token_type");
    if (v.types.size() != v.tokens.size()) {
      fail("{}: key 'tokenizer.ggml.token_type' has {} entries for {} tokens", g.path(), v.types.size(),
           v.tokens.size());
    }
  } else {
    v.types.assign(v.tokens.size(), kNormal);
  }
  return v;
}

// The id of a special token named by `key`, or -1 when absent; an Error when it is not a token.
int64_t special_id(const GgufFile& g, const char* key, size_t n_tokens) {
  if (!g.has(key)) return -1;
  return g.get_int(key, 0, int64_t(n_tokens) - 1);
}

// model.vocab (first id of each string), added_tokens (control, unknown: special; user-defined: not).
void vocab_and_added(const Vocab& v, json* vocab, json* added) {
  *vocab = json::object();
  *added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string t(v.tokens[i]);
    if (t.empty()) continue;
    if (!vocab->contains(t)) (*vocab)[t] = int64_t(i);
    const int64_t type = v.types[i];
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      added->push_back({{"id", int64_t(i)},
                        {"content", t},
                        {"single_word", false},
                        {"lstrip", false},
                        {"rstrip", false},
                        {"normalized", false},
                        {"special", type != kUserDefined}});
    }
  }
}

// BOS and EOS around an encoded text, as add_bos_token / add_eos_token ask.
json post_processor(const GgufFile& g, const Vocab& v, bool add_bos_default) {
  const bool add_bos = bool_or(g, "tokenizer.ggml.add_bos_token", add_bos_default);
  const bool add_eos = bool_or(g, "tokenizer.ggml.add_eos_token", false);
  json single = json::array(), specials = json::object();
  auto special = [&](const char* key, const char* flag) {
    const int64_t id = special_id(g, key, v.tokens.size());
    if (id < 0) fail("{}: key '{}' is true but there is no '{}'", g.path(), flag, key);
    const std::string t(v.tokens[size_t(id)]);
    specials[t] = {{"id", t}, {"ids", {id}}, {"tokens", {t}}};
    single.push_back({{"SpecialToken", {{"id", t}, {"type_id", 0}}}});
  };
  if (add_bos) special("tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token");
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos) special("tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_eos_token");
  if (!add_bos && !add_eos) return nullptr;
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// "gpt2": byte-level BPE with the merges as stored.
json byte_level_bpe(const GgufFile& g, const Vocab& v) {
  const std::string pre = string_or(g, "tokenizer.ggml.pre", "default");
  const PreTokenizer* p = find_pre(pre);
  if (p == nullptr) {
    fail("{}: key 'tokenizer.ggml.pre': pre-tokenizer '{}' is not mapped (mapped: {})", g.path(), pre,
         gguf_pre_tokenizers_mapped());
  }
  if (!g.has("tokenizer.ggml.merges")) {
    fail("{}: missing key 'tokenizer.ggml.merges' (a gpt2 tokenizer needs its merges)", g.path());
  }
  json merges = json::array();
  const std::vector<std::string_view>& stored = g.get_string_array("tokenizer.ggml.merges");
  for (size_t i = 0; i < stored.size(); ++i) {
    const std::string_view m = stored[i];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;  // as llama.cpp splits them
    if (space == std::string_view::npos || tok::find_invalid_utf8(m) != std::string_view::npos) {
      fail("{}: key 'tokenizer.ggml.merges': entry {} is not two tokens with a space between", g.path(), i);
    }
    merges.push_back({std::string(m.substr(0, space)), std::string(m.substr(space + 1))});
  }
  json vocab, added;
  vocab_and_added(v, &vocab, &added);
  json pretok = json::array();
  for (const std::string& r : p->regexes) pretok.push_back(split(r));
  pretok.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pretok}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}}};
  j["post_processor"] = post_processor(g, v, p->add_bos);
  j["model"] = {{"type", "BPE"},     {"dropout", nullptr},     {"unk_token", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", p->ignore_merges},
                {"vocab", vocab},    {"merges", merges}};
  return j;
}

// "llama": SentencePiece pieces and scores as a BPE (Hugging Face's LlamaConverter): every split of a piece into two
// pieces is a merge, merges ranked by the merged piece's score (then its id, then the left and right pieces' ids);
// characters no piece covers fall back to their <0xNN> bytes.
json sentencepiece_bpe(const GgufFile& g, const Vocab& v) {
  const std::vector<double> scores = g.get_float_array("tokenizer.ggml.scores");
  if (scores.size() != v.tokens.size()) {
    fail("{}: key 'tokenizer.ggml.scores' has {} entries for {} tokens", g.path(), scores.size(), v.tokens.size());
  }
  std::unordered_map<std::string_view, int64_t> id_of;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (!v.tokens[i].empty()) id_of.emplace(v.tokens[i], int64_t(i));
  }
  struct Merge {
    double score;
    int64_t merged, left, right;
  };
  std::vector<Merge> found;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int64_t type = v.types[i];
    if (type != kNormal && type != kUserDefined) continue;  // control, byte, unused pieces are never merged into
    const std::string_view t = v.tokens[i];
    for (size_t cut = 0; cut < t.size();) {
      cut += tok::utf8_len(static_cast<unsigned char>(t[cut]));
      if (cut >= t.size()) break;
      auto l = id_of.find(t.substr(0, cut)), r = id_of.find(t.substr(cut));
      if (l != id_of.end() && r != id_of.end()) found.push_back({scores[i], int64_t(i), l->second, r->second});
    }
  }
  std::sort(found.begin(), found.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.merged != b.merged) return a.merged < b.merged;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  json merges = json::array();
  for (const Merge& m : found) {
    merges.push_back({std::string(v.tokens[size_t(m.left)]), std::string(v.tokens[size_t(m.right)])});
  }
  json vocab, added;
  vocab_and_added(v, &vocab, &added);
  const int64_t unk = special_id(g, "tokenizer.ggml.unknown_token_id", v.tokens.size());
  const bool prefix = bool_or(g, "tokenizer.ggml.add_space_prefix", true);
  json norm = json::array();
  if (prefix) norm.push_back({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}});
  norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}});
  json decoders = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                               {{"type", "ByteFallback"}},
                               {{"type", "Fuse"}}});
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  json j = {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", norm}}},
            {"pre_tokenizer", nullptr},
            {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}}};
  j["post_processor"] = post_processor(g, v, true);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk >= 0 ? json(std::string(v.tokens[size_t(unk)])) : json(nullptr)},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  return j;
}

}  // namespace

const std::vector<std::string>* gguf_pre_tokenizer_regexes(std::string_view pre) {
  const PreTokenizer* p = find_pre(pre);
  return p == nullptr ? nullptr : &p->regexes;
}

std::string gguf_pre_tokenizers_mapped() {
  std::string out;
  for (const PreTokenizer& p : pre_tokenizers()) {
    for (const char* n : p.names) out += (out.empty() ? "" : ", ") + std::string(n);
  }
  return out;
}

std::string gguf_tokenizer_json(const GgufFile& g) {
  if (!g.has("tokenizer.ggml.model")) {
    fail("{}: no tokenizer (no key 'tokenizer.ggml.model')", g.path());
  }
  const std::string model(g.get_string("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama") {
    fail("{}: key 'tokenizer.ggml.model' is \"{}\": {}", g.path(), model,
         model == "none" ? "no tokenizer" : "a tokenizer Seedling does not read (it reads gpt2 and llama)");
  }
  if (!g.has("tokenizer.ggml.tokens")) {
    fail("{}: missing key 'tokenizer.ggml.tokens' (the {} tokenizer's vocabulary)", g.path(), model);
  }
  const Vocab v = read_vocab(g);
  const json j = model == "gpt2" ? byte_level_bpe(g, v) : sentencepiece_bpe(g, v);
  return j.dump();
}

Tokenizer gguf_tokenizer(const GgufFile& g) {
  return Tokenizer::from_json(gguf_tokenizer_json(g), g.path());
}

}  // namespace seedling
