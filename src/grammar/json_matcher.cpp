#include "grammar/json_matcher.h"

#include <algorithm>

namespace seedling::grammar {

namespace {

enum Kind : uint8_t { kValue, kObj, kKey, kArr, kStr, kNum, kLit, kEnum };
enum ObjPhase : uint8_t { kObjOpen, kObjAfterKey, kObjAfterValue, kObjComma };
enum ArrPhase : uint8_t { kArrOpen, kArrAfterValue };
enum NumPhase : uint8_t { kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp };

constexpr uint16_t kAdditionalKey = 0xFFFF;
constexpr uint32_t kOffTrie = UINT32_MAX;
constexpr uint16_t kMaxIndent = 20;
constexpr uint16_t kMaxIntDigits = 16, kMaxFracDigits = 16, kMaxExpDigits = 2;  // below 1e116: a finite double
constexpr size_t kMaxThreads = 64;
constexpr const char* kLiterals[3] = {"true", "false", "null"};
constexpr uint8_t kLiteralSize[3] = {4, 5, 4};

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whitespace between tokens: "", one space, or a newline and at most kMaxIndent spaces or tabs.
bool take_ws(Thread& t, uint8_t c) {
  if (t.ws == 0) {
    if (c == ' ') return t.ws = 1, true;
    if (c == '\n') return t.ws = 2, true;
    return false;
  }
  if (t.ws >= 2 && t.ws < 2 + kMaxIndent && (c == ' ' || c == '\t')) return ++t.ws, true;
  return false;
}

enum StrResult { kReject, kMid, kCharStart, kClose };

// One byte of a JSON string's body (after the opening quote).
StrResult string_byte(Frame& f, uint8_t c) {
  if (f.rem > 0) {
    if (c < f.lo || c > f.hi) return kReject;
    --f.rem;
    f.lo = 0x80;
    f.hi = 0xBF;
    return kMid;
  }
  switch (f.esc) {
    case 0:
      if (c == '"') return kClose;
      if (c == '\\') return f.esc = 1, kCharStart;
      if (c < 0x20) return kReject;
      if (c < 0x80) return kCharStart;
      f.lo = 0x80;
      f.hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) {
        f.rem = 1;
      } else if (c >= 0xE0 && c <= 0xEF) {
        f.rem = 2;
        if (c == 0xE0) f.lo = 0xA0;  // no overlong forms
        if (c == 0xED) f.hi = 0x9F;  // no surrogates
      } else if (c >= 0xF0 && c <= 0xF4) {
        f.rem = 3;
        if (c == 0xF0) f.lo = 0x90;
        if (c == 0xF4) f.hi = 0x8F;  // nothing above U+10FFFF
      } else {
        return kReject;
      }
      return kCharStart;
    case 1:
      if (c == 'u') return f.esc = 2, f.hex = 0, kMid;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
        return f.esc = 0, kMid;
      }
      return kReject;
    case 2:
    case 3:
    case 4:
    case 5: {
      const int v = hex_value(c);
      if (v < 0) return kReject;
      f.hex = uint16_t(f.hex * 16 + v);
      if (f.esc == 3 && f.hex >= 0xDC && f.hex <= 0xDF) return kReject;  // a low surrogate with no high one before
      if (f.esc < 5) return ++f.esc, kMid;
      f.esc = f.hex >= 0xD800 && f.hex <= 0xDBFF ? 6 : 0;  // a high surrogate: its low one must follow
      return kMid;
    }
    case 6:
      return c == '\\' ? (f.esc = 7, kMid) : kReject;
    case 7:
      return c == 'u' ? (f.esc = 8, kMid) : kReject;
    case 8:
      return c == 'd' || c == 'D' ? (f.esc = 9, kMid) : kReject;
    case 9: {
      const int v = hex_value(c);
      return v >= 0xC ? (f.esc = 10, kMid) : kReject;
    }
    case 10:
      return hex_value(c) >= 0 ? (f.esc = 11, kMid) : kReject;
    case 11:
      return hex_value(c) >= 0 ? (f.esc = 0, kMid) : kReject;
  }
  return kReject;
}

struct Stepper {
  const Grammar& g;
  Arena& a;
  std::vector<Thread>& out;

  int32_t push(int32_t below, const Frame& f) {
    a.links.push_back({f, below});
    return int32_t(a.links.size() - 1);
  }
  // The top replaced by `f` (the same link when nothing changed).
  int32_t replace(int32_t top, const Frame& f) {
    if (a.links[size_t(top)].frame == f) return top;
    return push(a.links[size_t(top)].below, f);
  }
  static Frame value_frame(int32_t node) {
    Frame f;
    f.node = node;
    f.kind = kValue;
    return f;
  }
  bool key_possible(const SchemaNode& n, uint64_t seen) const {
    if (n.additional >= 0) return true;
    return n.key_trie >= 0 && (g.tries[size_t(n.key_trie)].below & ~seen) != 0;
  }
  bool required_met(const SchemaNode& n, uint64_t seen) const { return (n.required & ~seen) == 0; }

  void run(Thread t, uint8_t c) {
    const bool ws = is_ws(c);
    if (!ws) t.ws = 0;
    for (;;) {
      if (t.top < 0) return;
      Frame f = a.links[size_t(t.top)].frame;
      const SchemaNode& n = g.nodes[size_t(f.node)];
      if (ws && (f.kind == kValue || f.kind == kObj || f.kind == kArr)) {  // between tokens
        if (take_ws(t, c)) out.push_back(t);
        return;
      }
      switch (f.kind) {
        case kValue: {
          if (n.kind == SchemaNode::Kind::kAnyOf) {
            for (const int32_t alt : n.alternatives) {
              Thread u = t;
              u.top = push(a.links[size_t(t.top)].below, value_frame(alt));
              run(u, c);
            }
            return;
          }
          if (n.kind == SchemaNode::Kind::kLiterals) {
            Frame e;
            e.node = f.node;
            e.kind = kEnum;
            e.count = uint32_t(n.literal_trie);
            t.top = replace(t.top, e);
            continue;
          }
          const uint8_t types = n.live_types;
          Frame v;
          v.node = f.node;
          if (c == '{' && (types & kObject)) {
            v.kind = kObj;
            v.phase = kObjOpen;
            v.seen = n.dead;
          } else if (c == '[' && (types & kArray)) {
            v.kind = kArr;
            v.phase = kArrOpen;
          } else if (c == '"' && (types & kString)) {
            v.kind = kStr;
          } else if ((c == '-' || is_digit(c)) && (types & (kNumber | kInteger))) {
            v.kind = kNum;
            v.phase = c == '-' ? kNumMinus : c == '0' ? kNumZero : kNumInt;
            v.small = c == '-' || c == '0' ? 0 : 1;
          } else if ((c == 't' || c == 'f') && (types & kBoolean)) {
            v.kind = kLit;
            v.small = c == 't' ? 0 : 1;
            v.count = 1;
          } else if (c == 'n' && (types & kNull)) {
            v.kind = kLit;
            v.small = 2;
            v.count = 1;
          } else {
            return;
          }
          t.top = replace(t.top, v);
          out.push_back(t);
          return;
        }
        case kObj: {
          const bool closing = c == '}' && (f.phase == kObjOpen || f.phase == kObjAfterValue);
          if (closing) {
            if (!required_met(n, f.seen)) return;
            t.top = a.links[size_t(t.top)].below;
            out.push_back(t);
            return;
          }
          if (c == '"' && (f.phase == kObjOpen || f.phase == kObjComma)) {
            if (!key_possible(n, f.seen)) return;
            Frame k;
            k.node = f.node;
            k.kind = kKey;
            k.count = n.key_trie >= 0 ? uint32_t(n.key_trie) : kOffTrie;
            if (k.count != kOffTrie && (g.tries[k.count].below & ~f.seen) == 0) k.count = kOffTrie;
            t.top = push(t.top, k);
            out.push_back(t);
            return;
          }
          if (c == ',' && f.phase == kObjAfterValue) {
            if (!key_possible(n, f.seen)) return;
            f.phase = kObjComma;
            t.top = replace(t.top, f);
            out.push_back(t);
            return;
          }
          if (c == ':' && f.phase == kObjAfterKey) {
            const int32_t value = f.small == kAdditionalKey ? n.additional : n.properties[f.small].node;
            f.phase = kObjAfterValue;
            t.top = push(replace(t.top, f), value_frame(value));
            out.push_back(t);
            return;
          }
          return;
        }
        case kKey: {
          const uint64_t seen = a.links[size_t(a.links[size_t(t.top)].below)].frame.seen;
          const StrResult r = string_byte(f, c);
          if (r == kReject) return;
          if (r == kClose) {
            uint16_t key = kAdditionalKey;
            if (f.count != kOffTrie) {
              const int32_t p = g.tries[f.count].terminal;
              if (p >= 0 && (seen >> p & 1)) return;  // a property written twice
              if (p >= 0) key = uint16_t(p);
            }
            if (key == kAdditionalKey && n.additional < 0) return;
            t.top = a.links[size_t(t.top)].below;
            Frame o = a.links[size_t(t.top)].frame;
            o.phase = kObjAfterKey;
            o.small = key;
            if (key != kAdditionalKey) o.seen |= uint64_t(1) << key;
            t.top = replace(t.top, o);
            out.push_back(t);
            return;
          }
          if (f.count != kOffTrie) {
            const int32_t next = g.tries[f.count].child(c);
            f.count = next >= 0 && (g.tries[size_t(next)].below & ~seen) != 0 ? uint32_t(next) : kOffTrie;
          }
          if (f.count == kOffTrie && n.additional < 0) return;
          t.top = replace(t.top, f);
          out.push_back(t);
          return;
        }
        case kArr: {
          const bool counted = n.min_items > 0 || n.max_items != UINT32_MAX;
          if (c == ']') {
            if (f.count < n.min_items) return;
            t.top = a.links[size_t(t.top)].below;
            out.push_back(t);
            return;
          }
          if ((f.phase == kArrOpen) != (c == ',')) {
            if (n.items < 0 || f.count >= n.max_items) return;
            f.phase = kArrAfterValue;
            if (counted) ++f.count;
            t.top = push(replace(t.top, f), value_frame(n.items));
            if (c == ',') {
              out.push_back(t);
              return;
            }
            continue;  // the byte begins the first item
          }
          return;
        }
        case kStr: {
          const StrResult r = string_byte(f, c);
          if (r == kReject) return;
          if (r == kClose) {
            if (f.count < n.min_length) return;
            t.top = a.links[size_t(t.top)].below;
            out.push_back(t);
            return;
          }
          if (r == kCharStart && (n.min_length > 0 || n.max_length != UINT32_MAX)) {
            if (f.count >= n.max_length) return;
            ++f.count;
          }
          t.top = replace(t.top, f);
          out.push_back(t);
          return;
        }
        case kNum: {
          const bool integer = (n.live_types & kNumber) == 0;
          const bool digit = is_digit(c);
          // Digits of the current part, at most `max` of them; false when the byte is not one.
          auto digit_of = [&](uint16_t max) { return digit && f.small < max && ++f.small; };
          bool took = true;
          switch (f.phase) {
            case kNumMinus:
              if (!digit) return;
              f.phase = c == '0' ? kNumZero : kNumInt;
              f.small = c == '0' ? 0 : 1;
              break;
            case kNumZero:
            case kNumInt:
            case kNumFrac:
              if (digit && f.phase != kNumZero) {
                if (!digit_of(f.phase == kNumInt ? kMaxIntDigits : kMaxFracDigits)) return;
              } else if (c == '.' && !integer && f.phase != kNumFrac) {
                f.phase = kNumDot;
              } else if ((c == 'e' || c == 'E') && !integer) {
                f.phase = kNumE;
              } else {
                took = false;
              }
              break;
            case kNumE:
              if (c == '+' || c == '-') {
                f.phase = kNumESign;
                break;
              }
              [[fallthrough]];
            case kNumDot:
            case kNumESign:  // a digit must come
              if (!digit) return;
              f.phase = f.phase == kNumDot ? kNumFrac : kNumExp;
              f.small = 1;
              break;
            case kNumExp:
              if (digit && !digit_of(kMaxExpDigits)) return;
              took = digit;
              break;
          }
          if (took) {
            t.top = replace(t.top, f);
            out.push_back(t);
            return;
          }
          t.top = a.links[size_t(t.top)].below;  // the number ended before this byte: its parent reads it
          continue;
        }
        case kLit: {
          if (c != uint8_t(kLiterals[f.small][f.count])) return;
          ++f.count;
          t.top = f.count == kLiteralSize[f.small] ? a.links[size_t(t.top)].below : replace(t.top, f);
          out.push_back(t);
          return;
        }
        case kEnum: {
          const TrieNode& at = g.tries[f.count];
          const int32_t next = at.child(c);
          if (next < 0) {
            if (at.terminal < 0) return;
            t.top = a.links[size_t(t.top)].below;  // the literal ended before this byte
            continue;
          }
          const TrieNode& to = g.tries[size_t(next)];
          if (to.terminal >= 0 && to.children.empty()) {
            t.top = a.links[size_t(t.top)].below;
          } else {
            f.count = uint32_t(next);
            t.top = replace(t.top, f);
          }
          out.push_back(t);
          return;
        }
      }
      return;
    }
  }
};

bool same_stack(const Arena& a, const Thread& x, const Thread& y) {
  if (x.ws != y.ws) return false;
  int32_t i = x.top, j = y.top;
  while (i >= 0 && j >= 0) {
    if (i == j) return true;
    if (!(a.links[size_t(i)].frame == a.links[size_t(j)].frame)) return false;
    i = a.links[size_t(i)].below;
    j = a.links[size_t(j)].below;
  }
  return i == j;
}

}  // namespace

void JsonMatcher::step(const Grammar& g, Arena& arena, const Thread* in, size_t n, uint8_t c,
                       std::vector<Thread>& out) {
  const size_t first = out.size();
  Stepper s{g, arena, out};
  for (size_t i = 0; i < n; ++i) s.run(in[i], c);
  if (out.size() - first > 1) {
    size_t kept = first;
    for (size_t i = first; i < out.size(); ++i) {
      bool dup = false;
      for (size_t j = first; j < kept && !dup; ++j) dup = same_stack(arena, out[i], out[j]);
      if (!dup && kept - first < kMaxThreads) out[kept++] = out[i];
    }
    out.resize(kept);
  }
}

bool JsonMatcher::can_end(const Grammar& g, const Arena& a, const Thread& t) {
  if (t.top < 0) return true;
  const Link& l = a.links[size_t(t.top)];
  if (l.below >= 0) return false;
  const Frame& f = l.frame;
  if (f.kind == kNum) return f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExp;
  if (f.kind == kEnum) return g.tries[f.count].terminal >= 0;  // a literal that a longer one continues
  return false;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  Frame f;
  f.node = grammar_->root;
  f.kind = kValue;
  arena_.links.push_back({f, -1});
  threads_.push_back({0, 0});
}

bool JsonMatcher::advance(std::string_view bytes) {
  const size_t mark = arena_.links.size();
  std::vector<Thread> cur = threads_;
  for (const char ch : bytes) {
    next_.clear();
    step(*grammar_, arena_, cur.data(), cur.size(), uint8_t(ch), next_);
    if (next_.empty()) {
      arena_.links.resize(mark);
      return false;
    }
    cur.swap(next_);
  }
  threads_ = std::move(cur);
  compact();
  return true;
}

void JsonMatcher::compact() {
  Arena fresh;
  std::vector<int32_t> moved(arena_.links.size(), -1);
  for (Thread& t : threads_) {
    std::vector<int32_t> chain;
    for (int32_t i = t.top; i >= 0 && moved[size_t(i)] < 0; i = arena_.links[size_t(i)].below) chain.push_back(i);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Link& l = arena_.links[size_t(*it)];
      moved[size_t(*it)] = int32_t(fresh.links.size());
      fresh.links.push_back({l.frame, l.below < 0 ? -1 : moved[size_t(l.below)]});
    }
    if (t.top >= 0) t.top = moved[size_t(t.top)];
  }
  arena_ = std::move(fresh);
}

bool JsonMatcher::can_end() const {
  return std::any_of(threads_.begin(), threads_.end(), [&](const Thread& t) { return can_end(*grammar_, arena_, t); });
}

bool JsonMatcher::done() const {
  return std::all_of(threads_.begin(), threads_.end(), [](const Thread& t) { return t.top < 0; });
}

bool JsonMatcher::matches(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  JsonMatcher m(std::move(grammar));
  return m.advance(text) && m.can_end();
}

}  // namespace seedling::grammar
