// template/value.cpp - Python printing rules for template values (str, repr, json.dumps).
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace seedling::tmpl {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::find(const std::string& key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  if (Value* existing = find(key)) {
    *existing = std::move(value);
  } else {
    items.emplace_back(key, std::move(value));
  }
}

Value Value::undefined(std::string name) {
  Value v;
  v.undefined_name = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::floating(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::make_list(List x) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}
Value Value::make_tuple(List x) {
  Value v = make_list(std::move(x));
  v.kind = Kind::kTuple;
  return v;
}
Value Value::make_dict(DictItems x) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(Dict{std::move(x)});
  return v;
}
Value Value::make_namespace(DictItems x) {
  Value v = make_dict(std::move(x));
  v.kind = Kind::kNamespace;
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind = Kind::kCallable;
  v.call = std::move(c);
  return v;
}

template <typename Json>
static Value value_from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail("chat template input: integer {} does not fit in 64 bits", u);
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::floating(j.template get<double>());
    case Json::value_t::string:
      return Value::string(j.template get<std::string>());
    case Json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(value_from_json(e));
      return Value::make_list(std::move(items));
    }
    case Json::value_t::object: {
      DictItems items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), value_from_json(it.value()));
      return Value::make_dict(std::move(items));
    }
    default:
      fail("chat template input: unsupported JSON value of type {}", j.type_name());
  }
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  return value_from_json(j);
}
Value Value::from_json(const nlohmann::json& j) {
  return value_from_json(j);
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b;
    case Kind::kInt:
      return i != 0;
    case Kind::kFloat:
      return f != 0.0;
    case Kind::kString:
      return !s->empty();
    case Kind::kList:
    case Kind::kTuple:
      return !list->empty();
    case Kind::kDict:
      return !dict->items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

double Value::as_double() const {
  if (kind == Kind::kFloat) return f;
  if (kind == Kind::kInt) return static_cast<double>(i);
  if (kind == Kind::kBool) return b ? 1.0 : 0.0;
  fail("internal: as_double on {}", type_name());
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+17", shortest round-trip digits
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -5 + 1 && exponent < 16) {  // Python: fixed when -4 <= exponent < 16
    if (exponent >= 0) {
      if (static_cast<int>(digits.size()) <= exponent + 1) {
        out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
      }
    } else {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string python_str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::repr() const {
  switch (kind) {
    case Kind::kString:
      return python_str_repr(*s);
    case Kind::kList:
    case Kind::kTuple: {
      std::string out = kind == Kind::kList ? "[" : "(";
      for (size_t k = 0; k < list->size(); ++k) {
        if (k) out += ", ";
        out += (*list)[k].repr();
      }
      if (kind == Kind::kTuple && list->size() == 1) out += ",";
      return out + (kind == Kind::kList ? "]" : ")");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict->items) {
        if (!first) out += ", ";
        first = false;
        out += python_str_repr(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kUndefined:
      return "Undefined";
    default:
      return to_str();
  }
}

std::string Value::to_str() const {
  switch (kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i);
    case Kind::kFloat:
      return python_float_repr(f);
    case Kind::kString:
      return *s;
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict:
      return repr();
    case Kind::kNamespace:
      fail("printing a namespace() object is not supported");
    case Kind::kCallable:
      fail("printing a function or macro object is not supported");
  }
  return "";
}

nlohmann::ordered_json Value::to_json() const {
  switch (kind) {
    case Kind::kNone:
      return nullptr;
    case Kind::kBool:
      return b;
    case Kind::kInt:
      return i;
    case Kind::kFloat:
      return f;
    case Kind::kString:
      return *s;
    case Kind::kList:
    case Kind::kTuple: {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& e : *list) arr.push_back(e.to_json());
      return arr;
    }
    case Kind::kDict: {
      auto obj = nlohmann::ordered_json::object();
      for (const auto& [k, v] : dict->items) obj[k] = v.to_json();
      return obj;
    }
    default:
      fail("Object of type {} is not JSON serializable", type_name());
  }
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::kFloat && b.kind != K::kFloat) {
      int64_t x = a.kind == K::kBool ? a.b : a.i;
      int64_t y = b.kind == K::kBool ? b.b : b.i;
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.is_sequence_like() && b.is_sequence_like()) {
    if (a.kind != b.kind || a.list->size() != b.list->size()) return false;
    for (size_t k = 0; k < a.list->size(); ++k) {
      if (!values_equal((*a.list)[k], (*b.list)[k])) return false;
    }
    return true;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return *a.s == *b.s;
    case K::kDict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.dict == b.dict && a.call == b.call;
  }
}

static void json_escape_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t k = 0; k < s.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
    } else {
      // Decode one UTF-8 sequence and write \uXXXX (with a surrogate pair above the BMP), as json.dumps does.
      uint32_t cp = 0;
      int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
      cp = c & (0x3f >> extra);
      for (int n = 0; n < extra && k + 1 < s.size(); ++n) cp = (cp << 6) | (static_cast<unsigned char>(s[++k]) & 0x3f);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
    }
  }
  out += '"';
}

static void json_dump(const Value& v, const JsonDumpOptions& o, int depth, std::string& out) {
  using K = Value::Kind;
  if (out.size() > kMaxTemplateText)
    fail("tojson: the result is over {} bytes, too large for a chat template", kMaxTemplateText);
  auto newline = [&](int d) {
    if (!o.has_indent) return;
    if (out.size() + 1 + size_t(d) * o.indent.size() > kMaxTemplateText) {
      fail("tojson: the result is over {} bytes, too large for a chat template", kMaxTemplateText);
    }
    out += '\n';
    for (int n = 0; n < d; ++n) out += o.indent;
  };
  switch (v.kind) {
    case K::kNone:
      out += "null";
      return;
    case K::kBool:
      out += v.b ? "true" : "false";
      return;
    case K::kInt:
      out += std::to_string(v.i);
      return;
    case K::kFloat:
      if (std::isnan(v.f)) {
        out += "NaN";
      } else if (std::isinf(v.f)) {
        out += v.f > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float_repr(v.f);
      }
      return;
    case K::kString:
      json_escape_string(*v.s, o.ensure_ascii, out);
      return;
    case K::kList:
    case K::kTuple: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += o.item_separator;
        newline(depth + 1);
        json_dump((*v.list)[k], o, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case K::kDict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.dict->items) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += o.item_separator;
        newline(depth + 1);
        json_escape_string(entries[k]->first, o.ensure_ascii, out);
        out += o.key_separator;
        json_dump(entries[k]->second, o, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      fail("Object of type {} is not JSON serializable", v.type_name());
  }
}

std::string python_json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  json_dump(v, options, 0, out);
  return out;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    n = std::min(n, s.size() - k);
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

bool is_python_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0a:
    case 0x0b:
    case 0x0c:
    case 0x0d:
    case 0x1c:
    case 0x1d:
    case 0x1e:
    case 0x1f:
    case 0x20:
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200a;
  }
}

}  // namespace seedling::tmpl
