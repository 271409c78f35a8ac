// `collwatch env`: every environment variable collwatch reads (ring/settings.h) with the
// value in force here, or the table docs/environment.md carries (--markdown).
// Threading: single-threaded.
#ifndef COLLWATCH_CLI_ENV_COMMAND_H_
#define COLLWATCH_CLI_ENV_COMMAND_H_

#include <ostream>
#include <string>

namespace collwatch {

// The settings table as Markdown: one row per variable (name, default, read by, meaning).
std::string SettingsMarkdownTable();

// Each variable: "NAME=VALUE" where set, "NAME unset (default ...)" where not, with who
// reads it; a value its readers do not take (ring/settings.h's SettingValid) is said to be
// invalid, with the rule and the default used in its place.
void PrintSettings(std::ostream& out);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_ENV_COMMAND_H_
