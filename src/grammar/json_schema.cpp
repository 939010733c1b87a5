#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "grammar/json_matcher.h"

namespace seedling::grammar {

using Json = nlohmann::ordered_json;

SchemaError::SchemaError(std::string keyword_, std::string path_, const std::string& message)
    : std::runtime_error(message), keyword(std::move(keyword_)), path(std::move(path_)) {}

namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {"title", "description", "default",  "examples",  "$comment", "$schema",
                                          "$id",   "deprecated",  "readOnly", "writeOnly", "$defs",    "definitions"};
  return s;
}

const std::set<std::string>& supported() {
  static const std::set<std::string> s = {"type",      "properties", "required", "additionalProperties",
                                          "items",     "enum",       "const",    "anyOf",
                                          "oneOf",     "$ref",       "minItems", "maxItems",
                                          "minLength", "maxLength"};
  return s;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char ch : key) {
    if (ch == '~') {
      out += "~0";
    } else if (ch == '/') {
      out += "~1";
    } else {
      out += ch;
    }
  }
  return out;
}

// Inserts `text` into the trie rooted at `root`, marking its end with `terminal`.
void trie_insert(std::vector<TrieNode>& tries, int32_t root, const std::string& text, int32_t terminal) {
  int32_t at = root;
  for (const char ch : text) {
    const uint8_t c = static_cast<uint8_t>(ch);
    int32_t next = tries[size_t(at)].child(c);
    if (next < 0) {
      next = int32_t(tries.size());
      tries.emplace_back();
      auto& kids = tries[size_t(at)].children;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t(-1))), {c, next});
    }
    at = next;
  }
  tries[size_t(at)].terminal = terminal;
}

uint64_t fill_below(std::vector<TrieNode>& tries, int32_t at) {
  uint64_t m = tries[size_t(at)].terminal >= 0 ? uint64_t(1) << tries[size_t(at)].terminal : 0;
  for (size_t i = 0; i < tries[size_t(at)].children.size(); ++i)
    m |= fill_below(tries, tries[size_t(at)].children[i].second);
  tries[size_t(at)].below = m;
  return m;
}

std::string compact(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::strict);
}

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {
    g_ = std::make_shared<Grammar>();
    g_->nodes.resize(2);
    g_->nodes[kNeverNode].types = 0;
    g_->nodes[kNeverNode].live_types = 0;
  }

  std::shared_ptr<Grammar> run() {
    g_->root = compile(root_, "#");
    finish();
    return g_;
  }

 private:
  [[noreturn]] static void refuse(const std::string& keyword, const std::string& path, const std::string& why) {
    throw SchemaError(keyword, path, fmt::format("'{}' at {}: {}", keyword, path, why));
  }

  uint32_t count(const Json& s, const char* key, const std::string& path) {
    const Json& v = s.at(key);
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
      refuse(key, path, "expected a non-negative integer");
    }
    const uint64_t x = v.get<uint64_t>();
    return x >= UINT32_MAX ? UINT32_MAX - 1 : uint32_t(x);
  }

  const Json& resolve(const std::string& ref, const std::string& path) {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) {
      refuse("$ref", path,
             fmt::format("'{}' is not a local reference (expected \"#\", \"#/$defs/NAME\" or \"#/definitions/NAME\")",
                         ref));
    }
    try {
      const Json::json_pointer ptr(ref.substr(1));
      if (!root_.contains(ptr)) refuse("$ref", path, fmt::format("'{}' points to nothing in the schema", ref));
      return root_.at(ptr);
    } catch (const Json::exception&) {
      refuse("$ref", path, fmt::format("'{}' is not a valid JSON pointer", ref));
    }
  }

  int32_t compile(const Json& s, const std::string& path) {
    if (s.is_boolean()) return s.get<bool>() ? kAnyNode : kNeverNode;
    if (!s.is_object())
      throw SchemaError("", path, fmt::format("the schema at {} must be an object or a boolean", path));
    if (auto it = memo_.find(path); it != memo_.end()) return it->second;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (annotations().count(it.key()) || supported().count(it.key())) continue;
      refuse(it.key(), path,
             "this keyword is not supported in structured output (supported: type, properties, required, "
             "additionalProperties, items, enum, const, anyOf, oneOf, $ref, minItems, maxItems, minLength, "
             "maxLength)");
    }
    auto constraining = [&](const char* except) {
      for (auto it = s.begin(); it != s.end(); ++it) {
        if (it.key() != except && supported().count(it.key())) return it.key();
      }
      return std::string();
    };
    if (s.contains("$ref")) {
      if (auto other = constraining("$ref"); !other.empty()) {
        refuse(other, path, "beside '$ref' is not supported (put it in the referenced schema)");
      }
      if (!s["$ref"].is_string()) refuse("$ref", path, "expected a string");
      const std::string ref = s["$ref"].get<std::string>();
      const std::string target = ref == "#" ? "#" : ref;
      if (auto it = memo_.find(target); it != memo_.end()) return memo_[path] = it->second;
      if (!resolving_.insert(target).second) refuse("$ref", path, fmt::format("'{}' refers to itself only", ref));
      const int32_t id = compile(resolve(ref, path), target);
      resolving_.erase(target);
      return memo_[path] = id;
    }
    const int32_t id = int32_t(g_->nodes.size());
    g_->nodes.emplace_back();
    memo_[path] = id;
    SchemaNode n;
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!n.alternatives.empty()) refuse(key, path, "anyOf and oneOf together are not supported");
      if (auto other = constraining(key); !other.empty() && other != "anyOf" && other != "oneOf") {
        refuse(other, path, fmt::format("beside '{}' is not supported (move it into each alternative)", key));
      }
      const Json& alts = s[key];
      if (!alts.is_array() || alts.empty()) refuse(key, path, "expected a non-empty array of schemas");
      n.kind = SchemaNode::Kind::kAnyOf;
      for (size_t i = 0; i < alts.size(); ++i)
        n.alternatives.push_back(compile(alts[i], fmt::format("{}/{}/{}", path, key, i)));
    }
    if (n.kind == SchemaNode::Kind::kAnyOf) {
      g_->nodes[size_t(id)] = std::move(n);
      return id;
    }
    if (s.contains("enum") || s.contains("const")) {
      std::vector<Json> values;
      if (s.contains("enum")) {
        if (!s["enum"].is_array()) refuse("enum", path, "expected an array");
        for (const Json& v : s["enum"]) values.push_back(v);
      }
      if (s.contains("const")) {
        if (s.contains("enum")) {
          const Json c = s["const"];
          std::erase_if(values, [&](const Json& v) { return v != c; });
        } else {
          values.push_back(s["const"]);
        }
      }
      Json rest = s;
      rest.erase("enum");
      rest.erase("const");
      const int32_t check = compile_typed_into_new(rest, path);
      n.kind = SchemaNode::Kind::kLiterals;
      for (const Json& v : values) {
        std::string text = compact(v);
        if (std::find(n.literals.begin(), n.literals.end(), text) == n.literals.end()) n.literals.push_back(text);
      }
      literal_checks_.push_back({id, check});
      g_->nodes[size_t(id)] = std::move(n);
      return id;
    }
    n = typed(s, path);
    g_->nodes[size_t(id)] = std::move(n);
    return id;
  }

  int32_t compile_typed_into_new(const Json& s, const std::string& path) {
    const int32_t id = int32_t(g_->nodes.size());
    g_->nodes.emplace_back();
    SchemaNode n = typed(s, path);
    g_->nodes[size_t(id)] = std::move(n);
    return id;
  }

  SchemaNode typed(const Json& s, const std::string& path) {
    SchemaNode n;
    if (s.contains("type")) {
      static const std::map<std::string, uint8_t> names = {
          {"object", kObject},   {"array", kArray},     {"string", kString}, {"number", kNumber},
          {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull}};
      const Json& t = s["type"];
      std::vector<Json> list = t.is_array() ? std::vector<Json>(t.begin(), t.end()) : std::vector<Json>{t};
      n.types = 0;
      for (const Json& one : list) {
        auto it = one.is_string() ? names.find(one.get<std::string>()) : names.end();
        if (it == names.end()) {
          refuse("type", path,
                 fmt::format("{} is not a type (expected object, array, string, number, integer, boolean or null, or a "
                             "list of them)",
                             one.dump()));
        }
        n.types |= it->second;
      }
    }
    if (s.contains("properties")) {
      const Json& props = s["properties"];
      if (!props.is_object()) refuse("properties", path, "expected an object of schemas");
      for (auto it = props.begin(); it != props.end(); ++it) {
        n.properties.push_back({it.key(), -1});
      }
    }
    if (s.contains("additionalProperties")) {
      const Json& a = s["additionalProperties"];
      if (!a.is_boolean() && !a.is_object()) refuse("additionalProperties", path, "expected a boolean or a schema");
      n.additional = compile(a, path + "/additionalProperties");
    }
    if (s.contains("required")) {
      const Json& req = s["required"];
      if (!req.is_array()) refuse("required", path, "expected an array of property names");
      for (const Json& r : req) {
        if (!r.is_string()) refuse("required", path, "expected an array of property names");
        const std::string name = r.get<std::string>();
        auto it =
            std::find_if(n.properties.begin(), n.properties.end(), [&](const Property& p) { return p.name == name; });
        if (it == n.properties.end()) {  // required but not listed: an additional property, which must be allowed
          n.properties.push_back({name, n.additional});
          it = n.properties.end() - 1;
        }
        if (n.properties.size() > kMaxProperties) break;
        n.required |= uint64_t(1) << (it - n.properties.begin());
      }
    }
    if (n.properties.size() > kMaxProperties) {
      refuse("properties", path,
             fmt::format("{} properties; at most {} are supported in one object", n.properties.size(), kMaxProperties));
    }
    if (s.contains("properties")) {
      for (Property& p : n.properties) {
        if (s["properties"].contains(p.name)) {
          p.node = compile(s["properties"][p.name], path + "/properties/" + pointer_token(p.name));
        }
      }
    }
    if (!n.properties.empty()) {
      n.key_trie = int32_t(g_->tries.size());
      g_->tries.emplace_back();
      for (size_t i = 0; i < n.properties.size(); ++i) {
        const std::string quoted = compact(Json(n.properties[i].name));
        trie_insert(g_->tries, n.key_trie, quoted.substr(1, quoted.size() - 2), int32_t(i));
      }
      fill_below(g_->tries, n.key_trie);
    }
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_array()) refuse("items", path, "an array of schemas (tuples) is not supported; give one schema");
      if (!it.is_boolean() && !it.is_object()) refuse("items", path, "expected a schema");
      n.items = compile(it, path + "/items");
    }
    if (s.contains("minItems")) n.min_items = count(s, "minItems", path);
    if (s.contains("maxItems")) n.max_items = count(s, "maxItems", path);
    if (s.contains("minLength")) n.min_length = count(s, "minLength", path);
    if (s.contains("maxLength")) n.max_length = count(s, "maxLength", path);
    return n;
  }

  // Which nodes some value satisfies (the least fixed point), then what the matcher may enter: live types, dead
  // optional properties, no items or additional properties where none can be written, alternatives flattened.
  void finish() {
    std::vector<SchemaNode>& nodes = g_->nodes;
    // enum/const values that the rest of their schema admits: every literal node gets the trie of all its values,
    // then each value is run through the rest of its schema and the trie rebuilt from those that pass.
    auto build_trie = [&](int32_t id) {
      nodes[size_t(id)].literal_trie = int32_t(g_->tries.size());
      g_->tries.emplace_back();
      for (const std::string& text : nodes[size_t(id)].literals) {
        trie_insert(g_->tries, nodes[size_t(id)].literal_trie, text, 0);
      }
    };
    for (const auto& [id, check] : literal_checks_) build_trie(id);
    for (const auto& [id, check] : literal_checks_) {
      auto probe = std::make_shared<Grammar>(*g_);
      probe->root = check;
      fill_live(*probe);
      std::vector<std::string> keep;
      for (const std::string& text : nodes[size_t(id)].literals) {
        if (probe->nodes[size_t(check)].live_types != 0 && JsonMatcher::matches(probe, text)) keep.push_back(text);
      }
      nodes[size_t(id)].literals = std::move(keep);
      build_trie(id);
    }
    fill_live(*g_);
    if (nodes[size_t(g_->root)].live_types == 0) {
      throw SchemaError("", "#",
                        "the schema admits no value (an empty enum, required properties no value satisfies, "
                        "minItems above maxItems, ...)");
    }
  }

 public:
  static void fill_live(Grammar& g) {
    std::vector<SchemaNode>& nodes = g.nodes;
    const size_t n = nodes.size();
    std::vector<uint8_t> live(n, 0);
    auto sat = [&](int32_t id) { return id >= 0 && live[size_t(id)] != 0; };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < n; ++i) {
        const SchemaNode& s = nodes[i];
        uint8_t t = 0;
        if (s.kind == SchemaNode::Kind::kAnyOf) {
          for (int32_t a : s.alternatives) t |= live[size_t(a)];
        } else if (s.kind == SchemaNode::Kind::kLiterals) {
          t = s.literals.empty() ? 0 : kAllTypes;
        } else {
          t = s.types & (kNumber | kInteger | kBoolean | kNull);
          if ((s.types & kString) && s.min_length <= s.max_length) t |= kString;
          if ((s.types & kArray) && s.min_items <= s.max_items && (s.min_items == 0 || sat(s.items))) t |= kArray;
          if (s.types & kObject) {
            bool ok = true;
            for (size_t p = 0; p < s.properties.size(); ++p) {
              if ((s.required >> p & 1) && !sat(s.properties[p].node)) ok = false;
            }
            if (ok) t |= kObject;
          }
        }
        if (t != live[i]) {
          live[i] = t;
          changed = true;
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      SchemaNode& s = nodes[i];
      s.live_types = live[i];
      if (s.kind == SchemaNode::Kind::kTyped) {
        s.dead = 0;
        for (size_t p = 0; p < s.properties.size(); ++p) {
          if (!sat(s.properties[p].node)) s.dead |= uint64_t(1) << p;
        }
        if (!sat(s.additional)) s.additional = -1;
        if (!sat(s.items)) s.items = -1;
      }
    }
    for (size_t i = 0; i < n; ++i) {  // flatten anyOf (cycles of alternatives end where they begin)
      if (nodes[i].kind != SchemaNode::Kind::kAnyOf) continue;
      std::vector<int32_t> flat, stack(nodes[i].alternatives.rbegin(), nodes[i].alternatives.rend());
      std::set<int32_t> visited = {int32_t(i)};
      while (!stack.empty()) {
        const int32_t a = stack.back();
        stack.pop_back();
        if (!visited.insert(a).second || !sat(a)) continue;
        if (nodes[size_t(a)].kind == SchemaNode::Kind::kAnyOf) {
          stack.insert(stack.end(), nodes[size_t(a)].alternatives.rbegin(), nodes[size_t(a)].alternatives.rend());
        } else {
          flat.push_back(a);
        }
      }
      nodes[i].alternatives = std::move(flat);
    }
  }

 private:
  const Json& root_;
  std::shared_ptr<Grammar> g_;
  std::map<std::string, int32_t> memo_;
  std::set<std::string> resolving_;
  std::vector<std::pair<int32_t, int32_t>> literal_checks_;
};

}  // namespace

std::shared_ptr<const Grammar> Grammar::from_schema(const Json& schema) {
  return Compiler(schema).run();
}

std::shared_ptr<const Grammar> Grammar::any_object() {
  return from_schema(Json{{"type", "object"}});
}

}  // namespace seedling::grammar
