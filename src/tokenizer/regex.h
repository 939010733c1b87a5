// tokenizer/regex.h - a compiled PCRE2 pattern (UTF + Unicode properties, JIT) that lists its matches the way
// the Oniguruma iterator in HF `tokenizers` does: leftmost, non-overlapping, an empty match advances one char.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seedling::tok {

class Regex {
 public:
  // `where` names the file and component for the error a bad pattern raises.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [start, end) of every match in `s` (s must be valid UTF-8).
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace seedling::tok
