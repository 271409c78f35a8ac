// Checks of options. Threading: see option_checks.h.
#include "cli/option_checks.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ring/collector_address.h"

namespace collwatch {

namespace {

// Whole numbers in full ("1073741824", not "1.07374e+09"), others as StrCat gives them.
std::string NumberText(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return absl::StrCat(static_cast<int64_t>(value));
  return absl::StrCat(value);
}

}  // namespace

CLI::Validator NumberFrom(double min, double max) {
  const std::string range = absl::StrCat("from ", NumberText(min), " to ", NumberText(max));
  return CLI::Validator(
      [min, max, range](std::string& input) -> std::string {
        double value = 0;
        if (!absl::SimpleAtod(input, &value) || !std::isfinite(value)) {
          return absl::StrCat("'", input, "' is not a number ", range);
        }
        if (value < min || value > max) return absl::StrCat(input, " is out of range: give a number ", range);
        return "";
      },
      absl::StrCat("NUMBER ", range));
}

CLI::Validator CollectorAddress() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        char why[512];
        return CheckCollectorAddress(input.c_str(), /*min_port=*/1, why, sizeof why) ? "" : why;
      },
      "HOST:PORT|unix:PATH");
}

}  // namespace collwatch
