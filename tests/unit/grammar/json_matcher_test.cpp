// The JSON matcher against lists of texts each schema must accept and must refuse, the schema compiler's errors,
// and the matcher's promise that every state it accepts can still be completed.
#include "grammar/json_matcher.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/json_schema.h"

namespace seedling::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> compile(const char* schema) {
  return Grammar::from_schema(Json::parse(schema));
}

void expect_texts(const char* schema, const std::vector<std::string>& accept, const std::vector<std::string>& refuse) {
  SCOPED_TRACE(schema);
  auto g = compile(schema);
  for (const std::string& t : accept) EXPECT_TRUE(JsonMatcher::matches(g, t)) << "should accept: " << t;
  for (const std::string& t : refuse) EXPECT_FALSE(JsonMatcher::matches(g, t)) << "should refuse: " << t;
}

TEST(JsonMatcher, AnyValueIsJsonSyntax) {
  expect_texts("true",
               {"{}", "[]", "0", "-0", "-0.5e+3", "1E10", "12.50", "\"\"", "true", "false", "null", "{\"a\": [1, {}]}",
                " {\"a\":1}", "[1,\n  2]", "\"\\u00e9\\n\\\"\\\\\\/\\b\\f\\r\\t\"", "\"\\ud83d\\ude00\"",
                "\"日本語 😀\"", "{\"\": {\"\": []}}"},
               {"",
                "{",
                "[1,]",
                "[,1]",
                "{\"a\"}",
                "{\"a\":}",
                "{,}",
                "01",
                "-",
                "1.",
                ".5",
                "1e",
                "+1",
                "--1",
                "tru",
                "nul",
                "True",
                "\"abc",
                "'a'",
                "\"\\x\"",
                "\"\\u12\"",
                "\"\\ud83d\"",
                "\"\\ude00\"",
                "\"\\ud83d\\u0041\"",
                "\"a\nb\"",
                "\"\xC3\"",
                "\"\xC0\xAF\"",
                "\"\xED\xA0\x80\"",
                "\"\xF4\x90\x80\x80\"",
                "\"\xFF\"",
                "{} ",
                "1 2",
                "[1]]",
                "{\"a\":1,}",
                "[1  ,2]",
                "[1,\t2]"});
}

TEST(JsonMatcher, WhitespaceIsBounded) {
  auto g = compile("true");
  EXPECT_TRUE(JsonMatcher::matches(g, "{\n" + std::string(20, ' ') + "\"a\": 1\n}"));
  EXPECT_FALSE(JsonMatcher::matches(g, "{\n" + std::string(21, ' ') + "\"a\": 1\n}"));
  EXPECT_FALSE(JsonMatcher::matches(g, "{  \"a\": 1}"));    // two spaces
  EXPECT_FALSE(JsonMatcher::matches(g, "{\n\n\"a\": 1}"));  // two newlines
  EXPECT_TRUE(JsonMatcher::matches(g, "{\n\t\t\"a\" : [ 1 , 2 ] }"));
  EXPECT_FALSE(JsonMatcher::matches(g, "{}\n"));  // nothing after the value: only the end
}

TEST(JsonMatcher, NumbersAndIntegers) {
  expect_texts(R"({"type": "number"})", {"0", "-0.5e+3", "3.25", "1e-7", "-12E+04", "9999999999999999", "1e99"},
               {"1.", "00", "-", "1e", "1e+", "\"1\"", "NaN", "Infinity", "12345678901234567", "1.12345678901234567",
                "1e1234", "1e100", "1e-100"});
  expect_texts(R"({"type": "integer"})", {"0", "-7", "123"}, {"1.0", "1e3", "-", "01", "-0.5e+3"});
  expect_texts(R"({"type": ["integer", "null"]})", {"5", "null"}, {"5.5", "true"});
}

TEST(JsonMatcher, ObjectsWithPropertiesRequiredAndAdditional) {
  const char* s = R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                      "nick": {"type": "string"}}, "required": ["name", "age"], "additionalProperties": false})";
  expect_texts(s,
               {R"({"name": "a", "age": 3})", R"({"age":3,"name":"b"})", R"({"name": "a", "age": 3, "nick": "x"})",
                "{\n  \"name\": \"a\",\n  \"age\": 3\n}"},
               {R"({"name": "a"})", R"({})", R"({"name": "a", "age": 3.5})", R"({"name": "a", "age": 3, "x": 1})",
                R"({"name": "a", "name": "b", "age": 3})", R"({"name": 1, "age": 3})", R"({"nam": "a", "age": 3})",
                R"([])", R"({"name": "a", "age": 3,})"});
  // additionalProperties absent: any other key, any value; a schema: values of it.
  expect_texts(R"({"type": "object", "properties": {"a": {"type": "null"}}})",
               {R"({"b": [1, {"c": 2}]})", R"({"a": null, "zz": true})", R"({})"}, {R"({"a": 1})"});
  expect_texts(R"({"type": "object", "additionalProperties": {"type": "boolean"}})", {R"({"x": true, "y": false})"},
               {R"({"x": 1})"});
  // A property name with characters JSON escapes is written as JSON writes it.
  expect_texts(R"({"type": "object", "properties": {"a\"b": {"const": 1}, "é": {"const": 2}},
                  "additionalProperties": false})",
               {R"({"a\"b": 1, "é": 2})"}, {R"({"a\"b": 2})", R"({"ab": 1})"});
}

TEST(JsonMatcher, ArraysWithItemsAndBounds) {
  const char* s = R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})";
  expect_texts(s, {"[1]", "[1, 2, 3]", "[ 1 ]"}, {"[]", "[1, 2, 3, 4]", "[1.5]", "[\"a\"]"});
  expect_texts(R"({"type": "array", "items": false})", {"[]"}, {"[1]"});
  expect_texts(R"({"type": "array"})", {"[]", "[1, \"a\", null, [{}]]"}, {"[1,]"});
}

TEST(JsonMatcher, StringsWithLengthsInCodePoints) {
  const char* s = R"({"type": "string", "minLength": 2, "maxLength": 3})";
  expect_texts(s, {"\"ab\"", "\"abc\"", "\"日本語\"", "\"\\n\\t\"", "\"😀\\ud83d\\ude00\"", "\"\\u00e9a\""},
               {"\"a\"", "\"abcd\"", "\"日本語x\"", "\"\"", "\"\\n\""});
}

TEST(JsonMatcher, EnumAndConstAsCompactJson) {
  expect_texts(R"({"enum": ["red", "green", 1, 12, null, {"a": [1, 2]}, 2.5]})",
               {"\"red\"", "\"green\"", "1", "12", "null", "{\"a\":[1,2]}", "2.5", " \"red\""},
               {"\"blue\"", "\"re\"", "2", "123", "{\"a\": [1, 2]}", "true"});
  expect_texts(R"({"const": "x"})", {"\"x\""}, {"\"y\"", "x"});
  // enum values the rest of the schema refuses are dropped
  expect_texts(R"({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1})", {"\"a\""}, {"1", "\"bb\""});
  expect_texts(R"({"enum": ["a", "b"], "const": "b"})", {"\"b\""}, {"\"a\""});
}

TEST(JsonMatcher, AnyOfOneOfAndNestedRefs) {
  const char* s = R"({
    "$defs": {
      "node": {"type": "object", "properties": {"v": {"type": "integer"},
               "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
               "required": ["v"], "additionalProperties": false},
      "pet": {"anyOf": [{"$ref": "#/definitions/cat"}, {"$ref": "#/definitions/dog"}]}
    },
    "definitions": {
      "cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
              "required": ["kind", "lives"], "additionalProperties": false},
      "dog": {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
              "required": ["kind"], "additionalProperties": false}
    },
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}, "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}},
                   "id": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
    "required": ["tree"], "additionalProperties": false})";
  expect_texts(s,
               {R"({"tree": {"v": 1}})", R"({"tree": {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}})",
                R"({"tree": {"v": 0}, "pets": [{"kind": "cat", "lives": 9}, {"kind": "dog", "good": true}]})",
                R"({"tree": {"v": 0}, "id": "x"})", R"({"tree": {"v": 0}, "id": 7})"},
               {R"({"tree": {"kids": []}})", R"({"tree": {"v": 1, "kids": [{"v": "2"}]}})",
                R"({"tree": {"v": 0}, "pets": [{"kind": "cat"}]})",
                R"({"tree": {"v": 0}, "pets": [{"kind": "dog", "lives": 1}]})", R"({"tree": {"v": 0}, "id": null})"});
  expect_texts(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "minLength": 3}]})",
               {"\"a\"", "\"abc\""}, {"\"ab\""});
  expect_texts(R"({"$ref": "#/$defs/list", "$defs": {"list": {"type": ["array", "null"], "items": {"$ref": "#"}}}})",
               {"null", "[]", "[null, [[]]]"}, {"[1]"});
}

TEST(JsonMatcher, JsonObjectIsAnyObject) {
  auto g = Grammar::any_object();
  for (const char* t : {"{}", "{\"a\": [1, 2, {\"b\": null}]}", "{\"x\": \"\\u00e9\"}"})
    EXPECT_TRUE(JsonMatcher::matches(g, t)) << t;
  for (const char* t : {"[]", "1", "\"{}\"", "{"}) EXPECT_FALSE(JsonMatcher::matches(g, t)) << t;
}

// Every prefix the matcher accepts can be completed: from it, some byte is always accepted until the value may
// end. Checked on the states a walk through accepted texts reaches, by a breadth-first search for an ending.
TEST(JsonMatcher, EveryAcceptedStateCanBeCompleted) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 2},
    "b": {"type": "array", "items": {"enum": ["x", "xy"]}, "minItems": 2, "maxItems": 2}, "c": {"type": "integer"}},
    "required": ["a", "b"], "additionalProperties": false})";
  auto g = compile(schema);
  const std::string text = R"({"a": "\u00e9z", "c": -12, "b": ["xy", "x"]})";
  for (size_t k = 0; k <= text.size(); ++k) {
    JsonMatcher m(g);
    ASSERT_TRUE(m.advance(text.substr(0, k))) << k;
    // depth-first: extend by the first byte the matcher takes until it may end (bounded)
    std::string tail;
    for (int steps = 0; steps < 200 && !m.can_end(); ++steps) {
      bool moved = false;
      for (int c = 1; c < 256 && !moved; ++c) {
        if (c == ' ' || c == '\n') continue;
        const std::string b(1, char(c));
        if (m.advance(b)) {
          tail += b;
          moved = true;
        }
      }
      ASSERT_TRUE(moved) << "stuck after " << text.substr(0, k) << tail;
    }
    EXPECT_TRUE(m.can_end()) << text.substr(0, k) << tail;
  }
}

TEST(JsonMatcher, DeadEndsAreRefusedAtOnce) {
  auto g = compile(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false})");
  JsonMatcher m(g);
  ASSERT_TRUE(m.advance(R"({"a": 1)"));
  EXPECT_FALSE(m.advance(","));  // no key could follow
  EXPECT_FALSE(m.advance("\"b"));
  EXPECT_TRUE(m.advance("}"));
  EXPECT_TRUE(m.done());
  JsonMatcher k(g);
  EXPECT_FALSE(k.advance("{\"b"));  // no property starts with b
  EXPECT_TRUE(k.advance("{\"a"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  for (const char* kw : {"pattern", "format", "minimum", "maximum", "multipleOf", "allOf", "not", "uniqueItems",
                         "patternProperties", "prefixItems", "if", "minProperties", "exclusiveMinimum"}) {
    Json s = {{"type", "object"}, {"properties", {{"x", {{"type", "string"}, {kw, 1}}}}}};
    try {
      Grammar::from_schema(s);
      ADD_FAILURE() << kw << " accepted";
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword, kw);
      EXPECT_EQ(e.path, "#/properties/x");
      EXPECT_NE(std::string(e.what()).find(kw), std::string::npos) << e.what();
    }
  }
  // annotations are ignored
  EXPECT_NO_THROW(compile(R"({"title": "T", "description": "d", "$schema": "x", "examples": [1], "default": 2,
                              "type": "integer"})"));
}

TEST(JsonSchema, MalformedSchemasAreClearErrors) {
  auto error = [](const char* schema) -> std::string {
    try {
      compile(schema);
    } catch (const SchemaError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(R"({"type": "strin"})").find("type"), std::string::npos);
  EXPECT_NE(error(R"({"$ref": "http://x/y"})").find("$ref"), std::string::npos);
  EXPECT_NE(error(R"({"$ref": "#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(error(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})").find("itself"), std::string::npos);
  EXPECT_NE(error(R"({"$ref": "#/$defs/a", "type": "object", "$defs": {"a": {}}})").find("type"), std::string::npos);
  EXPECT_NE(error(R"({"enum": []})").find("admits no value"), std::string::npos);
  EXPECT_NE(error(R"({"type": "array", "minItems": 3, "maxItems": 2})").find("admits no value"), std::string::npos);
  EXPECT_NE(error(R"({"type": "object", "required": ["a"], "additionalProperties": false})").find("admits no value"),
            std::string::npos);
  EXPECT_NE(error(R"({"items": [{"type": "string"}]})").find("items"), std::string::npos);
  EXPECT_NE(error(R"({"maxLength": -1})").find("maxLength"), std::string::npos);
  EXPECT_NE(error(R"({"anyOf": []})").find("anyOf"), std::string::npos);
  EXPECT_NE(error("3").find("object or a boolean"), std::string::npos);
}

}  // namespace
}  // namespace seedling::grammar
