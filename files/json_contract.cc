// JSON ids (see json_contract.h). Threading: pure functions.
#include "files/json_contract.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace collwatch {

std::string JsonId(uint64_t id) { return absl::StrFormat("%016x", id); }

std::optional<uint64_t> JsonIdValue(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  if (!value.is_string()) return std::nullopt;
  const std::string& text = value.get_ref<const std::string&>();
  uint64_t id = 0;
  if (text.empty() || text.size() > 16 || !absl::SimpleHexAtoi(text, &id)) return std::nullopt;
  return id;
}

}  // namespace collwatch
