// tokenizer/tokenizer.h - a Hugging Face tokenizer.json, encoded and decoded exactly as HF `tokenizers` does.
//
// Encode: added tokens are split out of the raw text first (those with normalized=false), each remaining stretch is
// normalized, tokens with normalized=true are split out of the normalized text, the rest is pre-tokenized and each
// pre-token goes through the BPE model; with add_special_tokens the post-processor adds BOS/EOS.
// Decode: ids -> tokens (added tokens first) -> decoder chain -> text.
// What the file asks for and we do not implement is a seedling::Error naming the component and the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seedling {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// What one token stands for in the text: `bytes` exactly as decode() writes them for a token in the middle of a
// sequence, before any UTF-8 repair (a ByteLevel token's bytes through the GPT-2 map reversed, a `<0xNN>` byte-fallback
// token its byte, Metaspace's marker a space), so a token that holds part of a character holds just those bytes.
// `text` is false for added tokens (special or not), the unknown token and ids without a token: they are markers,
// not text spelt byte by byte, and constrained output never picks them.
struct TokenBytes {
  std::string bytes;
  bool text = false;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file, or a GGUF file (its tokenizer.ggml.* metadata: tokenizer/gguf_vocab.h).
  static Tokenizer from_file(const std::filesystem::path& path);
  // `name` stands for the file in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& name);

  // Throws seedling::Error when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Unknown ids are skipped, as HF does; invalid UTF-8 from byte tokens becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  std::string id_to_token(int32_t id) const;          // "" when absent
  bool is_special(int32_t id) const;
  TokenBytes token_bytes(int32_t id) const;
  size_t vocab_size() const;  // largest id + 1, over the model vocab and the added tokens
  const std::vector<AddedToken>& added_tokens() const;

  struct State;

 private:
  explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Streaming detokenization: feed ids as they are generated, get back the text that is now final. Text is held back
// while it ends in an incomplete UTF-8 character (or byte-fallback bytes that may still complete one), so a
// character is never split; the concatenation of everything push() and finish() return equals decode(all ids).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string finish();  // whatever is still held back, e.g. a truly invalid byte sequence as U+FFFD

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // the window: ids_[0, read_) are already shown
  size_t read_ = 0;
  std::string prefix_text_;  // decode(ids_[0, read_))
};

// The tokenizer.json of a model: `path` is a model folder (tokenizer.json inside) or a tokenizer.json file (or a
// GGUF file, returned as it is: from_file reads its metadata).
std::filesystem::path find_tokenizer_file(const std::filesystem::path& path);

}  // namespace seedling
