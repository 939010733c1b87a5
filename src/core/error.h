// core/error.h - the one error type of Seedling.
//
// Every failure that a user can cause (a bad file, a bad flag, an unsupported config value) throws
// seedling::Error with one line that names the file, key or tensor and says what was expected. The CLI prints
// that line and exits 1. Programming errors use SEEDLING_CHECK, which also throws, so a broken invariant is
// a clear message instead of a crash.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace seedling {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace seedling

#define SEEDLING_CHECK(cond, ...)                                                                             \
  do {                                                                                                        \
    if (!(cond)) {                                                                                            \
      ::seedling::fail("internal check failed at {}:{}: {}", __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                                                         \
  } while (0)
