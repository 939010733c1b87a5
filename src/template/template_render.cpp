// template/template_render.cpp - walks a parsed template with jinja2's runtime semantics.
//
// Scoping follows jinja2: a for-loop body gets a fresh scope on every iteration (so `set` inside a loop never leaks,
// which is why templates use namespace()), macros see the scopes where they were defined plus their own frame, and
// `if` opens no scope. Errors name the template file, line and column.
#include "template/template_render.h"

#include <algorithm>
#include <chrono>

namespace seedling::tmpl {
namespace {

constexpr int kMaxCallDepth = 100;

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const DictItems& context, const RenderOptions& options) : options_(options) {
    auto root = std::make_shared<Scope>();
    for (const auto& [k, v] : context) (*root)[k] = v;
    scopes_.push_back(root);
  }

  void run(const Body& body, std::string& out) {
    if (exec(body, out) != Flow::kNormal) fail("{}: 'break' or 'continue' outside a for loop", options_.origin);
  }

 private:
  [[noreturn]] void fail_at(const SourcePos& pos, const std::string& what) const {
    fail("{}:{}:{}: {}", options_.origin, pos.line, pos.column, what);
  }

  // ---- names -----------------------------------------------------------------------------------------------------
  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    static const char* const kGlobals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};
    for (const char* g : kGlobals) {
      if (name == g) {
        auto c = std::make_shared<Callable>();
        c->kind = Callable::Kind::kGlobal;
        c->name = name;
        return Value::callable(c);
      }
    }
    return Value::undefined(name);
  }

  void assign(const std::vector<std::string>& targets, const Value& value, const SourcePos& pos) {
    Scope& scope = *scopes_.back();
    if (targets.size() == 1) {
      scope[targets[0]] = value;
      return;
    }
    std::vector<Value> items;
    try {
      items = iterate(value);
    } catch (const BuiltinFailure& e) {
      fail_at(pos, std::string("cannot unpack: ") + e.what());
    }
    if (items.size() != targets.size()) {
      fail_at(pos, fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    }
    for (size_t k = 0; k < targets.size(); ++k) scope[targets[k]] = items[k];
  }

  // ---- expressions ---------------------------------------------------------------------------------------------
  Value eval(const Expr& e, const Value* placeholder = nullptr) {
    try {
      return eval_inner(e, placeholder);
    } catch (const BuiltinFailure& f) {
      fail_at(e.pos, f.what());
    }
  }

  CallArgs eval_args(const Expr& e) {
    CallArgs args;
    for (const auto& a : e.items) args.args.push_back(eval(*a));
    for (const auto& [k, v] : e.kwargs) args.kwargs.emplace_back(k, eval(*v));
    return args;
  }

  Value eval_inner(const Expr& e, const Value* placeholder) {
    using EK = Expr::Kind;
    switch (e.kind) {
      case EK::kLiteral:
        return e.value;
      case EK::kName:
        return lookup(e.name);
      case EK::kList:
      case EK::kTuple: {
        List items;
        for (const auto& item : e.items) items.push_back(eval(*item));
        return e.kind == EK::kList ? Value::make_list(std::move(items)) : Value::make_tuple(std::move(items));
      }
      case EK::kDict: {
        DictItems items;
        for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
          Value key = eval(*e.items[k]);
          if (key.kind != Value::Kind::kString) fail_at(e.items[k]->pos, "dict literal keys must be strings");
          Value val = eval(*e.items[k + 1]);
          bool replaced = false;
          for (auto& [ik, iv] : items) {
            if (ik == key.str()) {
              iv = val;
              replaced = true;
            }
          }
          if (!replaced) items.emplace_back(key.str(), std::move(val));
        }
        return Value::make_dict(std::move(items));
      }
      case EK::kAttr:
        return get_attr(eval(*e.a), e.name);
      case EK::kSubscript:
        return get_item(eval(*e.a), eval(*e.b));
      case EK::kSlice:
        return slice(eval(*e.a), e.b ? eval(*e.b) : Value::none(), e.c ? eval(*e.c) : Value::none(),
                     e.d ? eval(*e.d) : Value::none());
      case EK::kCall:
        return call(eval(*e.a), eval_args(e), e);
      case EK::kFilter: {
        Value input = e.a ? eval(*e.a, placeholder) : (placeholder ? *placeholder : Value::undefined());
        return apply_filter(e.name, input, eval_args(e));
      }
      case EK::kTest:
        return Value::boolean(apply_test(e.name, eval(*e.a), eval_args(e)));
      case EK::kNeg:
      case EK::kPos: {
        Value v = eval(*e.a);
        if (!v.is_number())
          builtin_fail(
              fmt::format("bad operand type for unary {}: '{}'", e.kind == EK::kNeg ? '-' : '+', v.type_name()));
        if (e.kind == EK::kPos) return v.kind == Value::Kind::kBool ? Value::integer(v.b) : v;
        return python_binary("-", Value::integer(0), v);
      }
      case EK::kNot:
        return Value::boolean(!eval(*e.a).truthy());
      case EK::kAnd: {
        Value left = eval(*e.a);
        return left.truthy() ? eval(*e.b) : left;
      }
      case EK::kOr: {
        Value left = eval(*e.a);
        return left.truthy() ? left : eval(*e.b);
      }
      case EK::kBinary: {
        Value left = eval(*e.a);
        Value right = eval(*e.b);
        if (e.name == "~") {
          std::string l = left.to_str(), r = right.to_str();
          check_template_size(l.size() + r.size(), kMaxTemplateText, "'~': the string's bytes");
          return Value::string(l + r);
        }
        return python_binary(e.name, left, right);
      }
      case EK::kCompare:
        return Value::boolean(python_compare(e.name, eval(*e.a), eval(*e.b)));
      case EK::kCondExpr:
        if (eval(*e.a).truthy()) return eval(*e.b);
        return e.c ? eval(*e.c) : Value::undefined();
    }
    builtin_fail("unknown expression");
  }

  static int64_t slice_index(const Value& v, const char* what) {
    if (v.kind == Value::Kind::kInt) return v.i;
    if (v.kind == Value::Kind::kBool) return v.b;
    builtin_fail(fmt::format("slice {} must be an integer or none, got '{}'", what, v.type_name()));
  }

  // Python's slice semantics (negative indices, negative steps, clamping).
  Value slice(const Value& target, const Value& start_v, const Value& stop_v, const Value& step_v) {
    if (target.is_undefined()) {
      builtin_fail(target.undefined_name.empty() ? "slicing an undefined value"
                                                 : "'" + target.undefined_name + "' is undefined");
    }
    std::vector<Value> items;
    std::vector<std::string> chars;
    bool is_string = target.kind == Value::Kind::kString;
    int64_t n;
    if (is_string) {
      chars = utf8_chars(target.str());
      n = static_cast<int64_t>(chars.size());
    } else if (target.is_sequence_like()) {
      n = static_cast<int64_t>(target.list->size());
    } else {
      builtin_fail(fmt::format("'{}' object is not subscriptable", target.type_name()));
    }
    int64_t step = step_v.is_none() ? 1 : slice_index(step_v, "step");
    if (step == 0) builtin_fail("slice step cannot be zero");
    auto clamp = [&](const Value& v, int64_t fallback, bool is_start) {
      if (v.is_none()) return fallback;
      int64_t x = slice_index(v, is_start ? "start" : "stop");
      if (x < 0) x += n;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t start = clamp(start_v, step > 0 ? 0 : n - 1, true);
    int64_t stop = clamp(stop_v, step > 0 ? n : -1, false);
    std::string out_s;
    List out_l;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (is_string) {
        out_s += chars[static_cast<size_t>(k)];
      } else {
        out_l.push_back((*target.list)[static_cast<size_t>(k)]);
      }
    }
    if (is_string) return Value::string(out_s);
    return target.kind == Value::Kind::kTuple ? Value::make_tuple(std::move(out_l))
                                              : Value::make_list(std::move(out_l));
  }

  // ---- calls -----------------------------------------------------------------------------------------------------
  Value call(const Value& callee, const CallArgs& args, const Expr& e) {
    if (callee.kind != Value::Kind::kCallable) {
      if (callee.is_undefined()) {
        builtin_fail(callee.undefined_name.empty() ? "calling an undefined value"
                                                   : "'" + callee.undefined_name + "' is undefined");
      }
      builtin_fail(fmt::format("'{}' object is not callable", callee.type_name()));
    }
    const Callable& c = *callee.call;
    switch (c.kind) {
      case Callable::Kind::kMethod:
        return call_method(c.self, c.name, args);
      case Callable::Kind::kMacro:
        return call_macro(c, args, e.pos);
      case Callable::Kind::kGlobal:
        return call_global(c.name, args, e.pos);
    }
    builtin_fail("unknown callable");
  }

  Value call_global(const std::string& name, const CallArgs& args, const SourcePos& pos) {
    if (name == "raise_exception") {
      std::string message = args.get(0, "message", Value::string("")).to_str();
      throw TemplateRaised(fmt::format("{}:{}:{}: raise_exception: {}", options_.origin, pos.line, pos.column, message),
                           message);
    }
    if (name == "strftime_now") {
      std::string format = args.get(0, "format").to_str();
      char buf[512];
      size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &options_.now);
      if (n == 0 && !format.empty()) builtin_fail("strftime_now: format '" + format + "' is empty or too long");
      return Value::string(std::string(buf, n));
    }
    if (name == "namespace" || name == "dict") {
      DictItems items;
      if (!args.args.empty()) {
        if (args.args.size() > 1 || args.args[0].kind != Value::Kind::kDict) {
          builtin_fail(name + "() takes at most one positional argument, a dict");
        }
        items = args.args[0].dict->items;
      }
      Dict d{items};
      for (const auto& [k, v] : args.kwargs) d.set(k, v);
      return name == "dict" ? Value::make_dict(std::move(d.items)) : Value::make_namespace(std::move(d.items));
    }
    if (name == "range") {
      if (args.args.empty() || args.args.size() > 3 || !args.kwargs.empty())
        builtin_fail("range expects 1 to 3 integers");
      int64_t start = 0, stop, step = 1;
      auto as_int = [](const Value& v) {
        if (v.kind != Value::Kind::kInt && v.kind != Value::Kind::kBool) {
          builtin_fail(fmt::format("'{}' object cannot be interpreted as an integer", v.type_name()));
        }
        return v.kind == Value::Kind::kInt ? v.i : static_cast<int64_t>(v.b);
      };
      if (args.args.size() == 1) {
        stop = as_int(args.args[0]);
      } else {
        start = as_int(args.args[0]);
        stop = as_int(args.args[1]);
        if (args.args.size() == 3) step = as_int(args.args[2]);
      }
      if (step == 0) builtin_fail("range() arg 3 must not be zero");
      List items;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
        if (items.size() >= kMaxTemplateItems) builtin_fail("range() is too long for a chat template");
        items.push_back(Value::integer(k));
      }
      return Value::make_list(std::move(items));
    }
    builtin_fail("no function named '" + name + "'");
  }

  Value call_macro(const Callable& macro, const CallArgs& args, const SourcePos& pos) {
    const Stmt& def = *macro.macro;
    step(pos);
    if (depth_ >= kMaxCallDepth)
      fail_at(pos, fmt::format("macro '{}' nested deeper than {} calls", def.text, kMaxCallDepth));
    if (args.args.size() > def.params.size()) {
      fail_at(pos, fmt::format("macro '{}' takes not more than {} argument(s)", def.text, def.params.size()));
    }
    auto frame = std::make_shared<Scope>();
    ScopeChain chain;
    for (const auto& weak : macro.closure) {
      auto scope = weak.lock();
      if (!scope) fail_at(pos, fmt::format("macro '{}' is used after the scope that defined it ended", def.text));
      chain.push_back(std::move(scope));
    }
    chain.push_back(frame);
    ScopeChain saved = std::move(scopes_);
    scopes_ = std::move(chain);
    ++depth_;
    struct Restore {
      Renderer* r;
      ScopeChain* saved;
      ~Restore() {
        r->scopes_ = std::move(*saved);
        --r->depth_;
      }
    } restore{this, &saved};
    for (const auto& kwarg : args.kwargs) {
      const std::string& k = kwarg.first;
      bool known = std::any_of(def.params.begin(), def.params.end(), [&](const MacroParam& p) { return p.name == k; });
      if (!known) fail_at(pos, fmt::format("macro '{}' has no parameter '{}'", def.text, k));
    }
    for (size_t k = 0; k < def.params.size(); ++k) {
      const MacroParam& p = def.params[k];
      Value v = args.get(k, p.name.c_str(), Value::undefined(p.name));
      if (v.is_undefined() && !args.has(k, p.name.c_str()) && p.default_value) v = eval(*p.default_value);
      (*frame)[p.name] = v;
    }
    if (!macro.caller.is_undefined()) (*frame)["caller"] = macro.caller;
    std::string out;
    if (exec(def.body, out) != Flow::kNormal) fail_at(pos, "'break' or 'continue' outside a for loop in macro");
    return Value::string(std::move(out));
  }

  // ---- statements ------------------------------------------------------------------------------------------------
  Flow exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      Flow f = exec_one(*s, out);
      if (out.size() > kMaxTemplateText) {
        fail_at(s->pos,
                fmt::format("the output would be over {} bytes, too large for a chat template", kMaxTemplateText));
      }
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  // One loop iteration or macro call: past the options' max_steps or max_seconds in one render, an error at pos,
  // not a hang.
  void step(const SourcePos& pos) {
    if (++steps_ > options_.max_steps) {
      fail_at(pos, fmt::format("more than {} loop iterations and macro calls, too many for a chat template",
                               options_.max_steps));
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() > options_.max_seconds) {
      fail_at(pos, fmt::format("rendering took over {} s, too long for a chat template", options_.max_seconds));
    }
  }

  std::string render_block(const Body& body, const SourcePos& pos) {
    std::string text;
    if (exec(body, text) != Flow::kNormal) fail_at(pos, "'break' or 'continue' inside a block");
    return text;
  }

  Flow exec_one(const Stmt& s, std::string& out) {
    using SK = Stmt::Kind;
    switch (s.kind) {
      case SK::kText:
        out += s.text;
        return Flow::kNormal;
      case SK::kOutput: {
        Value v = eval(*s.expr);
        try {
          out += v.to_str();
        } catch (const Error& err) {
          fail_at(s.expr->pos, err.what());
        }
        return Flow::kNormal;
      }
      case SK::kIf:
        for (const auto& [cond, branch] : s.branches) {
          if (eval(*cond).truthy()) return exec(branch, out);
        }
        return exec(s.else_body, out);
      case SK::kFor:
        return exec_for(s, out);
      case SK::kSet: {
        Value v = eval(*s.expr);
        if (s.attr_target) {
          Value target = eval(*s.attr_target);
          if (target.kind != Value::Kind::kNamespace) {
            fail_at(s.pos, "Cannot assign attribute on non-namespace object");
          }
          target.dict->set(s.text, v);
        } else {
          assign(s.targets, v, s.pos);
        }
        return Flow::kNormal;
      }
      case SK::kSetBlock: {
        Value text = Value::string(render_block(s.body, s.pos));
        assign(s.targets, s.expr ? eval(*s.expr, &text) : text, s.pos);
        return Flow::kNormal;
      }
      case SK::kMacro: {
        auto c = std::make_shared<Callable>();
        c->kind = Callable::Kind::kMacro;
        c->name = s.text;
        c->macro = std::shared_ptr<const Stmt>(std::shared_ptr<const Stmt>{}, &s);
        c->closure.assign(scopes_.begin(), scopes_.end());
        (*scopes_.back())[s.text] = Value::callable(c);
        return Flow::kNormal;
      }
      case SK::kCallBlock: {
        auto caller = std::make_shared<Stmt>();
        caller->kind = SK::kMacro;
        caller->text = "caller";
        caller->params = s.params;
        caller->body = s.body;
        callers_.push_back(caller);
        auto caller_fn = std::make_shared<Callable>();
        caller_fn->kind = Callable::Kind::kMacro;
        caller_fn->name = "caller";
        caller_fn->macro = caller;
        caller_fn->closure.assign(scopes_.begin(), scopes_.end());
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.a);
        if (callee.kind != Value::Kind::kCallable || callee.call->kind != Callable::Kind::kMacro) {
          fail_at(s.pos, "{% call %} needs a macro");
        }
        auto with_caller = std::make_shared<Callable>(*callee.call);
        with_caller->caller = Value::callable(caller_fn);
        out += call_macro(*with_caller, eval_args(call_expr), s.pos).str();
        return Flow::kNormal;
      }
      case SK::kFilterBlock: {
        Value text = Value::string(render_block(s.body, s.pos));
        out += eval(*s.expr, &text).to_str();
        return Flow::kNormal;
      }
      case SK::kBreak:
        return Flow::kBreak;
      case SK::kContinue:
        return Flow::kContinue;
      case SK::kScope: {
        scopes_.push_back(std::make_shared<Scope>());
        Flow f = exec(s.body, out);
        scopes_.pop_back();
        return f;
      }
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    Value iterable = eval(*s.expr);
    std::vector<Value> items;
    try {
      items = iterate(iterable);
    } catch (const BuiltinFailure& f) {
      fail_at(s.expr->pos, f.what());
    }
    if (s.filter) {  // "for x in xs if cond": the loop sees only the items that pass, and counts only those
      std::vector<Value> kept;
      for (const auto& item : items) {
        step(s.pos);
        scopes_.push_back(std::make_shared<Scope>());
        assign(s.targets, item, s.pos);
        bool keep = eval(*s.filter).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      step(s.pos);
      auto scope = std::make_shared<Scope>();
      scopes_.push_back(scope);
      assign(s.targets, items[static_cast<size_t>(k)], s.pos);
      DictItems loop = {{"index", Value::integer(k + 1)},    {"index0", Value::integer(k)},
                        {"revindex", Value::integer(n - k)}, {"revindex0", Value::integer(n - k - 1)},
                        {"first", Value::boolean(k == 0)},   {"last", Value::boolean(k == n - 1)},
                        {"length", Value::integer(n)},       {"depth", Value::integer(1)},
                        {"depth0", Value::integer(0)}};
      if (k > 0) loop.emplace_back("previtem", items[static_cast<size_t>(k - 1)]);
      if (k + 1 < n) loop.emplace_back("nextitem", items[static_cast<size_t>(k + 1)]);
      (*scope)["loop"] = Value::make_namespace(std::move(loop));
      Flow f = exec(s.body, out);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  const RenderOptions& options_;
  ScopeChain scopes_;
  std::vector<std::shared_ptr<const Stmt>> callers_;
  int depth_ = 0;
  int64_t steps_ = 0;  // loop iterations and macro calls so far (step())
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

std::string render_template(const Body& body, const DictItems& context, const RenderOptions& options) {
  Renderer renderer(context, options);
  std::string out;
  renderer.run(body, out);
  return out;
}

}  // namespace seedling::tmpl
