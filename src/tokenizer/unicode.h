// tokenizer/unicode.h - the UTF-8 and Unicode pieces the tokenizer needs, each matching what Hugging Face
// `tokenizers` (Rust) does: char::is_whitespace, char::is_numeric, String::from_utf8_lossy, the GPT-2 byte-to-char
// table, and the four Unicode normalization forms (through libutf8proc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace seedling::tok {

// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
inline size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);

// `head` followed by `tail` (std::string::insert(0, ...) trips GCC 12's -Wrestrict false positive).
inline std::string prepended(std::string_view head, std::string_view tail) {
  std::string out;
  out.reserve(head.size() + tail.size());
  out.append(head);
  out.append(tail);
  return out;
}

// Byte offset of the first invalid byte, or npos when `s` is valid UTF-8 (no surrogates, no overlongs).
size_t find_invalid_utf8(std::string_view s);

// Appends `bytes` to `out`, replacing each maximal invalid subsequence by U+FFFD (Rust's from_utf8_lossy).
void append_utf8_lossy(std::string& out, std::string_view bytes);

bool is_whitespace(char32_t cp);  // Rust char::is_whitespace (the White_Space property)
bool is_numeric(char32_t cp);     // Rust char::is_numeric (general categories Nd, Nl, No)
bool is_word_char(char32_t cp);   // the regex class \w: letters, marks, Nd, Pc

enum class NormalForm { kNFC, kNFKC, kNFD, kNFKD };
std::string normalize_form(std::string_view s, NormalForm form);
std::string to_lowercase(std::string_view s);  // Rust char::to_lowercase on each code point

// GPT-2's reversible map from each byte to a printable code point ("Ġ" for the space).
struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // UTF-8 of the code point each byte maps to
  std::array<int16_t, 324> char_to_byte;      // code point -> byte, -1 where the code point is not in the map
};
const ByteLevelTable& byte_level_table();

}  // namespace seedling::tok
