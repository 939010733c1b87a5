// tokenizer/components.h - the stages of a Hugging Face tokenizer.json pipeline, each read from its JSON object
// and each doing exactly what HF `tokenizers` does for that "type":
//   text -> added tokens split out -> Normalizer -> PreTokenizer -> BPE model -> PostProcessor -> ids
//   ids -> tokens -> Decoder -> text
// A "type" we do not implement is an error naming it and the file; nothing is skipped silently.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace seedling::tok {

using Json = nlohmann::json;

// Reads a component: `file` names the tokenizer.json for error messages, `key` the JSON path of `j`.
struct JsonContext {
  std::string file;
  std::string key;
  std::string where() const { return file + ": " + key; }
};

// A `{"String": s}` or `{"Regex": r}` pattern (Split, Replace).
class Pattern {
 public:
  Pattern(const Json& j, const JsonContext& ctx);
  // Byte ranges of all non-overlapping matches, leftmost first.
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;
  std::string replace_all(std::string_view s, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

// ---- normalizers -------------------------------------------------------------------------------------------------
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const JsonContext& ctx);  // null JSON -> nullptr

// ---- pre-tokenizers ----------------------------------------------------------------------------------------------
// A piece of text on its way to the model. `at_start` is HF's `offsets_original().0 == 0`: Metaspace's "first"
// prepend scheme adds the replacement only to the piece that begins the input.
struct Piece {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped.
  virtual void split(std::vector<Piece>& pieces) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const JsonContext& ctx);

// ---- decoders ----------------------------------------------------------------------------------------------------
class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF's decode_chain: tokens in, tokens out; the final text is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // What decode_chain makes of one token in the middle of a long sequence, as raw bytes (no UTF-8 repair):
  // `joined` says an earlier step fused the tokens into one text, so that steps acting on the text's ends (Strip,
  // ByteFallback's whole-token match) leave a middle token alone; a step that fuses sets it.
  virtual void token_bytes(std::string& token, bool& joined) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const Json& j, const JsonContext& ctx);

// ---- post-processors ---------------------------------------------------------------------------------------------
// Adds the special tokens (BOS/EOS, CLS/SEP) around one sequence when add_special_tokens is asked for.
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const JsonContext& ctx);

// Small JSON readers that fail with the file and key.
const Json& json_at(const Json& j, const char* name, const JsonContext& ctx);
std::string json_string(const Json& j, const char* name, const JsonContext& ctx);
bool json_bool(const Json& j, const char* name, const JsonContext& ctx, bool fallback);
// The largest token id a tokenizer.json may name: 2^22 - 1, 16 times the largest public vocabulary (Gemma's 262,144
// ids). The tokenizer keeps tables indexed by id, so one huge id in a small file would allocate gigabytes; at the
// bound they take about 150 MB.
constexpr int64_t kMaxTokenId = (int64_t(1) << 22) - 1;
// `v` as a token id in [0, kMaxTokenId]; else an Error naming `where` (the key whose value it is) and the range.
int32_t json_token_id(const Json& v, const std::string& where);
std::string json_type(const Json& j, const JsonContext& ctx);
// A single-character string field (Metaspace replacement, Strip content).
char32_t json_char(const Json& j, const char* name, const JsonContext& ctx);

}  // namespace seedling::tok
