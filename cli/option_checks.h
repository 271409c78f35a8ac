// Checks of the commands' options: numeric ranges, collector addresses. Threading: any thread.
#ifndef COLLWATCH_CLI_OPTION_CHECKS_H_
#define COLLWATCH_CLI_OPTION_CHECKS_H_

#include "CLI/CLI.hpp"

namespace collwatch {

// A finite number from `min` to `max`, both included; the message names the value and the
// range. (CLI11's Range lets "nan" through: every comparison with NaN is false.)
CLI::Validator NumberFrom(double min, double max);

// A collector address to dial (--collector of agent, run and top): the one check of
// ring/collector_address.h, so that "127.0.0.1:99999" is refused naming the port instead
// of dialling port 34463.
CLI::Validator CollectorAddress();

}  // namespace collwatch

#endif  // COLLWATCH_CLI_OPTION_CHECKS_H_
