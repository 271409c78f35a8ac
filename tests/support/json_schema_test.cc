// The schema validator's keywords, each on a value it accepts and one it refuses.
#include "tests/support/json_schema.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using nlohmann::json;

std::vector<std::string> Problems(const char* schema, const char* value) {
  return SchemaProblems(json::parse(schema), json::parse(value));
}

TEST(JsonSchemaTest, TypeTellsIntegersFromNumbers) {
  EXPECT_TRUE(Problems(R"({"type": "number"})", "3").empty());
  EXPECT_TRUE(Problems(R"({"type": ["integer", "null"]})", "null").empty());
  EXPECT_THAT(Problems(R"({"type": "integer"})", "3.5"),
              ElementsAre("$: is number, the schema says \"integer\""));
  EXPECT_THAT(Problems(R"({"type": "string"})", "18446744073709551615"), ElementsAre(HasSubstr("is integer")));
}

TEST(JsonSchemaTest, ObjectsAreHeldToTheirPropertiesAndRequiredKeys) {
  const char* schema = R"({"type": "object", "required": ["a"], "additionalProperties": false,
                           "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}})";
  EXPECT_TRUE(Problems(schema, R"({"a": "x", "b": true})").empty());
  EXPECT_THAT(Problems(schema, R"({"b": 1, "c": 2})"),
              UnorderedElementsAre("$: lacks \"a\"", "$.b: is integer, the schema says \"boolean\"", "$.c: is not allowed here"));
  EXPECT_THAT(Problems(R"({"additionalProperties": {"type": "integer"}})", R"({"x": 1, "y": "2"})"),
              ElementsAre("$.y: is string, the schema says \"integer\""));
}

TEST(JsonSchemaTest, ItemsEnumConstPatternAndMinimum) {
  EXPECT_THAT(Problems(R"({"items": {"enum": ["a", "b"]}})", R"(["a", "c"])"),
              ElementsAre("$[1]: \"c\" is not one of [\"a\",\"b\"]"));
  EXPECT_THAT(Problems(R"({"const": 1})", "2"), ElementsAre("$: 2 is not 1"));
  EXPECT_TRUE(Problems(R"({"pattern": "^[0-9a-f]{16}$"})", R"("3f2a9c0100000001")").empty());
  EXPECT_THAT(Problems(R"({"pattern": "^[0-9a-f]{16}$"})", R"("3f2a9c01")"), ElementsAre(HasSubstr("does not match")));
  EXPECT_THAT(Problems(R"({"minimum": 0})", "-1"), ElementsAre("$: -1 is below 0"));
}

TEST(JsonSchemaTest, OneOfNeedsExactlyOneMatch) {
  const char* schema = R"({"oneOf": [{"properties": {"type": {"const": "a"}}, "required": ["type"]},
                                     {"properties": {"type": {"const": "b"}}, "required": ["type"]}]})";
  EXPECT_TRUE(Problems(schema, R"({"type": "b"})").empty());
  EXPECT_THAT(Problems(schema, R"({"type": "c"})"), ElementsAre("$: matches 0 of oneOf's schemas, not 1"));
  EXPECT_THAT(Problems(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", "1"),
              ElementsAre("$: matches 2 of oneOf's schemas, not 1"));
}

TEST(JsonSchemaTest, RefsResolveToTheSchemasOwnDefs) {
  const char* schema = R"({"$defs": {"id": {"type": "string"}}, "properties": {"comm": {"$ref": "#/$defs/id"}}})";
  EXPECT_TRUE(Problems(schema, R"({"comm": "00ff"})").empty());
  EXPECT_THAT(Problems(schema, R"({"comm": 255})"), ElementsAre("$.comm: is integer, the schema says \"string\""));
  EXPECT_THAT(Problems(R"({"$ref": "#/$defs/none"})", "1"), ElementsAre(HasSubstr("not one of the schema's $defs")));
}

TEST(JsonSchemaTest, AnUnknownKeywordIsAProblemNotIgnored) {
  EXPECT_TRUE(Problems(R"({"description": "annotations pass", "title": "t"})", "1").empty());
  EXPECT_THAT(Problems(R"({"maxLength": 2})", R"("abc")"), ElementsAre(HasSubstr("keyword maxLength")));
}

}  // namespace
}  // namespace collwatch::testing
