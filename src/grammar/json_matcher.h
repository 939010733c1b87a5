// grammar/json_matcher.h - a byte-level pushdown matcher for one JSON value of a compiled schema (json_schema.h).
//
// The state is a set of threads (more than one only where anyOf leaves a choice open), each a stack of frames
// (value expected, object, key, array, string, number, literal, enum) kept as links in an arena, so a copy of a
// state is a few indices and a step adds at most a few links. Every state it accepts can still be completed: a
// comma is taken only when another key or item may follow, a key prefix only when it leads to a property not yet
// seen (or additional properties are allowed), a string only within its lengths, and nodes that admit no value are
// never entered. Strings are valid UTF-8 (no overlong forms or surrogates; \u escapes with surrogates paired).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/json_schema.h"

namespace seedling::grammar {

struct Frame {
  int32_t node = 0;
  uint8_t kind = 0;
  uint8_t phase = 0;
  uint16_t small = 0;      // key: the property chosen; number: digits in the current part; literal: which one
  uint32_t count = 0;      // string: code points; array: items begun; key, enum: trie node; literal: bytes matched
  uint8_t esc = 0;         // string: escape state
  uint8_t rem = 0;         // string: UTF-8 continuation bytes still due
  uint8_t lo = 0, hi = 0;  // string: the range of the next continuation byte
  uint16_t hex = 0;        // string: the \u digits so far
  uint64_t seen = 0;       // object: properties already written (and dead ones)
  bool operator==(const Frame&) const = default;
};

struct Link {
  Frame frame;
  int32_t below = -1;
};

struct Thread {
  int32_t top = -1;  // -1: the value is complete
  uint16_t ws = 0;   // whitespace run so far (0 none, 1 a space, 2 + n a newline and n indents)
};

// Links of the threads' stacks. Steps only append; a caller that knows links are unreferenced truncates.
struct Arena {
  std::vector<Link> links;
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const Grammar> grammar);

  // Takes `bytes` if the value can go on with them (the state unchanged and false otherwise).
  bool advance(std::string_view bytes);
  // Whether the value may end here (a top-level number or enum may also go on).
  bool can_end() const;
  // Whether it is complete and nothing may follow.
  bool done() const;
  // A whole text: accepted and complete.
  static bool matches(std::shared_ptr<const Grammar> grammar, std::string_view text);

  const Grammar& grammar() const { return *grammar_; }
  const Arena& arena() const { return arena_; }
  const std::vector<Thread>& threads() const { return threads_; }

  // One byte for every thread of `in` (links in `arena`), the surviving threads appended to `out` (deduplicated).
  static void step(const Grammar& g, Arena& arena, const Thread* in, size_t n, uint8_t c, std::vector<Thread>& out);
  static bool can_end(const Grammar& g, const Arena& arena, const Thread& t);

 private:
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  Arena arena_;
  std::vector<Thread> threads_, next_;
};

}  // namespace seedling::grammar
