// Range checks for the commands' numeric options. Threading: any thread.
#ifndef COLLWATCH_CLI_OPTION_CHECKS_H_
#define COLLWATCH_CLI_OPTION_CHECKS_H_

#include "CLI/CLI.hpp"

namespace collwatch {

// A finite number from `min` to `max`, both included; the message names the value and the
// range. (CLI11's Range lets "nan" through: every comparison with NaN is false.)
CLI::Validator NumberFrom(double min, double max);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_OPTION_CHECKS_H_
