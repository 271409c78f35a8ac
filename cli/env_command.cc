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
    if (const char* value = SettingIfSet(info.setting)) {
      out << info.name << "=" << value;
    } else {
      out << info.name << " unset (default " << absl::StrReplaceAll(info.default_text, {{"`", ""}}) << ")";
    }
    out << "  [" << info.read_by << "]\n";
  }
}

}  // namespace collwatch
