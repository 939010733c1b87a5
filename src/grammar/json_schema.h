// grammar/json_schema.h - a JSON Schema subset compiled into the nodes the byte-level JSON matcher walks.
//
// Supported: type (object, array, string, number, integer, boolean, null, or a list of them), properties, required,
// additionalProperties (false, true, a schema, or absent: any), items (a schema or a boolean), enum, const, anyOf
// and oneOf (read as anyOf: the value matches at least one), local $ref ("#", "#/$defs/NAME", "#/definitions/NAME",
// any local JSON pointer; recursion allowed), minItems/maxItems, minLength/maxLength, boolean schemas. Annotations
// (title, description, default, examples, $comment, $schema, $id, deprecated, readOnly, writeOnly) are ignored;
// any other keyword is a SchemaError naming it, since it would constrain values the matcher does not check.
// What generation writes is narrower than what the schema admits in three ways, so that output always ends:
// whitespace between tokens is "", one space, or a newline and at most 20 spaces or tabs; numbers have at most 16
// integer digits, 16 fraction digits and 2 exponent digits, so a finite double (integer: no fraction or exponent); enum
// and const values are written compactly, as JSON.stringify writes them, and property names literally (no \u escapes).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace seedling::grammar {

// A schema the compiler refuses: `keyword` names the offending keyword ("" when the problem is not one keyword),
// `path` where it is, as a JSON pointer into the schema ("#/properties/a").
struct SchemaError : std::runtime_error {
  SchemaError(std::string keyword, std::string path, const std::string& message);
  std::string keyword, path;
};

enum TypeBits : uint8_t { kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32, kNull = 64 };
inline constexpr uint8_t kAllTypes = 127;

// A byte trie (property names, enum literals): node 0 of each trie is its root.
struct TrieNode {
  std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node, in byte order
  int32_t terminal = -1;                              // a property's index, or 0 for a literal's end; -1: none
  uint64_t below = 0;                                 // properties ending at or below this node (bit = index)
  int32_t child(uint8_t c) const {
    for (const auto& [b, n] : children) {
      if (b == c) return n;
    }
    return -1;
  }
};

struct Property {
  std::string name;
  int32_t node = -1;
};

inline constexpr int32_t kAnyNode = 0;    // the schema `true`
inline constexpr int32_t kNeverNode = 1;  // the schema `false`
inline constexpr size_t kMaxProperties = 64;

struct SchemaNode {
  enum class Kind : uint8_t { kTyped, kAnyOf, kLiterals };
  Kind kind = Kind::kTyped;
  uint8_t types = kAllTypes;       // kTyped: the types a value may have
  uint8_t live_types = kAllTypes;  // those of them some value satisfies (filled after compiling)
  // objects
  std::vector<Property> properties;
  uint64_t required = 0;          // bits of `properties`
  uint64_t dead = 0;              // optional properties no value satisfies: never offered
  int32_t additional = kAnyNode;  // node of other properties' values; -1: none allowed
  int32_t key_trie = -1;          // root of the property-name trie (escaped names)
  // arrays
  int32_t items = kAnyNode;  // -1: no item allowed
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // strings (code points)
  uint32_t min_length = 0, max_length = UINT32_MAX;
  // kAnyOf: alternatives, flattened (none is itself kAnyOf)
  std::vector<int32_t> alternatives;
  // kLiterals: the trie of the values' compact JSON text
  int32_t literal_trie = -1;
  std::vector<std::string> literals;
};

class Grammar {
 public:
  // Throws SchemaError.
  static std::shared_ptr<const Grammar> from_schema(const nlohmann::ordered_json& schema);
  // response_format json_object: any JSON object.
  static std::shared_ptr<const Grammar> any_object();

  int32_t root = kAnyNode;
  std::vector<SchemaNode> nodes;
  std::vector<TrieNode> tries;
};

}  // namespace seedling::grammar
