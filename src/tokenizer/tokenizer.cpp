#include "tokenizer/tokenizer.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/components.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/unicode.h"

namespace seedling {

using tok::Json;
using tok::JsonContext;

namespace {

// Finds added tokens in text: leftmost match first, longest among those starting there (aho-corasick
// LeftmostLongest, as HF builds it), then HF's single_word / lstrip / rstrip adjustments.
class AddedTokenMatcher {
 public:
  struct Split {
    size_t start, end;
    int32_t id;  // -1 for text between tokens
  };

  void add(std::string pattern, const AddedToken* token) {
    if (pattern.empty()) return;
    by_first_byte_[static_cast<unsigned char>(pattern[0])].push_back({std::move(pattern), token});
  }
  void finalize() {
    for (auto& list : by_first_byte_) {
      std::stable_sort(list.begin(), list.end(),
                       [](const Entry& a, const Entry& b) { return a.pattern.size() > b.pattern.size(); });
    }
  }
  bool empty() const {
    for (const auto& l : by_first_byte_)
      if (!l.empty()) return false;
    return true;
  }

  void split(std::string_view s, std::vector<Split>& out) const {
    out.clear();
    size_t start_offset = 0, pos = 0;
    while (pos < s.size()) {
      const auto& candidates = by_first_byte_[static_cast<unsigned char>(s[pos])];
      const Entry* hit = nullptr;
      for (const Entry& e : candidates) {
        if (s.compare(pos, e.pattern.size(), e.pattern) == 0) {
          hit = &e;
          break;
        }
      }
      if (!hit) {
        ++pos;
        continue;
      }
      size_t start = pos, stop = pos + hit->pattern.size();
      pos = stop;
      const AddedToken& t = *hit->token;
      if (t.single_word) {
        bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
        bool stop_space = stop == s.size() || !starts_with_word(s.substr(stop));
        if (!start_space || !stop_space) continue;
      }
      if (t.lstrip) start = std::max(space_start_at_end(s.substr(0, start)), start_offset);
      if (t.rstrip) stop += space_len_at_start(s.substr(stop));
      if (start_offset < start) out.push_back({start_offset, start, -1});
      out.push_back({start, stop, t.id});
      start_offset = stop;
    }
    if (start_offset < s.size()) out.push_back({start_offset, s.size(), -1});
  }

 private:
  struct Entry {
    std::string pattern;
    const AddedToken* token;
  };
  static bool ends_with_word(std::string_view s) {
    if (s.empty()) return false;
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    return tok::is_word_char(tok::next_code_point(s, i));
  }
  static bool starts_with_word(std::string_view s) {
    if (s.empty()) return false;
    size_t i = 0;
    return tok::is_word_char(tok::next_code_point(s, i));
  }
  // Start of the whitespace run that ends `s` (s.size() when none).
  static size_t space_start_at_end(std::string_view s) {
    size_t end = s.size();
    while (end > 0) {
      size_t i = end - 1;
      while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
      size_t j = i;
      if (!tok::is_whitespace(tok::next_code_point(s, j))) break;
      end = i;
    }
    return end;
  }
  static size_t space_len_at_start(std::string_view s) {
    size_t i = 0, len = 0;
    while (i < s.size()) {
      if (!tok::is_whitespace(tok::next_code_point(s, i))) break;
      len = i;
    }
    return len;
  }
  std::vector<Entry> by_first_byte_[256];
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the tokenizer file", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

struct Tokenizer::State {
  std::string file;
  std::vector<AddedToken> added;
  std::vector<const AddedToken*> added_by_id;  // index = id
  std::unordered_map<std::string, int32_t, tok::StringHash, std::equal_to<>> added_by_content;
  std::unordered_set<std::string> special_contents;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;

  void encode_text(std::string text, bool at_start, std::vector<int32_t>& ids) const;
};

Tokenizer Tokenizer::from_file(const std::filesystem::path& path) {
  if (is_gguf_file(path.string())) return gguf_tokenizer(GgufFile(path.string()));  // tokenizer/gguf_vocab.h
  return from_json(read_file(path), path.string());
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& name) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON: {}", name, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object at the top", name);
  auto state = std::make_shared<State>();
  state->file = name;
  try {
    for (const char* key : {"truncation", "padding"}) {
      if (j.contains(key) && !j.at(key).is_null()) {
        fail("{}: \"{}\" is set; truncation and padding are not supported (expected null)", name, key);
      }
    }
    const Json& model = tok::json_at(j, "model", {name, "tokenizer"});
    JsonContext model_ctx{name, "model"};
    std::string type = model.contains("type") ? tok::json_string(model, "type", model_ctx) : "BPE";
    if (type != "BPE") fail("{}: model type \"{}\" is not supported (supported: BPE)", name, type);
    state->model = std::make_unique<tok::BpeModel>(model, model_ctx);
    state->normalizer = tok::make_normalizer(j.value("normalizer", Json()), {name, "normalizer"});
    state->pre_tokenizer = tok::make_pre_tokenizer(j.value("pre_tokenizer", Json()), {name, "pre_tokenizer"});
    state->post_processor = tok::make_post_processor(j.value("post_processor", Json()), {name, "post_processor"});
    state->decoder = tok::make_decoder(j.value("decoder", Json()), {name, "decoder"});

    const Json& added = j.value("added_tokens", Json::array());
    if (!added.is_array()) fail("{}: added_tokens: expected a list", name);
    state->added.reserve(added.size());
    for (size_t i = 0; i < added.size(); ++i) {
      JsonContext ctx{name, "added_tokens[" + std::to_string(i) + "]"};
      const Json& a = added[i];
      AddedToken t;
      t.id = tok::json_token_id(tok::json_at(a, "id", ctx), ctx.where() + ".id");
      t.content = tok::json_string(a, "content", ctx);
      t.special = tok::json_bool(a, "special", ctx, false);
      t.lstrip = tok::json_bool(a, "lstrip", ctx, false);
      t.rstrip = tok::json_bool(a, "rstrip", ctx, false);
      t.single_word = tok::json_bool(a, "single_word", ctx, false);
      t.normalized = tok::json_bool(a, "normalized", ctx, !t.special);
      if (tok::find_invalid_utf8(t.content) != std::string::npos) fail("{}.content: not valid UTF-8", ctx.where());
      state->added.push_back(std::move(t));
    }
  } catch (const Json::exception& e) {
    fail("{}: unexpected JSON value: {}", name, e.what());
  }
  for (const AddedToken& t : state->added) {
    if (static_cast<size_t>(t.id) >= state->added_by_id.size()) state->added_by_id.resize(t.id + 1, nullptr);
    state->added_by_id[t.id] = &t;
    state->added_by_content[t.content] = t.id;
    if (t.special) state->special_contents.insert(t.content);
    if (t.normalized) {
      std::string pattern = t.content;
      if (state->normalizer) state->normalizer->normalize(pattern);
      state->normalized_matcher.add(std::move(pattern), &t);
    } else {
      state->raw_matcher.add(t.content, &t);
    }
  }
  state->raw_matcher.finalize();
  state->normalized_matcher.finalize();
  return Tokenizer(std::move(state));
}

void Tokenizer::State::encode_text(std::string text, bool at_start, std::vector<int32_t>& ids) const {
  if (normalizer) normalizer->normalize(text);
  thread_local std::vector<AddedTokenMatcher::Split> splits;
  std::vector<tok::Piece> pieces;
  auto run = [&](std::string_view s, bool first) {
    pieces.clear();
    pieces.push_back({std::string(s), first});
    if (pre_tokenizer) pre_tokenizer->split(pieces);
    for (const tok::Piece& p : pieces) model->tokenize(p.text, ids);
  };
  if (normalized_matcher.empty()) {
    if (!text.empty()) run(text, at_start);
    return;
  }
  std::vector<AddedTokenMatcher::Split> local;
  normalized_matcher.split(text, local);
  for (const auto& sp : local) {
    if (sp.id >= 0) {
      ids.push_back(sp.id);
    } else {
      run(std::string_view(text).substr(sp.start, sp.end - sp.start), at_start && sp.start == 0);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const State& s = *state_;
  size_t bad = tok::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    fail("tokenizer ({}): the input text is not valid UTF-8 (bad byte 0x{:02X} at offset {})", s.file,
         static_cast<unsigned>(static_cast<unsigned char>(text[bad])), bad);
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedTokenMatcher::Split> splits;
  s.raw_matcher.split(text, splits);
  for (const auto& sp : splits) {
    if (sp.id >= 0) {
      ids.push_back(sp.id);
    } else {
      s.encode_text(std::string(text.substr(sp.start, sp.end - sp.start)), sp.start == 0, ids);
    }
  }
  if (add_special_tokens && s.post_processor) s.post_processor->process(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const State& s = *state_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* t = nullptr;
    if (id >= 0 && static_cast<size_t>(id) < s.added_by_id.size() && s.added_by_id[id]) {
      t = &s.added_by_id[id]->content;
    } else {
      t = s.model->id_to_token(id);
    }
    if (!t) continue;
    if (skip_special_tokens && s.special_contents.count(*t)) continue;
    tokens.push_back(*t);
  }
  if (!s.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  s.decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = state_->added_by_content.find(token);
  if (it != state_->added_by_content.end()) return it->second;
  return state_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const State& s = *state_;
  if (id >= 0 && static_cast<size_t>(id) < s.added_by_id.size() && s.added_by_id[id]) return s.added_by_id[id]->content;
  const std::string* t = s.model->id_to_token(id);
  return t ? *t : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  const State& s = *state_;
  return id >= 0 && static_cast<size_t>(id) < s.added_by_id.size() && s.added_by_id[id] && s.added_by_id[id]->special;
}

TokenBytes Tokenizer::token_bytes(int32_t id) const {
  const State& s = *state_;
  if (id >= 0 && static_cast<size_t>(id) < s.added_by_id.size() && s.added_by_id[id]) {
    return {s.added_by_id[id]->content, false};
  }
  const std::string* t = s.model->id_to_token(id);
  if (!t) return {};
  TokenBytes out{*t, id != s.model->unk_id()};
  if (!s.decoder) {
    out.bytes.insert(0, 1, ' ');  // decode() joins the tokens with spaces when there is no decoder
    return out;
  }
  bool joined = false;
  s.decoder->token_bytes(out.bytes, joined);
  return out;
}

size_t Tokenizer::vocab_size() const {
  return std::max(static_cast<size_t>(state_->model->max_id() + 1), state_->added_by_id.size());
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return state_->added;
}

// ---- streaming ----

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

static bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// "<0xNN>": a byte-fallback token. A byte group is decoded as a whole (valid UTF-8, or one U+FFFD per byte), so a
// later byte can change how the earlier ones read: nothing is shown while the group may still grow.
static bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  // An id that decodes to nothing (unknown, or a skipped special token) changes nothing, not even a byte group.
  std::string token = tokenizer_->id_to_token(id);
  if (token.empty() || (skip_special_tokens_ && tokenizer_->is_special(id)) || is_byte_token(token)) return {};
  std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  if (text.size() <= prefix_text_.size() || ends_with_replacement(text) ||
      text.compare(0, prefix_text_.size(), prefix_text_) != 0) {
    return {};
  }
  std::string out = text.substr(prefix_text_.size());
  // Keep the last shown ids as context, so decoders that treat the first token specially (Strip, Metaspace)
  // see the same neighbours the whole decode sees.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(read_));
  read_ = ids_.size();
  prefix_text_ = tokenizer_->decode(ids_, skip_special_tokens_);
  return out;
}

std::string StreamDecoder::finish() {
  std::string text = tokenizer_->decode(ids_, skip_special_tokens_);
  std::string out;
  if (text.size() > prefix_text_.size() && text.compare(0, prefix_text_.size(), prefix_text_) == 0) {
    out = text.substr(prefix_text_.size());
  }
  ids_.clear();
  read_ = 0;
  prefix_text_.clear();
  return out;
}

std::filesystem::path find_tokenizer_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    auto file = path / "tokenizer.json";
    if (!std::filesystem::is_regular_file(file, ec)) {
      // Kimi-K2 ships a tiktoken BPE (tiktoken.model + tokenization_kimi.py), which this reader cannot run.
      const auto tiktoken = path / "tiktoken.model";
      if (std::filesystem::is_regular_file(tiktoken, ec)) {
        fail("{}: a tiktoken tokenizer, which Seedling cannot read (only tokenizer.json): give token ids (--ids)",
             tiktoken.string());
      }
      fail("{}: no tokenizer.json in this folder", path.string());
    }
    return file;
  }
  if (std::filesystem::is_regular_file(path, ec)) return path;
  fail("{}: not a model folder or a tokenizer.json file", path.string());
}

}  // namespace seedling
