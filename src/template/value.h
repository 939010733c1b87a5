// template/value.h - the values a chat template computes with.
//
// A small variant that behaves like the Python objects jinja2 hands a Hugging Face chat template: undefined (jinja2's
// default Undefined: prints empty, is falsy, iterates empty), None, bool, int, float, str (UTF-8), list and tuple,
// dict (insertion-ordered, string keys, as JSON objects are), plus the few callables a template can hold (macros,
// bound methods, global functions) and jinja2's namespace(). The invariant every function here keeps: the bytes it
// prints are the bytes CPython prints (str(), repr(), json.dumps), because those bytes are what a model was trained on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace seedling::tmpl {

struct Value;
using List = std::vector<Value>;

// The most a template may build or do: text of kMaxTemplateText bytes, lists of kMaxTemplateItems items,
// kMaxRenderSteps loop iterations and macro calls, kMaxRenderSeconds of rendering (the clock read at each step: every
// single operation is bounded by the sizes). A chat template renders a prompt in milliseconds, far below each; past
// one, rendering stops with an error naming it instead of exhausting memory or hanging (`'x' * 2**40`,
// `tojson(indent=2**31)`, nested loops of range(2**20), a macro that calls itself twice a level).
inline constexpr size_t kMaxTemplateText = size_t{1} << 24;
inline constexpr size_t kMaxTemplateItems = size_t{1} << 20;
inline constexpr int64_t kMaxRenderSteps = int64_t{1} << 20;
inline constexpr double kMaxRenderSeconds = 5.0;
using DictItems = std::vector<std::pair<std::string, Value>>;

// A dict keeps insertion order, as Python's dict and nlohmann::ordered_json do. Lookups are linear: chat-template
// dicts have a handful of keys.
struct Dict {
  DictItems items;
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value value);
};

struct Callable;  // defined by the interpreter (macro, bound method, builtin function)

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kCallable };

  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::shared_ptr<const std::string> s;
  std::shared_ptr<const List> list;      // kList and kTuple
  std::shared_ptr<Dict> dict;            // kDict (never mutated once built) and kNamespace (mutable, shared)
  std::shared_ptr<const Callable> call;  // kCallable
  std::string undefined_name;            // what an undefined value was looked up as, for error messages

  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value make_list(List v);
  static Value make_tuple(List v);
  static Value make_dict(DictItems v);
  static Value make_namespace(DictItems v);
  static Value callable(std::shared_ptr<const Callable> c);
  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const nlohmann::json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool is_sequence_like() const { return kind == Kind::kList || kind == Kind::kTuple; }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  const std::string& str() const { return *s; }

  bool truthy() const;                     // Python bool()
  double as_double() const;                // for int/float/bool
  std::string to_str() const;              // Python str(); undefined -> ""
  std::string repr() const;                // Python repr()
  const char* type_name() const;           // Python type name: 'str', 'list', 'dict', 'NoneType', ...
  nlohmann::ordered_json to_json() const;  // fails on undefined and callables, as json.dumps does
};

bool values_equal(const Value& a, const Value& b);  // Python ==

// Python float repr: shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16, else d.ddde+XX.
std::string python_float_repr(double v);
// Python repr of a str: single quotes unless the text has ' and no ", escapes as CPython does for ASCII.
std::string python_str_repr(const std::string& s);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent < 0 means None; indent_str overrides spaces.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // the text one level of indentation adds
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string python_json_dumps(const Value& v, const JsonDumpOptions& options);

// UTF-8 helpers: Python indexes strings by code point.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);
bool is_python_space(uint32_t cp);

}  // namespace seedling::tmpl
