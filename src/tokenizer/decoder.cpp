// Decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence) and post-processors
// (TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence).
#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {
namespace {

// Maps each char back to its byte; a token with a char outside the table keeps its own UTF-8 bytes. The bytes of
// all tokens are then read as UTF-8 with U+FFFD for invalid sequences, into one token.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const ByteLevelTable& table = byte_level_table();
    std::string bytes, tok_bytes;
    for (const std::string& t : tokens) {
      tok_bytes.clear();
      bool ok = true;
      size_t i = 0;
      while (i < t.size()) {
        char32_t cp = next_code_point(t, i);
        if (cp >= table.char_to_byte.size() || table.char_to_byte[cp] < 0) {
          ok = false;
          break;
        }
        tok_bytes += static_cast<char>(table.char_to_byte[cp]);
      }
      bytes += ok ? tok_bytes : t;
    }
    std::string text;
    append_utf8_lossy(text, bytes);
    tokens.assign(1, std::move(text));
  }
  void token_bytes(std::string& t, bool& joined) const override {
    const ByteLevelTable& table = byte_level_table();
    std::string bytes;
    size_t i = 0;
    while (i < t.size()) {
      char32_t cp = next_code_point(t, i);
      if (cp >= table.char_to_byte.size() || table.char_to_byte[cp] < 0) {
        bytes = t;  // a char outside the table: the token keeps its own bytes, as decode_chain does
        break;
      }
      bytes += static_cast<char>(table.char_to_byte[cp]);
    }
    t = std::move(bytes);
    joined = true;
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(const Json& j, const JsonContext& ctx) : replacement_(json_char(j, "replacement", ctx)) {
    std::string scheme = j.contains("prepend_scheme") ? json_string(j, "prepend_scheme", ctx) : "always";
    if (scheme != "first" && scheme != "always" && scheme != "never") {
      fail("{}.prepend_scheme: \"{}\" is not one of first, always, never", ctx.where(), scheme);
    }
    never_ = scheme == "never";
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      out.reserve(t.size());
      size_t i = 0;
      while (i < t.size()) {
        size_t at = i;
        char32_t cp = next_code_point(t, i);
        if (cp == replacement_) {
          if (k == 0 && !never_) continue;
          out += ' ';
        } else {
          out.append(t, at, i - at);
        }
      }
      tokens[k] = std::move(out);
    }
  }
  void token_bytes(std::string& t, bool&) const override {  // not the first token: every replacement is a space
    std::string out;
    size_t i = 0;
    while (i < t.size()) {
      size_t at = i;
      if (next_code_point(t, i) == replacement_) {
        out += ' ';
      } else {
        out.append(t, at, i - at);
      }
    }
    t = std::move(out);
  }

 private:
  char32_t replacement_;
  bool never_ = false;
};

// "<0xNN>" -> the byte, as Rust's u8::from_str_radix(&token[3..5], 16) reads it.
bool parse_byte_token(const std::string& t, unsigned char& byte) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  int hi = t[3] == '+' ? 0 : hex(t[3]);
  int lo = hex(t[4]);
  if (hi < 0 || lo < 0) return false;
  byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (find_invalid_utf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      unsigned char b;
      if (parse_byte_token(t, b)) {
        pending += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  void token_bytes(std::string& t, bool& joined) const override {
    unsigned char b;
    if (!joined && parse_byte_token(t, b)) t.assign(1, static_cast<char>(b));
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
  void token_bytes(std::string&, bool& joined) const override { joined = true; }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(const Json& j, const JsonContext& ctx) : content_(json_char(j, "content", ctx)) {
    start_ = json_at(j, "start", ctx).get<size_t>();
    stop_ = json_at(j, "stop", ctx).get<size_t>();
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) strip(t);
  }
  // Strip acts on each token; after a fuse the one token is the whole text, whose ends a middle token is not.
  void token_bytes(std::string& t, bool& joined) const override {
    if (!joined) strip(t);
  }

 private:
  void strip(std::string& t) const {
    std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
    size_t i = 0;
    while (i < t.size()) {
      size_t at = i;
      chars.emplace_back(at, next_code_point(t, i));
    }
    size_t start_cut = 0;
    for (size_t k = 0; k < start_ && k < chars.size(); ++k) {
      if (chars[k].second != content_) break;
      start_cut = k + 1;
    }
    size_t stop_cut = chars.size();
    for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
      size_t index = chars.size() - k - 1;
      if (chars[index].second != content_) break;
      stop_cut = index;
    }
    if (stop_cut <= start_cut) {
      t.clear();
      return;
    }
    size_t a = start_cut < chars.size() ? chars[start_cut].first : t.size();
    size_t b = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
    t = t.substr(a, b - a);
  }

  char32_t content_;
  size_t start_ = 0, stop_ = 0;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const Json& j, const JsonContext& ctx)
      : pattern_(json_at(j, "pattern", ctx), {ctx.file, ctx.key + ".pattern"}),
        content_(json_string(j, "content", ctx)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }
  void token_bytes(std::string& t, bool&) const override { t = pattern_.replace_all(t, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : steps_) d->decode_chain(tokens);
  }
  void token_bytes(std::string& t, bool& joined) const override {
    for (const auto& d : steps_) d->token_bytes(t, joined);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// ---- post-processors ----

class AroundProcessor : public PostProcessor {
 public:
  AroundProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class NoOpProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : steps_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// TemplateProcessing "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, ...].
std::unique_ptr<PostProcessor> make_template(const Json& j, const JsonContext& ctx) {
  const Json& single = json_at(j, "single", ctx);
  const Json& specials = json_at(j, "special_tokens", ctx);
  if (!single.is_array()) fail("{}.single: expected a list of pieces", ctx.where());
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const Json& piece : single) {
    if (piece.contains("Sequence")) {
      if (seen_sequence) fail("{}.single: the sequence appears twice", ctx.where());
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      std::string name = json_string(piece.at("SpecialToken"), "id", ctx);
      if (!specials.contains(name)) fail("{}.special_tokens: no entry for \"{}\"", ctx.where(), name);
      const Json& ids = json_at(specials.at(name), "ids", ctx);
      if (!ids.is_array()) fail("{}.special_tokens[\"{}\"].ids: expected a list of token ids", ctx.where(), name);
      for (const Json& id : ids) {
        (seen_sequence ? after : before)
            .push_back(json_token_id(id, fmt::format("{}.special_tokens[\"{}\"].ids", ctx.where(), name)));
      }
    } else {
      fail("{}.single: expected SpecialToken or Sequence pieces", ctx.where());
    }
  }
  if (!seen_sequence) fail("{}.single: no $A sequence", ctx.where());
  return std::make_unique<AroundProcessor>(std::move(before), std::move(after));
}

// Roberta/Bert: {"sep": ["</s>", 2], "cls": ["<s>", 0]} -> cls $A sep.
int32_t pair_id(const Json& j, const char* name, const JsonContext& ctx) {
  const Json& v = json_at(j, name, ctx);
  if (!v.is_array() || v.size() != 2) fail("{}.{}: expected [token, id]", ctx.where(), name);
  return json_token_id(v[1], fmt::format("{}.{}[1]", ctx.where(), name));
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const JsonContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, ctx);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j, ctx);
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(j, ctx);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j, ctx);
  if (type == "Sequence") {
    const Json& list = json_at(j, "decoders", ctx);
    if (!list.is_array()) fail("{}.decoders: expected a list", ctx.where());
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto d = make_decoder(list[i], {ctx.file, ctx.key + ".decoders[" + std::to_string(i) + "]"});
      if (d) steps.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  fail(
      "{}: decoder type \"{}\" is not supported (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, "
      "Replace, Sequence)",
      ctx.where(), type);
}

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const JsonContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, ctx);
  if (type == "TemplateProcessing") return make_template(j, ctx);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();  // only moves offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    return std::make_unique<AroundProcessor>(std::vector<int32_t>{pair_id(j, "cls", ctx)},
                                             std::vector<int32_t>{pair_id(j, "sep", ctx)});
  }
  if (type == "Sequence") {
    const Json& list = json_at(j, "processors", ctx);
    if (!list.is_array()) fail("{}.processors: expected a list", ctx.where());
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_post_processor(list[i], {ctx.file, ctx.key + ".processors[" + std::to_string(i) + "]"});
      if (p) steps.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  fail(
      "{}: post-processor type \"{}\" is not supported (supported: TemplateProcessing, ByteLevel, "
      "RobertaProcessing, BertProcessing, Sequence)",
      ctx.where(), type);
}

}  // namespace seedling::tok
