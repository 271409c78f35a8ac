// A JSON Schema (draft 2020-12) validator for the subset docs/schema/ uses, for the tests
// that hold collwatch's outputs to their published schemas: Debian 12 packages no C++
// validator. Keywords: type, properties, required, additionalProperties, items, enum,
// const, oneOf, pattern, minimum, and $ref to the schema's own $defs; any other keyword
// (beside annotations such as description) is a problem, so a schema never uses one that
// would be ignored here. Threading: pure functions.
#ifndef COLLWATCH_TESTS_SUPPORT_JSON_SCHEMA_H_
#define COLLWATCH_TESTS_SUPPORT_JSON_SCHEMA_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace collwatch::testing {

// What keeps `value` from being valid under `schema`, one problem a line, each naming
// where ("$.findings[0].comm: is number, the schema says string"); empty when valid.
std::vector<std::string> SchemaProblems(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_JSON_SCHEMA_H_
