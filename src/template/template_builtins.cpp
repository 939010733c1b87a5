// template/template_builtins.cpp - jinja2's filters and tests, Python's str/dict methods and operators.
//
// Each function reproduces what CPython + jinja2 3.x return for the values a chat template sees. Anything not listed
// fails with a message naming it (the renderer adds file, line and column): an unsupported construct is an error,
// never a silent difference.
#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "template/template_render.h"

namespace seedling::tmpl {

void builtin_fail(const std::string& message) {
  throw BuiltinFailure(message);
}

void check_template_size(size_t n, size_t limit, const char* what) {
  if (n > limit) builtin_fail(fmt::format("{} would be over {}, too large for a chat template", what, limit));
}

Value CallArgs::get(size_t index, const char* name, Value fallback) const {
  if (index < args.size()) return args[index];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return fallback;
}

bool CallArgs::has(size_t index, const char* name) const {
  if (index < args.size()) return true;
  for (const auto& [k, v] : kwargs) {
    if (k == name) return true;
  }
  return false;
}

namespace {

using K = Value::Kind;

std::vector<uint32_t> decode(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t k = 0; k < s.size();) {
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + k),
                              static_cast<utf8proc_ssize_t>(s.size() - k), &cp);
    if (n <= 0) {  // invalid byte: keep it as a Latin-1 code point so nothing is lost
      out.push_back(static_cast<unsigned char>(s[k]));
      ++k;
    } else {
      out.push_back(static_cast<uint32_t>(cp));
      k += static_cast<size_t>(n);
    }
  }
  return out;
}

std::string encode(const std::vector<uint32_t>& cps, size_t from = 0, size_t to = SIZE_MAX) {
  std::string out;
  to = std::min(to, cps.size());
  for (size_t k = from; k < to; ++k) {
    utf8proc_uint8_t buf[4];
    auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cps[k]), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

std::string quoted_type(const Value& v) {
  return std::string("'") + v.type_name() + "'";
}

[[noreturn]] void undefined_fail(const Value& v) {
  builtin_fail(v.undefined_name.empty() ? std::string("value is undefined")
                                        : "'" + v.undefined_name + "' is undefined");
}

const std::string& need_string(const Value& v, const char* what) {
  if (v.kind == K::kUndefined) undefined_fail(v);
  if (v.kind != K::kString) builtin_fail(fmt::format("{} expects a string, got {}", what, quoted_type(v)));
  return *v.s;
}

int64_t need_int(const Value& v, const char* what) {
  if (v.kind == K::kInt) return v.i;
  if (v.kind == K::kBool) return v.b;
  if (v.kind == K::kUndefined) undefined_fail(v);
  builtin_fail(fmt::format("{} expects an integer, got {}", what, quoted_type(v)));
}

std::string soft_str(const Value& v) {
  return v.to_str();
}  // jinja2 soft_str: str(), undefined -> ""

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<uint32_t> cps = decode(s);
  std::vector<uint32_t> set;
  bool whitespace = chars.kind == K::kNone || chars.kind == K::kUndefined;
  if (!whitespace) set = decode(need_string(chars, "strip"));
  auto strip_it = [&](uint32_t c) {
    return whitespace ? is_python_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t a = 0, b = cps.size();
  if (left) {
    while (a < b && strip_it(cps[a])) ++a;
  }
  if (right) {
    while (b > a && strip_it(cps[b - 1])) --b;
  }
  return encode(cps, a, b);
}

std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<uint32_t> cps = decode(s);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t k = 0;
    while (true) {
      while (k < cps.size() && is_python_space(cps[k])) ++k;
      if (k >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = cps.size();
        while (end > k && is_python_space(cps[end - 1])) --end;
        parts.push_back(encode(cps, k, end));
        break;
      }
      size_t start = k;
      while (k < cps.size() && !is_python_space(cps[k])) ++k;
      parts.push_back(encode(cps, start, k));
    }
    return parts;
  }
  size_t k = cps.size();
  while (true) {
    while (k > 0 && is_python_space(cps[k - 1])) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t start = 0;
      while (start < k && is_python_space(cps[start])) ++start;
      parts.push_back(encode(cps, start, k));
      break;
    }
    size_t end = k;
    while (k > 0 && !is_python_space(cps[k - 1])) --k;
    parts.push_back(encode(cps, k, end));
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) builtin_fail("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (true) {
      size_t at = s.find(sep, start);
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) break;
      parts.push_back(s.substr(start, at - start));
      start = at + sep.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    if (end < sep.size()) break;
    size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string::npos) break;
    parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between every character (and at both ends)
    std::vector<std::string> chars = utf8_chars(s);
    int64_t done = 0;
    for (const auto& c : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
      check_template_size(out.size(), kMaxTemplateText, "replace(): the result's bytes");
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + to;
    check_template_size(out.size(), kMaxTemplateText, "replace(): the result's bytes");
    start = at + from.size();
    ++done;
  }
  return out + s.substr(start);
}

std::string map_case(const std::string& s, bool upper) {
  std::vector<uint32_t> cps = decode(s);
  for (auto& c : cps) {
    c = static_cast<uint32_t>(upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(c))
                                    : utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  }
  return encode(cps);
}

bool is_cased_letter(uint32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

std::string python_title(const std::string& s) {  // str.title(): a cased letter after a non-cased one is upper
  std::vector<uint32_t> cps = decode(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    bool cased = is_cased_letter(c);
    if (cased) {
      c = static_cast<uint32_t>(prev_cased ? utf8proc_tolower(static_cast<utf8proc_int32_t>(c))
                                           : utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
    }
    prev_cased = cased;
  }
  return encode(cps);
}

std::string python_capitalize(const std::string& s) {
  std::vector<uint32_t> cps = decode(s);
  for (size_t k = 0; k < cps.size(); ++k) {
    auto c = static_cast<utf8proc_int32_t>(cps[k]);
    cps[k] = static_cast<uint32_t>(k == 0 ? utf8proc_totitle(c) : utf8proc_tolower(c));
  }
  return encode(cps);
}

std::string jinja_title(const std::string& s) {  // jinja2 do_title: split on [-\s({\[<]+, capitalize each piece
  std::vector<uint32_t> cps = decode(s);
  auto is_boundary = [](uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_python_space(c);
  };
  bool at_start = true;
  for (auto& c : cps) {
    if (is_boundary(c)) {
      at_start = true;
      continue;
    }
    auto x = static_cast<utf8proc_int32_t>(c);
    c = static_cast<uint32_t>(at_start ? utf8proc_toupper(x) : utf8proc_tolower(x));
    at_start = false;
  }
  return encode(cps);
}

Value string_list(const std::vector<std::string>& parts) {
  List items;
  for (const auto& p : parts) items.push_back(Value::string(p));
  return Value::make_list(std::move(items));
}

bool starts_or_ends(const std::string& s, const Value& arg, bool starts) {
  auto test = [&](const std::string& x) {
    if (x.size() > s.size()) return false;
    return starts ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.kind == K::kTuple || arg.kind == K::kList) {
    for (const auto& e : *arg.list) {
      if (test(need_string(e, starts ? "startswith" : "endswith"))) return true;
    }
    return false;
  }
  return test(need_string(arg, starts ? "startswith" : "endswith"));
}

int64_t codepoint_index(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(utf8_length(s.substr(0, byte_offset)));
}

std::string python_format(const std::string& fmt_text, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt_text.size(); ++k) {
    char c = fmt_text[k];
    if (c == '{' && k + 1 < fmt_text.size() && fmt_text[k + 1] == '{') {
      out += '{';
      ++k;
    } else if (c == '}' && k + 1 < fmt_text.size() && fmt_text[k + 1] == '}') {
      out += '}';
      ++k;
    } else if (c == '{') {
      size_t close = fmt_text.find('}', k);
      if (close == std::string::npos) builtin_fail("Single '{' encountered in format string");
      std::string field = fmt_text.substr(k + 1, close - k - 1);
      if (field.find_first_of(":!") != std::string::npos) builtin_fail("format specs in str.format are not supported");
      Value v;
      if (field.empty()) {
        v = args.get(auto_index++, "", Value::undefined());
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        v = args.get(static_cast<size_t>(std::atoi(field.c_str())), "", Value::undefined());
      } else {
        v = args.get(SIZE_MAX, field.c_str(), Value::undefined());
      }
      if (v.is_undefined()) builtin_fail("str.format: missing argument for '{" + field + "}'");
      out += v.to_str();
      k = close;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& a) {
  if (name == "startswith" || name == "endswith")
    return Value::boolean(starts_or_ends(s, a.get(0, "prefix"), name[0] == 's'));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(strip_chars(s, a.get(0, "chars", Value::none()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Value sep = a.get(0, "sep", Value::none());
    int64_t maxsplit = need_int(a.get(1, "maxsplit", Value::integer(-1)), "split");
    bool right = name == "rsplit";
    if (sep.kind == K::kNone) return string_list(split_whitespace(s, maxsplit, right));
    return string_list(split_sep(s, need_string(sep, "split"), maxsplit, right));
  }
  if (name == "replace") {
    return Value::string(replace_all(s, need_string(a.get(0, "old"), "replace"),
                                     need_string(a.get(1, "new"), "replace"),
                                     need_int(a.get(2, "count", Value::integer(-1)), "replace")));
  }
  if (name == "upper" || name == "lower") return Value::string(map_case(s, name == "upper"));
  if (name == "title") return Value::string(python_title(s));
  if (name == "capitalize") return Value::string(python_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = need_string(a.get(0, "sub"), name.c_str());
    size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") builtin_fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(codepoint_index(s, at));
  }
  if (name == "count") {
    const std::string& sub = need_string(a.get(0, "sub"), "count");
    if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& e : iterate(a.get(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += need_string(e, "str.join");
      check_template_size(out.size(), kMaxTemplateText, "join(): the result's bytes");
    }
    return Value::string(out);
  }
  if (name == "format") return Value::string(python_format(s, a));
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\n' || s[k] == '\r') {
        lines.push_back(s.substr(start, k - start));
        if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
        start = k + 1;
      }
    }
    if (start < s.size()) lines.push_back(s.substr(start));
    return string_list(lines);
  }
  std::vector<uint32_t> cps = decode(s);
  auto all_of = [&](auto pred) { return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred); };
  if (name == "isspace") return Value::boolean(all_of(is_python_space));
  if (name == "isdigit") return Value::boolean(all_of([](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") {
    return Value::boolean(all_of([](uint32_t c) {
      auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
    }));
  }
  if (name == "isupper" || name == "islower") {
    bool want_upper = name == "isupper";
    bool any_cased = false;
    for (uint32_t c : cps) {
      if (!is_cased_letter(c)) continue;
      any_cased = true;
      bool upper = utf8proc_tolower(static_cast<utf8proc_int32_t>(c)) != static_cast<utf8proc_int32_t>(c);
      if (upper != want_upper) return Value::boolean(false);
    }
    return Value::boolean(any_cased);
  }
  builtin_fail("str has no supported method '" + name + "'");
}

const char* const kStringMethods[] = {
    "startswith", "endswith",   "strip",      "lstrip",  "rstrip",  "split",   "rsplit", "replace", "upper",
    "lower",      "title",      "capitalize", "find",    "rfind",   "index",   "rindex", "count",   "join",
    "format",     "splitlines", "isspace",    "isdigit", "isalpha", "isupper", "islower"};
const char* const kDictMethods[] = {"get",    "items", "keys",  "values",     "pop",
                                    "update", "copy",  "clear", "setdefault", "popitem"};
const char* const kListMethods[] = {"append", "extend", "insert", "pop",   "remove", "reverse",
                                    "sort",   "clear",  "copy",   "count", "index"};

template <size_t N>
bool contains(const char* const (&names)[N], const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

Value items_of(const Value& v) {
  List out;
  for (const auto& [k, val] : v.dict->items) out.push_back(Value::make_tuple({Value::string(k), val}));
  return Value::make_list(std::move(out));
}

Value dict_method(const Value& self, const std::string& name, const CallArgs& a) {
  if (name == "get") {
    Value key = a.get(0, "key");
    if (key.kind == K::kString) {
      if (const Value* v = self.dict->find(*key.s)) return *v;
    }
    return a.get(1, "default", Value::none());
  }
  if (name == "items") return items_of(self);
  if (name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : self.dict->items) out.push_back(name == "keys" ? Value::string(k) : v);
    return Value::make_list(std::move(out));
  }
  if (name == "copy") return Value::make_dict(self.dict->items);
  builtin_fail("access to attribute '" + name + "' of 'dict' object is unsafe (the sandbox forbids changing a dict)");
}

Value list_method(const Value& self, const std::string& name, const CallArgs& a) {
  if (name == "count") {
    int64_t n = 0;
    for (const auto& e : *self.list) n += values_equal(e, a.get(0, "value"));
    return Value::integer(n);
  }
  if (name == "index") {
    for (size_t k = 0; k < self.list->size(); ++k) {
      if (values_equal((*self.list)[k], a.get(0, "value"))) return Value::integer(static_cast<int64_t>(k));
    }
    builtin_fail("value is not in list");
  }
  if (name == "copy") return Value::make_list(*self.list);
  builtin_fail("access to attribute '" + name + "' of '" + self.type_name() +
               "' object is unsafe (the sandbox forbids changing a list)");
}

}  // namespace

// ---- attribute and item access (jinja2 Environment.getattr / getitem) -------------------------------------------
bool has_method(const Value& self, const std::string& name) {
  switch (self.kind) {
    case K::kString:
      return contains(kStringMethods, name);
    case K::kDict:
      return contains(kDictMethods, name);
    case K::kList:
    case K::kTuple:
      return contains(kListMethods, name);
    default:
      return false;
  }
}

static Value bound_method(const Value& self, const std::string& name) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::kMethod;
  c->name = name;
  c->self = self;
  return Value::callable(c);
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.kind == K::kUndefined) {
    builtin_fail(obj.undefined_name.empty() ? "'" + name + "' of an undefined value"
                                            : "'" + obj.undefined_name + "' is undefined");
  }
  if (has_method(obj, name)) return bound_method(obj, name);
  if (obj.is_mapping()) {
    if (const Value* v = obj.dict->find(name)) return *v;
  }
  return Value::undefined(name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.kind == K::kUndefined) undefined_fail(obj);
  if (obj.is_mapping()) {
    if (key.kind == K::kString) {
      if (const Value* v = obj.dict->find(*key.s)) return *v;
      if (has_method(obj, *key.s)) return bound_method(obj, *key.s);
      return Value::undefined(*key.s);
    }
    return Value::undefined(key.to_str());
  }
  if (obj.is_sequence_like() || obj.kind == K::kString) {
    if (key.kind == K::kInt || key.kind == K::kBool) {
      int64_t idx = key.kind == K::kInt ? key.i : key.b;
      if (obj.kind == K::kString) {
        std::vector<std::string> chars = utf8_chars(*obj.s);
        int64_t n = static_cast<int64_t>(chars.size());
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return Value::undefined();
        return Value::string(chars[static_cast<size_t>(idx)]);
      }
      int64_t n = static_cast<int64_t>(obj.list->size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return Value::undefined();
      return (*obj.list)[static_cast<size_t>(idx)];
    }
    if (key.kind == K::kString) return get_attr(obj, *key.s);
  }
  return Value::undefined();
}

Value call_method(const Value& self, const std::string& name, const CallArgs& args) {
  switch (self.kind) {
    case K::kString:
      return string_method(*self.s, name, args);
    case K::kDict:
      return dict_method(self, name, args);
    case K::kList:
    case K::kTuple:
      return list_method(self, name, args);
    default:
      builtin_fail(std::string("'") + self.type_name() + "' object has no method '" + name + "'");
  }
}

// ---- operators ----------------------------------------------------------------------------------------------------
std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case K::kUndefined:
      return {};
    case K::kList:
    case K::kTuple:
      return *v.list;
    case K::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, val] : v.dict->items) keys.push_back(Value::string(k));
      return keys;
    }
    case K::kString: {
      std::vector<Value> chars;
      for (auto& c : utf8_chars(*v.s)) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default:
      builtin_fail(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

Value python_add(const Value& a, const Value& b) {
  if (a.kind == K::kUndefined) undefined_fail(a);
  if (b.kind == K::kUndefined) undefined_fail(b);
  if (a.kind == K::kString && b.kind == K::kString) {
    check_template_size(a.s->size() + b.s->size(), kMaxTemplateText, "'+': the string's bytes");
    return Value::string(*a.s + *b.s);
  }
  if ((a.kind == K::kList && b.kind == K::kList) || (a.kind == K::kTuple && b.kind == K::kTuple)) {
    check_template_size(a.list->size() + b.list->size(), kMaxTemplateItems, "'+': the list's items");
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return a.kind == K::kList ? Value::make_list(std::move(out)) : Value::make_tuple(std::move(out));
  }
  if (a.is_number() && b.is_number()) return python_binary("+", a, b);
  if (a.kind == K::kString) builtin_fail(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
  if (a.kind == K::kList) builtin_fail(fmt::format("can only concatenate list (not \"{}\") to list", b.type_name()));
  builtin_fail(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", a.type_name(), b.type_name()));
}

static int64_t floor_div(int64_t x, int64_t y) {
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
  return q;
}

Value python_binary(const std::string& op, const Value& a, const Value& b) {
  if (a.kind == K::kUndefined) undefined_fail(a);
  if (b.kind == K::kUndefined) undefined_fail(b);
  if (op == "+" && !(a.is_number() && b.is_number())) return python_add(a, b);
  if (op == "*") {
    const Value* seq = a.kind == K::kString || a.is_sequence_like() ? &a : &b;
    const Value* count = seq == &a ? &b : &a;
    if ((seq->kind == K::kString || seq->is_sequence_like()) && (count->kind == K::kInt || count->kind == K::kBool)) {
      int64_t n = count->kind == K::kInt ? count->i : count->b;
      size_t unit = seq->kind == K::kString ? seq->s->size() : seq->list->size();
      const size_t limit = seq->kind == K::kString ? kMaxTemplateText : kMaxTemplateItems;
      if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > limit / unit) {
        builtin_fail(fmt::format("'*': the repetition's {} would be over {}, too large for a chat template",
                                 seq->kind == K::kString ? "bytes" : "items", limit));
      }
      if (unit == 0) n = 0;  // '' * 2**62 and [] * 2**62 are empty at once, as in Python: no loop of 2**62 steps
      if (seq->kind == K::kString) {
        std::string out;
        for (int64_t k = 0; k < n; ++k) out += *seq->s;
        return Value::string(out);
      }
      List out;
      for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq->list->begin(), seq->list->end());
      return seq->kind == K::kList ? Value::make_list(std::move(out)) : Value::make_tuple(std::move(out));
    }
  }
  if (op == "%" && a.kind == K::kString) builtin_fail("printf-style '%' string formatting is not supported");
  if (!a.is_number() || !b.is_number()) {
    builtin_fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
  }
  bool ints = a.kind != K::kFloat && b.kind != K::kFloat;
  int64_t x = a.kind == K::kBool ? a.b : a.i, y = b.kind == K::kBool ? b.b : b.i;
  double fx = a.as_double(), fy = b.as_double();
  if (ints && (op == "+" || op == "-" || op == "*")) {
    int64_t r = 0;
    bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                    : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                : __builtin_mul_overflow(x, y, &r);
    if (overflow) builtin_fail("integer overflow: the result does not fit in 64 bits");
    return Value::integer(r);
  }
  if (op == "+") return Value::floating(fx + fy);
  if (op == "-") return Value::floating(fx - fy);
  if (op == "*") return Value::floating(fx * fy);
  if (op == "/") {
    if (fy == 0.0) builtin_fail("division by zero");
    return Value::floating(fx / fy);
  }
  if (op == "//" || op == "%") {
    if (fy == 0.0) builtin_fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints && x == INT64_MIN && y == -1) builtin_fail("integer overflow: the result does not fit in 64 bits");
    if (ints) return op == "//" ? Value::integer(floor_div(x, y)) : Value::integer(x - floor_div(x, y) * y);
    double q = std::floor(fx / fy);
    return op == "//" ? Value::floating(q) : Value::floating(fx - q * fy);
  }
  if (op == "**") {
    if (ints && y >= 0) {
      int64_t p = 1;
      for (int64_t k = 0; k < y; ++k) {
        if (__builtin_mul_overflow(p, x, &p)) builtin_fail("integer overflow: the result does not fit in 64 bits");
        if (p == 0 || p == 1) break;  // 0**y and 1**y need no more steps
      }
      return Value::integer(p);
    }
    return Value::floating(std::pow(fx, fy));
  }
  builtin_fail("unknown operator " + op);
}

bool python_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return python_contains(b, a);
  if (op == "notin") return !python_contains(b, a);
  if (a.kind == K::kUndefined) undefined_fail(a);
  if (b.kind == K::kUndefined) undefined_fail(b);
  int c;
  if (a.is_number() && b.is_number()) {
    double x = a.as_double(), y = b.as_double();
    c = x < y ? -1 : x > y ? 1 : 0;
  } else if (a.kind == K::kString && b.kind == K::kString) {
    c = a.s->compare(*b.s);
  } else if (a.is_sequence_like() && a.kind == b.kind) {
    size_t n = std::min(a.list->size(), b.list->size());
    c = 0;
    for (size_t k = 0; k < n && c == 0; ++k) {
      if (values_equal((*a.list)[k], (*b.list)[k])) continue;
      c = python_compare("<", (*a.list)[k], (*b.list)[k]) ? -1 : 1;
    }
    if (c == 0) c = a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  } else {
    builtin_fail(
        fmt::format("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(), b.type_name()));
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

bool python_contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case K::kUndefined:
      return false;
    case K::kString:
      if (item.kind != K::kString) {
        builtin_fail(fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
      }
      return container.s->find(*item.s) != std::string::npos;
    case K::kList:
    case K::kTuple:
      return std::any_of(container.list->begin(), container.list->end(),
                         [&](const Value& e) { return values_equal(e, item); });
    case K::kDict:
    case K::kNamespace:
      return item.kind == K::kString && container.dict->find(*item.s) != nullptr;
    default:
      builtin_fail(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

// ---- tests --------------------------------------------------------------------------------------------------------
bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  if (name == "defined") return v.kind != K::kUndefined;
  if (name == "undefined") return v.kind == K::kUndefined;
  if (name == "none") return v.kind == K::kNone;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.b;
  if (name == "false") return v.kind == K::kBool && !v.b;
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.kind == K::kString;
  if (name == "mapping") return v.kind == K::kDict;
  if (name == "sequence") return v.kind == K::kString || v.is_sequence_like() || v.kind == K::kDict;
  if (name == "iterable") return v.kind == K::kString || v.is_sequence_like() || v.kind == K::kDict || v.is_undefined();
  if (name == "callable") return v.kind == K::kCallable;
  if (name == "odd" || name == "even") {
    int64_t n = need_int(v, name.c_str());
    return (n % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = need_int(args.get(0, "num"), "divisibleby");
    if (d == 0) builtin_fail("integer division or modulo by zero");
    return need_int(v, "divisibleby") % d == 0;
  }
  if (name == "lower" || name == "upper") {
    const std::string& s = need_string(v, name.c_str());
    return map_case(s, name == "upper") == s;
  }
  Value other = args.get(0, "b");
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, other);
  if (name == "ne" || name == "!=") return !values_equal(v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return python_compare("<", v, other);
  if (name == "le" || name == "<=") return python_compare("<=", v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return python_compare(">", v, other);
  if (name == "ge" || name == ">=") return python_compare(">=", v, other);
  if (name == "in") return python_contains(args.get(0, "seq"), v);
  if (name == "sameas") {
    if (v.kind != other.kind) return false;
    if (v.kind == K::kNone || v.kind == K::kUndefined) return true;
    if (v.kind == K::kBool) return v.b == other.b;
    if (v.kind == K::kInt) return v.i == other.i && v.i >= -5 && v.i <= 256;  // CPython's small-int cache
    return v.list == other.list && v.dict == other.dict && v.s == other.s && v.call == other.call;
  }
  builtin_fail("no test named '" + name + "'");
}

// ---- filters ------------------------------------------------------------------------------------------------------
namespace {

// The attribute path of map/selectattr/sort(attribute=...): "a.b" or "a.0".
Value lookup_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(c); });
    cur = numeric ? get_item(cur, Value::integer(std::atoll(part.c_str()))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

CallArgs tail_args(const CallArgs& a, size_t from) {
  CallArgs out;
  if (from < a.args.size()) out.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(from), a.args.end());
  out.kwargs = a.kwargs;
  return out;
}

Value select_like(const Value& input, const CallArgs& a, bool by_attr, bool keep_when) {
  List out;
  std::string attr;
  size_t test_at = 0;
  if (by_attr) {
    attr = need_string(a.get(0, "attribute"), "selectattr");
    test_at = 1;
  }
  CallArgs test_args;
  std::string test_name;
  if (test_at < a.args.size()) {
    test_name = need_string(a.args[test_at], "select");
    test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(test_at + 1), a.args.end());
  }
  for (const auto& item : iterate(input)) {
    Value probe = by_attr ? lookup_path(item, attr) : item;
    bool ok = test_name.empty() ? probe.truthy() : apply_test(test_name, probe, test_args);
    if (ok == keep_when) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

std::string lowered_key(const Value& v, bool case_sensitive) {
  return (v.kind == K::kString && !case_sensitive) ? map_case(*v.s, false) : std::string();
}

List sorted_values(const Value& input, const CallArgs& a, size_t first_arg) {
  bool reverse = a.get(first_arg, "reverse", Value::boolean(false)).truthy();
  bool case_sensitive = a.get(first_arg + 1, "case_sensitive", Value::boolean(false)).truthy();
  Value attribute = a.get(first_arg + 2, "attribute", Value::none());
  List items = iterate(input);
  auto key = [&](const Value& v) {
    Value k = attribute.kind == K::kString ? lookup_path(v, *attribute.s) : v;
    if (k.kind == K::kString && !case_sensitive) return Value::string(lowered_key(k, false));
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? python_compare("<", key(y), key(x)) : python_compare("<", key(x), key(y));
  });
  return items;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value tojson_filter(const Value& input, const CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = a.get(SIZE_MAX, "ensure_ascii", Value::boolean(false)).truthy();
  o.sort_keys = a.get(SIZE_MAX, "sort_keys", Value::boolean(false)).truthy();
  Value indent = a.get(0, "indent", Value::none());
  if (indent.kind == K::kInt) {
    o.has_indent = true;
    check_template_size(size_t(std::max<int64_t>(indent.i, 0)), kMaxTemplateText, "tojson: the indent's bytes");
    o.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent.i, 0)), ' ');
  } else if (indent.kind == K::kString) {
    o.has_indent = true;
    o.indent = *indent.s;
  } else if (indent.kind != K::kNone) {
    builtin_fail("tojson: indent must be an integer, a string or none");
  }
  if (o.has_indent) o.item_separator = ",";
  Value seps = a.get(SIZE_MAX, "separators", Value::none());
  if (seps.is_sequence_like() && seps.list->size() == 2) {
    o.item_separator = need_string((*seps.list)[0], "tojson separators");
    o.key_separator = need_string((*seps.list)[1], "tojson separators");
  } else if (seps.kind != K::kNone) {
    builtin_fail("tojson: separators must be a pair of strings");
  }
  for (const auto& [k, v] : a.kwargs) {
    if (k != "ensure_ascii" && k != "sort_keys" && k != "indent" && k != "separators") {
      builtin_fail("tojson: unsupported argument '" + k + "'");
    }
  }
  try {
    return Value::string(python_json_dumps(input, o));
  } catch (const Error& e) {
    builtin_fail(e.what());
  }
}

Value indent_filter(const Value& input, const CallArgs& a) {
  Value width = a.get(0, "width", Value::integer(4));
  std::string pad;
  if (width.kind == K::kString) {
    pad = *width.s;
  } else {
    const int64_t n = need_int(width, "indent");
    check_template_size(size_t(std::max<int64_t>(n, 0)), kMaxTemplateText, "indent: the width's bytes");
    pad = std::string(size_t(std::max<int64_t>(n, 0)), ' ');  // Python's ' ' * n: empty for n <= 0
  }
  bool first = a.get(1, "first", Value::boolean(false)).truthy();
  bool blank = a.get(2, "blank", Value::boolean(false)).truthy();
  std::string s = soft_str(input) + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n') {
      lines.push_back(s.substr(start, k - start));
      start = k + 1;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      rv += (k ? "\n" + pad : "") + lines[k];
      check_template_size(rv.size(), kMaxTemplateText, "indent: the result's bytes");
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n" + (lines[k].empty() ? "" : pad + lines[k]);
      check_template_size(rv.size(), kMaxTemplateText, "indent: the result's bytes");
    }
  }
  return Value::string(first ? pad + rv : rv);
}

Value int_filter(const Value& v, const CallArgs& a) {
  Value fallback = a.get(0, "default", Value::integer(0));
  switch (v.kind) {
    case K::kInt:
      return v;
    case K::kBool:
      return Value::integer(v.b);
    case K::kFloat:
      return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(std::trunc(v.f))) : fallback;
    case K::kString: {
      std::string t = strip_chars(*v.s, Value::none(), true, true);
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == '\0' && errno == 0) return Value::integer(n);
      double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0' && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
      return fallback;
    }
    default:
      return fallback;
  }
}

Value float_filter(const Value& v, const CallArgs& a) {
  Value fallback = a.get(0, "default", Value::floating(0.0));
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.kind == K::kString) {
    std::string t = strip_chars(*v.s, Value::none(), true, true);
    char* end = nullptr;
    double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && end && *end == '\0') return Value::floating(d);
  }
  return fallback;
}

Value length_of(const Value& v) {
  switch (v.kind) {
    case K::kUndefined:
      return Value::integer(0);
    case K::kString:
      return Value::integer(static_cast<int64_t>(utf8_length(*v.s)));
    case K::kList:
    case K::kTuple:
      return Value::integer(static_cast<int64_t>(v.list->size()));
    case K::kDict:
      return Value::integer(static_cast<int64_t>(v.dict->items.size()));
    default:
      builtin_fail(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

}  // namespace

Value apply_filter(const std::string& name, const Value& input, const CallArgs& a) {
  const Value& v = input;
  if (name == "length" || name == "count") return length_of(v);
  if (name == "default" || name == "d") {
    bool boolean = a.get(1, "boolean", Value::boolean(false)).truthy();
    bool use_default = v.kind == K::kUndefined || (boolean && !v.truthy());
    return use_default ? a.get(0, "default_value", Value::string("")) : v;
  }
  if (name == "safe" || name == "string") return v.kind == K::kString ? v : Value::string(soft_str(v));
  if (name == "e" || name == "escape") return Value::string(html_escape(soft_str(v)));
  if (name == "trim") return Value::string(strip_chars(soft_str(v), a.get(0, "chars", Value::none()), true, true));
  if (name == "upper" || name == "lower") return Value::string(map_case(soft_str(v), name == "upper"));
  if (name == "title") return Value::string(jinja_title(soft_str(v)));
  if (name == "capitalize") return Value::string(python_capitalize(soft_str(v)));
  if (name == "replace") {
    std::string s = soft_str(v);
    return Value::string(replace_all(s, soft_str(a.get(0, "old")), soft_str(a.get(1, "new")),
                                     need_int(a.get(2, "count", Value::integer(-1)), "replace")));
  }
  if (name == "tojson") return tojson_filter(v, a);
  if (name == "items") {
    if (v.kind == K::kUndefined) return Value::make_list({});
    if (v.kind != K::kDict) builtin_fail("Can only get item pairs from a mapping.");
    return items_of(v);
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "first") {
    List items = iterate(v);
    return items.empty() ? Value::undefined("first") : items.front();
  }
  if (name == "last") {
    if (v.kind == K::kDict) builtin_fail("'dict' object is not reversible");
    List items = iterate(v);
    return items.empty() ? Value::undefined("last") : items.back();
  }
  if (name == "reverse") {
    if (v.kind == K::kString) {
      std::vector<std::string> chars = utf8_chars(*v.s);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(out);
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "join") {
    std::string sep = soft_str(a.get(0, "d", Value::string("")));
    Value attribute = a.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const auto& e : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += soft_str(attribute.kind == K::kString ? lookup_path(e, *attribute.s) : e);
      check_template_size(out.size(), kMaxTemplateText, "join: the result's bytes");
    }
    return Value::string(out);
  }
  if (name == "map") {
    List out;
    Value attribute = a.get(SIZE_MAX, "attribute");
    if (attribute.kind == K::kString) {
      Value fallback = a.get(SIZE_MAX, "default");
      for (const auto& e : iterate(v)) {
        Value x = lookup_path(e, *attribute.s);
        out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
      }
    } else {
      std::string filter = need_string(a.get(0, "filter"), "map");
      CallArgs rest = tail_args(a, 1);
      for (const auto& e : iterate(v)) out.push_back(apply_filter(filter, e, rest));
    }
    return Value::make_list(std::move(out));
  }
  if (name == "select") return select_like(v, a, false, true);
  if (name == "reject") return select_like(v, a, false, false);
  if (name == "selectattr") return select_like(v, a, true, true);
  if (name == "rejectattr") return select_like(v, a, true, false);
  if (name == "unique") {
    bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
    Value attribute = a.get(1, "attribute", Value::none());
    List out;
    std::vector<Value> seen;
    for (const auto& e : iterate(v)) {
      Value key = attribute.kind == K::kString ? lookup_path(e, *attribute.s) : e;
      if (key.kind == K::kString && !case_sensitive) key = Value::string(lowered_key(key, false));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
        seen.push_back(key);
        out.push_back(e);
      }
    }
    return Value::make_list(std::move(out));
  }
  if (name == "sort") return Value::make_list(sorted_values(v, a, 0));
  if (name == "dictsort") {
    if (v.kind != K::kDict) builtin_fail("dictsort expects a mapping");
    bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
    List items = *items_of(v).list;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      std::string kx = *(*x.list)[0].s, ky = *(*y.list)[0].s;
      if (!case_sensitive) {
        kx = map_case(kx, false);
        ky = map_case(ky, false);
      }
      return kx < ky;
    });
    return Value::make_list(std::move(items));
  }
  if (name == "int") return int_filter(v, a);
  if (name == "float") return float_filter(v, a);
  if (name == "abs") {
    if (v.kind == K::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == K::kFloat) return Value::floating(std::fabs(v.f));
    if (v.kind == K::kBool) return Value::integer(v.b);
    builtin_fail(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
  }
  if (name == "indent") return indent_filter(v, a);
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (uint32_t c : decode(soft_str(v))) {
      auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      bool word = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_NO);
      if (word && !in_word) ++n;
      in_word = word;
    }
    return Value::integer(n);
  }
  if (name == "min" || name == "max") {
    List items = sorted_values(v,
                               CallArgs{{},
                                        {{"case_sensitive", a.get(0, "case_sensitive", Value::boolean(false))},
                                         {"attribute", a.get(1, "attribute", Value::none())}}},
                               0);
    if (items.empty()) return Value::undefined(name);
    return name == "min" ? items.front() : items.back();
  }
  if (name == "sum") {
    Value total = a.get(1, "start", Value::integer(0));
    Value attribute = a.get(0, "attribute", Value::none());
    for (const auto& e : iterate(v))
      total = python_add(total, attribute.kind == K::kString ? lookup_path(e, *attribute.s) : e);
    return total;
  }
  if (name == "attr") return get_attr(v, need_string(a.get(0, "name"), "attr"));
  if (name == "round") {
    int64_t precision = need_int(a.get(0, "precision", Value::integer(0)), "round");
    std::string method = soft_str(a.get(1, "method", Value::string("common")));
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value::floating(r / scale);
  }
  if (name == "center" || name == "truncate" || name == "urlencode" || name == "xmlattr" || name == "batch" ||
      name == "slice" || name == "format" || name == "filesizeformat" || name == "pprint" || name == "striptags" ||
      name == "urlize" || name == "wordwrap" || name == "groupby" || name == "forceescape") {
    builtin_fail("the '" + name + "' filter is not supported in chat templates");
  }
  builtin_fail("no filter named '" + name + "'");
}

}  // namespace seedling::tmpl
