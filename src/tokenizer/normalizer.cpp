// Normalizers: NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, Strip, Sequence.
#include "core/error.h"
#include "tokenizer/components.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(std::string& s) const override { s = normalize_form(s, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = to_lowercase(s); }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s = prepended(prepend_, s);
  }

 private:
  std::string prepend_;
};

class Replace : public Normalizer {
 public:
  Replace(const Json& j, const JsonContext& ctx)
      : pattern_(json_at(j, "pattern", ctx), {ctx.file, ctx.key + ".pattern"}),
        content_(json_string(j, "content", ctx)) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// Strips whitespace (Rust char::is_whitespace) on the left and/or right.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      begin = s.size();
      size_t i = 0;
      while (i < s.size()) {
        size_t at = i;
        if (!is_whitespace(next_code_point(s, i))) {
          begin = at;
          break;
        }
      }
    }
    if (right_) {
      size_t i = begin, last_end = begin;
      while (i < end) {
        char32_t cp = next_code_point(s, i);
        if (!is_whitespace(cp)) last_end = i;
      }
      end = last_end;
    }
    s = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& s) const override {
    for (const auto& n : steps_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const JsonContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = json_type(j, ctx);
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormalForm::kNFC);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormalForm::kNFKC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormalForm::kNFD);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(json_string(j, "prepend", ctx));
  if (type == "Replace") return std::make_unique<Replace>(j, ctx);
  if (type == "Strip") {
    return std::make_unique<Strip>(json_bool(j, "strip_left", ctx, false), json_bool(j, "strip_right", ctx, false));
  }
  if (type == "Sequence") {
    const Json& list = json_at(j, "normalizers", ctx);
    if (!list.is_array()) fail("{}.normalizers: expected a list", ctx.where());
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto n = make_normalizer(list[i], {ctx.file, ctx.key + ".normalizers[" + std::to_string(i) + "]"});
      if (n) steps.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  fail(
      "{}: normalizer type \"{}\" is not supported (supported: NFC, NFKC, NFD, NFKD, Lowercase, Prepend, Replace, "
      "Strip, Sequence)",
      ctx.where(), type);
}

}  // namespace seedling::tok
