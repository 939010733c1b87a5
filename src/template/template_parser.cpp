// template/template_parser.cpp - Jinja2 source text -> template_ast.h nodes.
//
// Two stages, as jinja2's lexer has them: a scanner splits the source into text, {{ }} and {% %} segments and applies
// the whitespace rules (trim_blocks, lstrip_blocks, the - and + markers, the dropped trailing newline) exactly as
// jinja2's regexes do; then each tag's inside is tokenized and parsed with jinja2's operator precedence
// (or < and < not < compare < + - < ~ < * / // % < ** < unary, with filters and tests binding tighter still).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <set>

#include "core/error.h"
#include "template/template_ast.h"

namespace seedling::tmpl {
namespace {

struct Segment {
  enum class Kind { kText, kVar, kBlock };
  Kind kind;
  std::string text;
  size_t offset;  // where the text (or the tag's inside) starts in the source
};

class Locator {
 public:
  explicit Locator(const std::string& source) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < source.size(); ++k) {
      if (source[k] == '\n') line_starts_.push_back(k + 1);
    }
  }
  SourcePos at(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

 private:
  std::vector<size_t> line_starts_;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string rstrip_all(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  return s.substr(0, end);
}

// Splits source into segments. Follows jinja2.lexer: "-" strips all whitespace on its side, lstrip_blocks removes
// spaces and tabs between a line start and a {% or {# tag, trim_blocks removes one newline after %} and #}.
std::vector<Segment> scan(const std::string& source, const std::string& origin, const Locator& loc) {
  std::vector<Segment> out;
  size_t pos = 0;
  bool line_starting = true;
  auto fail_at = [&](size_t offset, const std::string& what) {
    SourcePos p = loc.at(offset);
    fail("{}:{}:{}: {}", origin, p.line, p.column, what);
  };
  while (pos < source.size()) {
    size_t tag = pos;
    while (true) {
      tag = source.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= source.size()) {
        tag = std::string::npos;
        break;
      }
      char next = source[tag + 1];
      if (next == '{' || next == '%' || next == '#') break;
      ++tag;
    }
    std::string text = source.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
    if (tag == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, pos});
      break;
    }
    char type = source[tag + 1];
    char sign = tag + 2 < source.size() ? source[tag + 2] : '\0';
    if (sign == '-') {
      text = rstrip_all(text);
    } else if (sign != '+' && type != '{') {
      size_t l = text.rfind('\n');
      l = l == std::string::npos ? 0 : l + 1;
      if ((l > 0 || line_starting) && l < text.size() &&
          std::all_of(text.begin() + l, text.end(), [](char c) { return is_space(c); })) {
        text.resize(l);
      }
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, pos});
    size_t inner = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
    size_t end;  // index of the closing two characters
    if (type == '#') {
      end = source.find("#}", inner);
      if (end == std::string::npos) fail_at(tag, "unclosed comment: expected '#}'");
    } else {
      const char closer = type == '{' ? '}' : '%';
      end = std::string::npos;
      char quote = 0;
      for (size_t k = inner; k + 1 < source.size(); ++k) {
        char c = source[k];
        if (quote) {
          if (c == '\\') {
            ++k;
          } else if (c == quote) {
            quote = 0;
          }
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == closer && source[k + 1] == '}') {
          end = k;
          break;
        }
      }
      if (end == std::string::npos) {
        fail_at(tag, type == '{' ? "unclosed expression: expected '}}'" : "unclosed statement: expected '%}'");
      }
    }
    char end_sign = end > inner ? source[end - 1] : '\0';
    size_t inner_end = (end_sign == '-' || (end_sign == '+' && type != '{')) ? end - 1 : end;
    if (type != '#') {
      out.push_back(
          {type == '{' ? Segment::Kind::kVar : Segment::Kind::kBlock, source.substr(inner, inner_end - inner), inner});
    }
    pos = end + 2;
    if (end_sign == '-') {
      while (pos < source.size() && is_space(source[pos])) ++pos;
    } else if (type != '{' && end_sign != '+' && pos < source.size() && source[pos] == '\n') {
      ++pos;  // trim_blocks
    }
    line_starting = pos > 0 && source[pos - 1] == '\n';
    // {% raw %}: everything up to {% endraw %} is text.
    if (type == '%') {
      std::string body = out.back().text;
      size_t a = body.find_first_not_of(" \t\n\r");
      size_t b = body.find_last_not_of(" \t\n\r");
      if (a != std::string::npos && body.substr(a, b - a + 1) == "raw") {
        out.pop_back();
        size_t search = pos;
        while (true) {
          size_t open = source.find("{%", search);
          if (open == std::string::npos) fail_at(tag, "unclosed raw block: expected '{% endraw %}'");
          size_t close = source.find("%}", open);
          if (close == std::string::npos) fail_at(open, "unclosed statement: expected '%}'");
          std::string inside = source.substr(open + 2, close - open - 2);
          std::string word;
          for (char c : inside) {
            if (std::isalpha(static_cast<unsigned char>(c))) word += c;
          }
          if (word == "endraw") {
            std::string raw = source.substr(pos, open - pos);
            if (!inside.empty() && inside[0] == '-') raw = rstrip_all(raw);
            if (!raw.empty()) out.push_back({Segment::Kind::kText, raw, pos});
            pos = close + 2;
            if (close > 0 && source[close - 1] == '-') {
              while (pos < source.size() && is_space(source[pos])) ++pos;
            } else if (pos < source.size() && source[pos] == '\n') {
              ++pos;
            }
            line_starting = source[pos - 1] == '\n';
            break;
          }
          search = close + 2;
        }
      }
    }
  }
  return out;
}

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  Value value;
  size_t offset = 0;
};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Parser {
 public:
  Parser(const std::string& source, const std::string& origin)
      : source_(source), origin_(origin), loc_(source_), segments_(scan(source_, origin_, loc_)) {}

  Body parse() {
    std::string end_word;
    Body body = parse_body({}, end_word);
    return body;
  }

 private:
  [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
    SourcePos p = loc_.at(offset);
    fail("{}:{}:{}: {}", origin_, p.line, p.column, what);
  }

  // ---- tokens of one tag -------------------------------------------------------------------------------------
  void tokenize(const Segment& seg) {
    tokens_.clear();
    tok_ = 0;
    const std::string& s = seg.text;
    size_t k = 0;
    static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                 ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
    while (k < s.size()) {
      char c = s[k];
      size_t start = k;
      if (is_space(c)) {
        ++k;
        continue;
      }
      Token t;
      t.offset = seg.offset + start;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
        t.kind = Token::Kind::kName;
        t.text = s.substr(start, k - start);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        bool is_float = false;
        while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
        if (k + 1 < s.size() && s[k] == '.' && std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
          is_float = true;
          ++k;
          while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
        }
        if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
          size_t e = k + 1;
          if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
          if (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) {
            is_float = true;
            k = e;
            while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
          }
        }
        std::string digits;
        for (size_t n = start; n < k; ++n) {
          if (s[n] != '_') digits += s[n];
        }
        t.text = digits;
        if (is_float) {
          t.kind = Token::Kind::kFloat;
          t.value = Value::floating(std::strtod(digits.c_str(), nullptr));
        } else {
          t.kind = Token::Kind::kInt;
          errno = 0;
          long long v = std::strtoll(digits.c_str(), nullptr, 10);
          if (errno == ERANGE) fail_at(t.offset, "integer literal out of 64-bit range");
          t.value = Value::integer(v);
        }
      } else if (c == '\'' || c == '"') {
        t.kind = Token::Kind::kString;
        t.value = Value::string(read_string(s, k, seg.offset));
      } else {
        bool matched = false;
        for (const char* op : kOps) {
          size_t n = std::char_traits<char>::length(op);
          if (s.compare(k, n, op) == 0) {
            t.kind = Token::Kind::kOp;
            t.text = op;
            k += n;
            matched = true;
            break;
          }
        }
        if (!matched) fail_at(t.offset, fmt::format("unexpected character '{}' in expression", c));
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.offset = seg.offset + s.size();
    tokens_.push_back(end);
  }

  std::string read_string(const std::string& s, size_t& k, size_t base) {
    char quote = s[k++];
    std::string out;
    while (k < s.size() && s[k] != quote) {
      char c = s[k++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (k >= s.size()) break;
      char e = s[k++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (k + n > s.size()) fail_at(base + k, "truncated escape in string literal");
          uint32_t cp = static_cast<uint32_t>(std::strtoul(s.substr(k, n).c_str(), nullptr, 16));
          k += n;
          append_utf8(out, cp);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    if (k >= s.size()) fail_at(base + k, "unterminated string literal");
    ++k;
    return out;
  }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(tok_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[tok_];
    if (tok_ + 1 < tokens_.size()) ++tok_;
    return t;
  }
  bool at_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kOp && peek(ahead).text == op;
  }
  bool at_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kName && peek(ahead).text == name;
  }
  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  std::string describe(const Token& t) const {
    if (t.kind == Token::Kind::kEnd) return "end of tag";
    if (t.kind == Token::Kind::kString) return "string literal";
    return "'" + t.text + "'";
  }
  void expect_op(const char* op) {
    if (!at_op(op)) fail_at(peek().offset, fmt::format("expected '{}', got {}", op, describe(peek())));
    next();
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::kName) fail_at(peek().offset, "expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail_at(peek().offset, "expected end of tag, got " + describe(peek()));
  }

  std::shared_ptr<Expr> node(Expr::Kind kind, size_t offset) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->pos = loc_.at(offset);
    return e;
  }

  // Bounds recursion so hostile input (e.g. 100000 nested parentheses) fails cleanly instead of overflowing the stack.
  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser, size_t offset) : p(parser) {
      if (++p->depth_ > kMaxNesting) p->fail_at(offset, "template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
  };
  static constexpr int kMaxNesting = 200;

  // ---- expressions (jinja2.parser precedence) ------------------------------------------------------------------
  ExprPtr parse_expression() {
    DepthGuard guard(this, peek().offset);
    return parse_condexpr();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      auto e = node(Expr::Kind::kCondExpr, next().offset);
      e->b = expr;
      e->a = parse_or();
      if (at_name("else")) {
        next();
        e->c = parse_condexpr();
      }
      expr = e;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      auto e = node(Expr::Kind::kOr, next().offset);
      e->a = left;
      e->b = parse_and();
      left = e;
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      auto e = node(Expr::Kind::kAnd, next().offset);
      e->a = left;
      e->b = parse_not();
      left = e;
    }
    return left;
  }

  ExprPtr parse_not() {
    DepthGuard guard(this, peek().offset);
    if (at_name("not")) {
      auto e = node(Expr::Kind::kNot, next().offset);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    while (true) {
      std::string op;
      size_t offset = peek().offset;
      if (peek().kind == Token::Kind::kOp &&
          (at_op("==") || at_op("!=") || at_op("<") || at_op(">") || at_op("<=") || at_op(">="))) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        return left;
      }
      auto e = node(Expr::Kind::kCompare, offset);
      e->name = op;
      e->a = left;
      e->b = parse_math1();
      left = e;
    }
  }

  ExprPtr binary(ExprPtr left, const std::string& op, size_t offset, ExprPtr right) {
    auto e = node(Expr::Kind::kBinary, offset);
    e->name = op;
    e->a = std::move(left);
    e->b = std::move(right);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      size_t offset = peek().offset;
      std::string op = next().text;
      left = binary(left, op, offset, parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_op("~")) {
      size_t offset = next().offset;
      left = binary(left, "~", offset, parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      size_t offset = peek().offset;
      std::string op = next().text;
      left = binary(left, op, offset, parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_op("**")) {
      size_t offset = next().offset;
      left = binary(left, "**", offset, parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this, peek().offset);
    ExprPtr expr;
    if (at_op("-") || at_op("+")) {
      bool neg = at_op("-");
      auto e = node(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, next().offset);
      e->a = parse_unary(false);
      expr = e;
    } else {
      expr = parse_postfix(parse_primary());
    }
    if (with_filter) expr = parse_filter_expr(expr);
    return expr;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Token::Kind::kName: {
        next();
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto e = node(Expr::Kind::kLiteral, t.offset);
          e->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          auto e = node(Expr::Kind::kLiteral, t.offset);
          e->value = Value::none();
          return e;
        }
        auto e = node(Expr::Kind::kName, t.offset);
        e->name = t.text;
        return e;
      }
      case Token::Kind::kString: {
        auto e = node(Expr::Kind::kLiteral, t.offset);
        std::string text = next().value.str();
        while (peek().kind == Token::Kind::kString) text += next().value.str();  // adjacent literals concatenate
        e->value = Value::string(std::move(text));
        return e;
      }
      case Token::Kind::kInt:
      case Token::Kind::kFloat: {
        auto e = node(Expr::Kind::kLiteral, t.offset);
        e->value = next().value;
        return e;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          next();
          ExprPtr inner = parse_tuple_or_expr(")");
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          auto e = node(Expr::Kind::kList, next().offset);
          while (!at_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (at_op("]")) break;
            e->items.push_back(parse_expression());
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = node(Expr::Kind::kDict, next().offset);
          while (!at_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (at_op("}")) break;
            e->items.push_back(parse_expression());
            expect_op(":");
            e->items.push_back(parse_expression());
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail_at(t.offset, "expected an expression, got " + describe(t));
  }

  // Inside parentheses: "()" is an empty tuple, "(a)" is a, "(a,)" and "(a, b)" are tuples.
  ExprPtr parse_tuple_or_expr(const char* closer) {
    size_t offset = peek().offset;
    if (at_op(closer)) return node(Expr::Kind::kTuple, offset);
    ExprPtr first = parse_expression();
    if (!at_op(",")) return first;
    auto e = node(Expr::Kind::kTuple, offset);
    e->items.push_back(first);
    while (at_op(",")) {
      next();
      if (at_op(closer)) break;
      e->items.push_back(parse_expression());
    }
    return e;
  }

  ExprPtr parse_postfix(ExprPtr expr) {
    while (true) {
      if (at_op(".")) {
        size_t offset = next().offset;
        if (peek().kind == Token::Kind::kInt) {
          auto e = node(Expr::Kind::kSubscript, offset);
          e->a = expr;
          auto idx = node(Expr::Kind::kLiteral, peek().offset);
          idx->value = next().value;
          e->b = idx;
          expr = e;
        } else {
          auto e = node(Expr::Kind::kAttr, offset);
          e->a = expr;
          e->name = expect_name();
          expr = e;
        }
      } else if (at_op("[")) {
        expr = parse_subscript(expr);
      } else if (at_op("(")) {
        expr = parse_call(expr);
      } else {
        return expr;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    size_t offset = next().offset;  // '['
    ExprPtr parts[3];
    int colons = 0;
    while (!at_op("]")) {
      if (at_op(":")) {
        next();
        if (++colons > 2) fail_at(peek().offset, "too many ':' in slice");
        continue;
      }
      if (parts[colons]) fail_at(peek().offset, "expected ']' or ':', got " + describe(peek()));
      parts[colons] = parse_expression();
      if (colons == 0 && at_op(",")) fail_at(peek().offset, "tuple subscripts are not supported");
    }
    expect_op("]");
    if (colons == 0) {
      if (!parts[0]) fail_at(offset, "empty subscript");
      auto e = node(Expr::Kind::kSubscript, offset);
      e->a = target;
      e->b = parts[0];
      return e;
    }
    auto e = node(Expr::Kind::kSlice, offset);
    e->a = target;
    e->b = parts[0];
    e->c = parts[1];
    e->d = parts[2];
    return e;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!at_op(")")) {
      if (!call.items.empty() || !call.kwargs.empty()) expect_op(",");
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) fail_at(peek().offset, "*args and **kwargs in calls are not supported");
      if (peek().kind == Token::Kind::kName && at_op("=", 1)) {
        std::string name = next().text;
        next();
        call.kwargs.emplace_back(name, parse_expression());
      } else {
        if (!call.kwargs.empty()) fail_at(peek().offset, "positional argument after keyword argument");
        call.items.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(Expr::Kind::kCall, peek().offset);
    e->a = callee;
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr expr) {
    while (true) {
      if (at_op("|")) {
        expr = parse_filter(expr);
      } else if (at_name("is")) {
        expr = parse_test(expr);
      } else if (at_op("(")) {
        expr = parse_call(expr);
      } else {
        return expr;
      }
    }
  }

  ExprPtr parse_filter(ExprPtr expr) {
    size_t offset = next().offset;  // '|'
    auto e = node(Expr::Kind::kFilter, offset);
    e->a = expr;
    e->name = expect_name();
    while (at_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    if (at_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr expr) {
    size_t offset = next().offset;  // 'is'
    bool negated = false;
    if (at_name("not")) {
      next();
      negated = true;
    }
    auto e = node(Expr::Kind::kTest, offset);
    e->a = expr;
    e->name = expect_name();
    const Token& t = peek();
    if (at_op("(")) {
      parse_call_args(*e);
    } else if ((t.kind == Token::Kind::kName || t.kind == Token::Kind::kString || t.kind == Token::Kind::kInt ||
                t.kind == Token::Kind::kFloat || at_op("(") || at_op("[") || at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) fail_at(t.offset, "You cannot chain multiple tests with is");
      e->items.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = node(Expr::Kind::kNot, offset);
    n->a = e;
    return n;
  }

  // ---- statements -------------------------------------------------------------------------------------------------
  static bool is_end_word(const std::set<std::string>& ends, const std::string& word) { return ends.count(word) > 0; }

  // Parses segments until a block tag whose first word is in `ends`; leaves the tokens of that tag loaded.
  Body parse_body(const std::set<std::string>& ends, std::string& end_word) {
    Body body;
    while (seg_ < segments_.size()) {
      const Segment& seg = segments_[seg_++];
      if (seg.kind == Segment::Kind::kText) {
        auto s = std::make_shared<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = loc_.at(seg.offset);
        s->text = seg.text;
        body.push_back(s);
        continue;
      }
      tokenize(seg);
      if (seg.kind == Segment::Kind::kVar) {
        auto s = std::make_shared<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = loc_.at(seg.offset);
        if (at_end()) fail_at(seg.offset, "expected an expression, got end of tag");
        s->expr = parse_tuple_or_expr_top();
        expect_end();
        body.push_back(s);
        continue;
      }
      if (peek().kind != Token::Kind::kName)
        fail_at(peek().offset, "expected a statement name, got " + describe(peek()));
      const std::string word = peek().text;
      if (is_end_word(ends, word)) {
        end_word = word;
        last_block_offset_ = seg.offset;
        return body;
      }
      body.push_back(parse_statement(seg));
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
      fail_at(source_.size(), "unexpected end of template: expected " + list + " to close the block opened earlier");
    }
    return body;
  }

  ExprPtr parse_tuple_or_expr_top() {
    size_t offset = peek().offset;
    ExprPtr first = parse_expression();
    if (!at_op(",")) return first;
    auto e = node(Expr::Kind::kTuple, offset);
    e->items.push_back(first);
    while (at_op(",")) {
      next();
      if (at_end()) break;
      e->items.push_back(parse_expression());
    }
    return e;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = at_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (at_op(",")) {
      next();
      if (peek().kind != Token::Kind::kName) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  std::shared_ptr<const Stmt> parse_statement(const Segment& seg) {
    DepthGuard guard(this, seg.offset);
    auto s = std::make_shared<Stmt>();
    s->pos = loc_.at(seg.offset);
    size_t word_offset = peek().offset;
    const std::string word = next().text;
    std::string end_word;
    if (word == "if") {
      s->kind = Stmt::Kind::kIf;
      ExprPtr cond = parse_expression();
      expect_end();
      while (true) {
        Body branch = parse_body({"elif", "else", "endif"}, end_word);
        s->branches.emplace_back(cond, std::move(branch));
        next();
        if (end_word == "elif") {
          cond = parse_expression();
          expect_end();
          continue;
        }
        expect_end();
        if (end_word == "else") {
          s->else_body = parse_body({"endif"}, end_word);
          next();
          expect_end();
        }
        break;
      }
    } else if (word == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets = parse_targets();
      if (!at_name("in")) fail_at(peek().offset, "expected 'in' in for loop, got " + describe(peek()));
      next();
      s->expr = parse_or();  // jinja2: parse_tuple(with_condexpr=False), so "if" starts the loop filter
      if (at_name("if")) {
        next();
        s->filter = parse_expression();
      }
      if (at_name("recursive")) fail_at(peek().offset, "recursive for loops are not supported");
      expect_end();
      s->body = parse_body({"else", "endfor"}, end_word);
      next();
      expect_end();
      if (end_word == "else") {
        s->else_body = parse_body({"endfor"}, end_word);
        next();
        expect_end();
      }
    } else if (word == "set") {
      if (peek().kind == Token::Kind::kName && at_op(".", 1)) {
        s->kind = Stmt::Kind::kSet;
        auto obj = node(Expr::Kind::kName, peek().offset);
        obj->name = next().text;
        s->attr_target = obj;
        next();
        s->text = expect_name();
        expect_op("=");
        s->expr = parse_tuple_or_expr_top();
        expect_end();
      } else {
        s->targets = parse_targets();
        if (at_op("=")) {
          s->kind = Stmt::Kind::kSet;
          next();
          s->expr = parse_tuple_or_expr_top();
          expect_end();
        } else {
          s->kind = Stmt::Kind::kSetBlock;
          if (s->targets.size() != 1) fail_at(word_offset, "a block set assigns exactly one name");
          if (at_op("|")) {
            s->expr = parse_filter_chain();
          }
          expect_end();
          s->body = parse_body({"endset"}, end_word);
          next();
          expect_end();
        }
      }
    } else if (word == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->text = expect_name();
      parse_params(*s);
      expect_end();
      s->body = parse_body({"endmacro"}, end_word);
      next();
      if (peek().kind == Token::Kind::kName) next();  // {% endmacro name %}
      expect_end();
    } else if (word == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (at_op("(")) parse_params(*s);
      s->expr = parse_expression();
      if (s->expr->kind != Expr::Kind::kCall) fail_at(word_offset, "expected a macro call after 'call'");
      expect_end();
      s->body = parse_body({"endcall"}, end_word);
      next();
      expect_end();
    } else if (word == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->expr = parse_filter_chain();
      expect_end();
      s->body = parse_body({"endfilter"}, end_word);
      next();
      expect_end();
    } else if (word == "break" || word == "continue") {
      s->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_end();
    } else if (word == "generation") {
      s->kind = Stmt::Kind::kScope;
      expect_end();
      s->body = parse_body({"endgeneration"}, end_word);
      next();
      expect_end();
    } else if (word == "include" || word == "import" || word == "from" || word == "extends" || word == "block" ||
               word == "do" || word == "with" || word == "autoescape") {
      fail_at(word_offset, fmt::format("the '{}' statement is not supported in chat templates", word));
    } else {
      fail_at(word_offset, fmt::format("unknown statement '{}'", word));
    }
    return s;
  }

  // "{% filter upper | replace('a', 'b') %}" and "{% set x | trim %}": a chain of filters on a placeholder.
  ExprPtr parse_filter_chain() {
    ExprPtr chain;
    bool first = true;
    while (first || at_op("|")) {
      if (at_op("|")) next();
      first = false;
      auto e = node(Expr::Kind::kFilter, peek().offset);
      e->a = chain;
      e->name = expect_name();
      if (at_op("(")) parse_call_args(*e);
      chain = e;
    }
    return chain;
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!at_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (at_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (at_op("=")) {
        next();
        p.default_value = parse_expression();
      }
      s.params.push_back(std::move(p));
    }
    expect_op(")");
  }

  std::string source_;
  std::string origin_;
  Locator loc_;
  std::vector<Segment> segments_;
  size_t seg_ = 0;
  std::vector<Token> tokens_;
  size_t tok_ = 0;
  size_t last_block_offset_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& raw_source, const std::string& origin) {
  // jinja2 normalizes newlines to "\n" and, with keep_trailing_newline=False, drops one trailing newline.
  std::string source;
  source.reserve(raw_source.size());
  for (size_t k = 0; k < raw_source.size(); ++k) {
    if (raw_source[k] == '\r') {
      source += '\n';
      if (k + 1 < raw_source.size() && raw_source[k + 1] == '\n') ++k;
    } else {
      source += raw_source[k];
    }
  }
  if (!source.empty() && source.back() == '\n') source.pop_back();
  Parser parser(source, origin);
  return parser.parse();
}

}  // namespace seedling::tmpl
