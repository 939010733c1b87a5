#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace seedling::tok {

Regex::Regex(const std::string& pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail("{}: regex {:?} does not compile at offset {}: {}", where, pattern, offset, reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

namespace {
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};
}  // namespace

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local MatchData md;
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("tokenizer: regex match failed with PCRE2 error {}", rc);
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    size_t start = ov[0], end = ov[1];
    out.emplace_back(start, end);
    if (end > start) {
      pos = end;
    } else {
      if (end >= s.size()) break;
      pos = end + utf8_len(static_cast<unsigned char>(s[end]));
    }
  }
}

}  // namespace seedling::tok
