// template/template_render.h - evaluating a parsed chat template (internal to src/template).
//
// render_template walks the AST with jinja2's semantics as transformers configures it (ImmutableSandboxedEnvironment,
// default Undefined, loopcontrols, its tojson, raise_exception and strftime_now). template_builtins.cpp holds the
// filters, tests and methods; both throw BuiltinFailure, which the renderer turns into a seedling::Error naming the
// template file, line and column.
#pragma once

#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "template/template_ast.h"
#include "template/value.h"

namespace seedling::tmpl {

// A failure inside a filter, test, method or operator; the renderer adds the position.
struct BuiltinFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void builtin_fail(const std::string& message);
// builtin_fail naming `what` when n passes limit (kMaxTemplateText or kMaxTemplateItems, template/value.h).
void check_template_size(size_t n, size_t limit, const char* what);

// The template called raise_exception(message). what() is "<origin>:<line>:<column>: raise_exception: <message>".
class TemplateRaised : public Error {
 public:
  TemplateRaised(const std::string& what, std::string message) : Error(what), message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // Positional argument `index`, else keyword `name`, else `fallback`.
  Value get(size_t index, const char* name, Value fallback = Value::undefined()) const;
  bool has(size_t index, const char* name) const;
};

using Scope = std::unordered_map<std::string, Value>;
using ScopeChain = std::vector<std::shared_ptr<Scope>>;

struct Callable {
  enum class Kind { kMacro, kMethod, kGlobal };
  Kind kind = Kind::kGlobal;
  std::string name;                   // macro, method or global function name
  std::shared_ptr<const Stmt> macro;  // kMacro
  Value self;                         // kMethod: the object the method is bound to
  // kMacro: the scopes visible where the macro was defined. Weak, because the defining scope holds the macro:
  // strong pointers would make a cycle and leak every template render.
  std::vector<std::weak_ptr<Scope>> closure;
  Value caller;  // kMacro called from {% call %}: the caller() macro, else undefined
};

// Filters, tests and methods (template_builtins.cpp).
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);
bool has_method(const Value& self, const std::string& name);
Value call_method(const Value& self, const std::string& name, const CallArgs& args);
Value python_add(const Value& a, const Value& b);
Value python_binary(const std::string& op, const Value& a, const Value& b);
bool python_compare(const std::string& op, const Value& a, const Value& b);
bool python_contains(const Value& container, const Value& item);
std::vector<Value> iterate(const Value& v);          // Python iteration: list items, dict keys, string characters
Value get_item(const Value& obj, const Value& key);  // obj[key] with jinja2's fallbacks; undefined when missing
Value get_attr(const Value& obj, const std::string& name);  // obj.name with jinja2's fallbacks

struct RenderOptions {
  std::string origin;
  std::tm now{};  // what strftime_now formats
  // The render's work limits (template/value.h says why): loop iterations and macro calls, and seconds.
  int64_t max_steps = kMaxRenderSteps;
  double max_seconds = kMaxRenderSeconds;
};

std::string render_template(const Body& body, const DictItems& context, const RenderOptions& options);

}  // namespace seedling::tmpl
