// Pre-tokenizers: Split, ByteLevel, Metaspace, Digits, Sequence.
#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t start, end;
  bool match;
};

// HF's NormalizedString::split: `spans` cover the piece in order; the behaviour decides what becomes a piece.
void apply_behavior(const Piece& piece, std::vector<Span>& spans, Behavior behavior, std::vector<Piece>& out) {
  std::vector<std::pair<size_t, size_t>> keep;
  keep.reserve(spans.size());
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.match) keep.emplace_back(s.start, s.end);
      break;
    case Behavior::kIsolated:
      for (const Span& s : spans) keep.emplace_back(s.start, s.end);
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.match && !previous_match && !keep.empty()) {
          keep.back().second = s.end;
        } else {
          keep.emplace_back(s.start, s.end);
        }
        previous_match = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.match && !previous_match && !keep.empty()) {
          keep.back().first = s.start;
        } else {
          keep.emplace_back(s.start, s.end);
        }
        previous_match = s.match;
      }
      std::reverse(keep.begin(), keep.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.match == previous_match && !keep.empty()) {
          keep.back().second = s.end;
        } else {
          keep.emplace_back(s.start, s.end);
        }
        previous_match = s.match;
      }
      break;
    }
  }
  for (auto [a, b] : keep) {
    if (b > a) out.push_back({piece.text.substr(a, b - a), piece.at_start && a == 0});
  }
}

// Turns match ranges into spans that cover all of `n` bytes.
void spans_from_matches(const std::vector<std::pair<size_t, size_t>>& matches, size_t n, bool invert,
                        std::vector<Span>& spans) {
  spans.clear();
  size_t prev = 0;
  for (auto [a, b] : matches) {
    if (prev != a) spans.push_back({prev, a, invert});
    spans.push_back({a, b, !invert});
    prev = b;
  }
  if (prev != n) spans.push_back({prev, n, invert});
}

Behavior parse_behavior(const Json& j, const JsonContext& ctx) {
  std::string b = json_string(j, "behavior", ctx);
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  fail("{}.behavior: \"{}\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
       ctx.where(), b);
}

class Split : public PreTokenizer {
 public:
  Split(const Json& j, const JsonContext& ctx)
      : pattern_(json_at(j, "pattern", ctx), {ctx.file, ctx.key + ".pattern"}),
        behavior_(parse_behavior(j, ctx)),
        invert_(json_bool(j, "invert", ctx, false)) {}
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Span> spans;
    for (const Piece& p : pieces) {
      matches.clear();
      pattern_.find_all(p.text, matches);
      spans_from_matches(matches, p.text.size(), invert_, spans);
      apply_behavior(p, spans, behavior_, out);
    }
    pieces = std::move(out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(const Json& j, const JsonContext& ctx)
      : add_prefix_space_(json_bool(j, "add_prefix_space", ctx, true)),
        use_regex_(json_bool(j, "use_regex", ctx, true)) {
    if (use_regex_) regex_ = std::make_unique<Regex>(kGpt2Regex, ctx.where());
  }
  void split(std::vector<Piece>& pieces) const override {
    const ByteLevelTable& table = byte_level_table();
    std::vector<Piece> out;
    out.reserve(pieces.size());
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Span> spans;
    std::vector<Piece> splits;
    for (Piece& p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text = prepended(" ", p.text);
      splits.clear();
      if (use_regex_) {
        matches.clear();
        regex_->find_all(p.text, matches);
        spans_from_matches(matches, p.text.size(), false, spans);
        apply_behavior(p, spans, Behavior::kIsolated, splits);
      } else if (!p.text.empty()) {
        splits.push_back(std::move(p));
      }
      for (Piece& s : splits) {
        std::string mapped;
        mapped.reserve(s.text.size() * 2);
        for (char c : s.text) mapped += table.byte_to_utf8[static_cast<unsigned char>(c)];
        out.push_back({std::move(mapped), s.at_start});
      }
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { kFirst, kAlways, kNever };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(const Json& j, const JsonContext& ctx) : split_(json_bool(j, "split", ctx, true)) {
    append_utf8(replacement_, json_char(j, "replacement", ctx));
    std::string scheme = j.contains("prepend_scheme") ? json_string(j, "prepend_scheme", ctx) : "always";
    if (scheme == "first") {
      scheme_ = PrependScheme::kFirst;
    } else if (scheme == "always") {
      scheme_ = PrependScheme::kAlways;
    } else if (scheme == "never") {
      scheme_ = PrependScheme::kNever;
    } else {
      fail("{}.prepend_scheme: \"{}\" is not one of first, always, never", ctx.where(), scheme);
    }
  }
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    std::vector<Span> spans;
    for (Piece& p : pieces) {
      std::string t;
      t.reserve(p.text.size() + 8);
      for (char c : p.text) {
        if (c == ' ') {
          t += replacement_;
        } else {
          t += c;
        }
      }
      bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start))) {
        t = prepended(replacement_, t);
      }
      Piece q{std::move(t), p.at_start};
      if (!split_) {
        if (!q.text.empty()) out.push_back(std::move(q));
        continue;
      }
      spans.clear();
      size_t prev = 0, pos = 0;
      while ((pos = q.text.find(replacement_, pos)) != std::string::npos) {
        if (prev != pos) spans.push_back({prev, pos, false});
        spans.push_back({pos, pos + replacement_.size(), true});
        pos += replacement_.size();
        prev = pos;
      }
      if (prev != q.text.size()) spans.push_back({prev, q.text.size(), false});
      apply_behavior(q, spans, Behavior::kMergedWithNext, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_ = PrependScheme::kAlways;
  bool split_;
};

class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    std::vector<Span> spans;
    for (const Piece& p : pieces) {
      // HF's char-predicate pattern: every numeric char is its own match.
      spans.clear();
      size_t i = 0, last = 0;
      while (i < p.text.size()) {
        size_t at = i;
        char32_t cp = next_code_point(p.text, i);
        if (is_numeric(cp)) {
          if (last < at) spans.push_back({last, at, false});
          spans.push_back({at, i, true});
          last = i;
        }
      }
      if (last < p.text.size()) spans.push_back({last, p.text.size(), false});
      apply_behavior(p, spans, individual_ ? Behavior::kIsolated : Behavior::kContiguous, out);
    }
    pieces = std::move(out);
  }

 private:
  bool individual_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const JsonContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, ctx);
  if (type == "Split") return std::make_unique<Split>(j, ctx);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j, ctx);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j, ctx);
  if (type == "Digits") return std::make_unique<Digits>(json_bool(j, "individual_digits", ctx, false));
  if (type == "Sequence") {
    const Json& list = json_at(j, "pretokenizers", ctx);
    if (!list.is_array()) fail("{}.pretokenizers: expected a list", ctx.where());
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_pre_tokenizer(list[i], {ctx.file, ctx.key + ".pretokenizers[" + std::to_string(i) + "]"});
      if (p) steps.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  fail("{}: pre-tokenizer type \"{}\" is not supported (supported: Split, ByteLevel, Metaspace, Digits, Sequence)",
       ctx.where(), type);
}

}  // namespace seedling::tok
