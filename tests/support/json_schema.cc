// The validator (see json_schema.h): one recursive walk over schema and value together.
// Threading: pure functions.
#include "tests/support/json_schema.h"

#include <regex>
#include <set>

namespace collwatch::testing {
namespace {

using nlohmann::json;

// Keywords that say nothing about validity.
const std::set<std::string> kAnnotations = {"$schema", "$id", "$comment", "$defs", "title", "description",
                                            "examples", "default"};

std::string TypeOf(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();  // "null", "boolean", "string", "array", "object"
}

bool HasType(const json& value, const std::string& type) {
  const std::string actual = TypeOf(value);
  return actual == type || (type == "number" && actual == "integer");
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void Check(const json& schema, const json& value, const std::string& where) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) Problem(where, "is not allowed here");
      return;
    }
    if (!schema.is_object()) return Problem(where, "has a schema that is not an object");
    for (const auto& [keyword, argument] : schema.items()) {
      if (kAnnotations.count(keyword) == 0) Keyword(keyword, argument, schema, value, where);
    }
  }

  std::vector<std::string> problems;

 private:
  void Problem(const std::string& where, const std::string& what) { problems.push_back(where + ": " + what); }

  void Keyword(const std::string& keyword, const json& argument, const json& schema, const json& value,
               const std::string& where) {
    if (keyword == "$ref") {
      const std::string ref = argument.get<std::string>();
      const std::string prefix = "#/$defs/";
      if (ref.rfind(prefix, 0) != 0 || !root_.contains("$defs") ||
          !root_.at("$defs").contains(ref.substr(prefix.size()))) {
        return Problem(where, "refers to " + ref + ", not one of the schema's $defs");
      }
      Check(root_.at("$defs").at(ref.substr(prefix.size())), value, where);
    } else if (keyword == "type") {
      const json types = argument.is_array() ? argument : json::array({argument});
      for (const json& type : types) {
        if (HasType(value, type.get<std::string>())) return;
      }
      Problem(where, "is " + TypeOf(value) + ", the schema says " + argument.dump());
    } else if (keyword == "enum") {
      for (const json& allowed : argument) {
        if (allowed == value) return;
      }
      Problem(where, value.dump() + " is not one of " + argument.dump());
    } else if (keyword == "const") {
      if (argument != value) Problem(where, value.dump() + " is not " + argument.dump());
    } else if (keyword == "pattern") {
      if (value.is_string() && !std::regex_search(value.get<std::string>(), std::regex(argument.get<std::string>()))) {
        Problem(where, value.dump() + " does not match " + argument.get<std::string>());
      }
    } else if (keyword == "minimum") {
      if (value.is_number() && value.get<double>() < argument.get<double>()) {
        Problem(where, value.dump() + " is below " + argument.dump());
      }
    } else if (keyword == "required") {
      for (const json& key : argument) {
        if (value.is_object() && !value.contains(key.get<std::string>())) Problem(where, "lacks " + key.dump());
      }
    } else if (keyword == "properties") {
      if (!value.is_object()) return;
      for (const auto& [key, property] : argument.items()) {
        if (value.contains(key)) Check(property, value[key], where + "." + key);
      }
    } else if (keyword == "additionalProperties") {
      if (!value.is_object()) return;
      const json declared = schema.value("properties", json::object());
      for (const auto& [key, item] : value.items()) {
        if (!declared.contains(key)) Check(argument, item, where + "." + key);
      }
    } else if (keyword == "items") {
      if (!value.is_array()) return;
      for (size_t i = 0; i < value.size(); ++i) Check(argument, value[i], where + "[" + std::to_string(i) + "]");
    } else if (keyword == "oneOf") {
      size_t matched = 0;
      for (const json& option : argument) {
        Validator one(root_);
        one.Check(option, value, where);
        matched += one.problems.empty() ? 1 : 0;
      }
      if (matched != 1) Problem(where, "matches " + std::to_string(matched) + " of oneOf's schemas, not 1");
    } else {
      Problem(where, "has a schema with keyword " + keyword + ", which this validator does not know");
    }
  }

  const json& root_;
};

}  // namespace

std::vector<std::string> SchemaProblems(const nlohmann::json& schema, const nlohmann::json& value) {
  Validator validator(schema);
  validator.Check(schema, value, "$");
  return validator.problems;
}

}  // namespace collwatch::testing
