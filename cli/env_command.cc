// `collwatch env`: the settings table of ring/settings.h, as text or Markdown.
// Threading: single-threaded.
#include "cli/env_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ring/settings.h"

namespace collwatch {

std::string SettingsMarkdownTable() {
  std::string table = "| variable | default | read by | meaning |\n|---|---|---|---|\n";
  for (const SettingInfo& info : kSettings) {
    // A '|' inside a cell would end it.
    const auto cell = [](const char* text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); };
    absl::StrAppend(&table, "| `", info.name, "` | ", cell(info.default_text), " | ", cell(info.read_by), " | ",
                    cell(info.meaning), " |\n");
  }
  return table;
}

void PrintSettings(std::ostream& out) {
  for (const SettingInfo& info : kSettings) {
    const std::string default_words = absl::StrReplaceAll(info.default_text, {{"`", ""}});
    if (const char* value = SettingIfSet(info.setting); value != nullptr && !SettingValid(info.setting, value)) {
      // Its readers use the default instead: showing it as in force would mislead.
      char rule[128];
      SettingRuleWords(*SettingRuleOf(info.setting), rule, sizeof rule);
      out << info.name << "=" << value << " is invalid (not " << rule << "): used as unset (default "
          << default_words << ")";
    } else if (value != nullptr) {
      out << info.name << "=" << value;
    } else {
      out << info.name << " unset (default " << default_words << ")";
    }
    out << "  [" << info.read_by << "]\n";
  }
}

}  // namespace collwatch
