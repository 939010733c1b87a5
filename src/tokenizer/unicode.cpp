#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace seedling::tok {

char32_t next_code_point(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t n = utf8_len(b);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b;
  }
  char32_t cp = b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Length of the valid sequence at s[i], or 0 when invalid; `prefix` gets the length of the longest prefix that
// could still start a valid sequence (the "maximal subpart" that one U+FFFD replaces).
static size_t valid_sequence(std::string_view s, size_t i, size_t& prefix) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  prefix = 1;
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char x = b(k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) return 0;
    prefix = k + 1;
  }
  return n;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t prefix;
    size_t n = valid_sequence(s, i, prefix);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void append_utf8_lossy(std::string& out, std::string_view s) {
  size_t i = 0, run = 0;
  while (i < s.size()) {
    size_t prefix;
    size_t n = valid_sequence(s, i, prefix);
    if (n) {
      i += n;
      continue;
    }
    out.append(s.substr(run, i - run));
    out += "\xEF\xBF\xBD";
    i += prefix;
    run = i;
  }
  out.append(s.substr(run));
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

static bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::string normalize_form(std::string_view s, NormalForm form) {
  if (is_ascii(s)) return std::string(s);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &dst,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) fail("tokenizer: Unicode normalization failed: {}", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(dst, &std::free);
  return std::string(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
}

std::string to_lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += (b >= 'A' && b <= 'Z') ? static_cast<char>(b + 32) : static_cast<char>(b);
      ++i;
      continue;
    }
    char32_t cp = next_code_point(s, i);
    if (cp == 0x130) {  // the one unconditional multi-char lowercase mapping: İ -> i + combining dot above
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

static ByteLevelTable make_byte_level_table() {
  ByteLevelTable t;
  t.char_to_byte.fill(-1);
  bool direct[256] = {};
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    char32_t cp = direct[b] ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
    append_utf8(t.byte_to_utf8[b], cp);
    t.char_to_byte[cp] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table = make_byte_level_table();
  return table;
}

}  // namespace seedling::tok
