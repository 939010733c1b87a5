// template/template_ast.h - the parsed form of a Jinja2 chat template.
//
// The parser (template_parser.cpp) turns source text into these nodes once; the renderer (template_render.cpp) walks
// them for every conversation. Every node carries the 1-based line and column it came from, so a runtime error names
// the place in the template file.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace seedling::tmpl {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct SourcePos {
  int line = 1;
  int column = 1;
};

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items as key, value pairs (items[2k], items[2k+1])
    kAttr,       // a.name
    kSubscript,  // a[b]
    kSlice,      // a[b:c:d], missing parts are null
    kCall,       // a(items..., kwargs...)
    kFilter,     // a | name(items..., kwargs...)   (a is null inside a filter block)
    kTest,       // a is name(items...)
    kNeg,        // -a
    kPos,        // +a
    kNot,        // not a
    kAnd,        // a and b
    kOr,         // a or b
    kBinary,     // a op b: + - * / // % ** ~
    kCompare,    // a op b: == != < <= > >= in notin
    kCondExpr,   // b if a else c   (c may be null)
  };
  Kind kind = Kind::kLiteral;
  SourcePos pos;
  Value value;
  std::string name;  // name, attribute, filter, test, operator
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::shared_ptr<const Stmt>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition, body)...; else_body
    kFor,          // targets in expr [if filter] body [else else_body]
    kSet,          // targets = expr, or attr_target.name = expr
    kSetBlock,     // {% set target %}body{% endset %}
    kMacro,        // {% macro name(params) %}body{% endmacro %}
    kCallBlock,    // {% call expr %}body{% endcall %}
    kFilterBlock,  // {% filter expr %}body{% endfilter %}
    kBreak,
    kContinue,
    kScope,  // {% generation %}body{% endgeneration %}: transformers' assistant-mask tag, renders its body
  };
  Kind kind = Kind::kText;
  SourcePos pos;
  std::string text;     // kText, macro name, set attribute name
  ExprPtr expr;         // output, for iterable, set value, call-block call, filter-block filter chain
  ExprPtr filter;       // for ... if filter
  ExprPtr attr_target;  // kSet on a namespace attribute: the object expression
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
};

// Parses `source` with jinja2's settings as transformers uses them: trim_blocks, lstrip_blocks, no trailing newline.
// Syntax errors and unsupported statements fail with "<origin>:<line>:<column>: ...".
Body parse_template(const std::string& source, const std::string& origin);

}  // namespace seedling::tmpl
