// flight_recorder.json through nlohmann::json.
#include "flight_recorder/import_record.h"

#include <filesystem>

#include "files/json_contract.h"
#include "files/safe_files.h"
#include "files/safe_text.h"
#include "nlohmann/json.hpp"

namespace collwatch::flight_recorder {
namespace {

template <typename T>
T Get(const nlohmann::json& json, const char* key, T fallback) {
  auto it = json.find(key);
  if (it == json.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : fallback;
  } else {
    return it->is_number() ? it->template get<T>() : fallback;
  }
}

}  // namespace

absl::Status WriteImportRecord(const std::string& out_dir, const ImportRecord& record) {
  nlohmann::json json;
  json[kSchemaVersionKey] = kImportSchemaVersion;
  json["job"] = record.job;
  json["as_of_ns"] = record.as_of_ns;
  json["as_of_basis"] = record.as_of_basis;
  json["stall_after_s"] = record.stall_after_s;
  json["missing_ranks"] = record.missing_ranks;
  json["notes"] = record.notes;
  json["not_read"] = record.not_read;
  json["dumps"] = nlohmann::json::array();
  for (const ImportedDump& dump : record.dumps) {
    json["dumps"].push_back({{"file", dump.file},
                             {"rank", dump.rank},
                             {"version", dump.version},
                             {"entries", dump.entries},
                             {"history_cut", dump.history_cut}});
  }
  json["cut_groups"] = nlohmann::json::array();
  for (const GroupHistory& group : record.cut_groups) {
    json["cut_groups"].push_back({{"group", group.group},
                                  {"comm_id", JsonId(group.comm_id)},
                                  {"compared_from_seq", group.compared_from_seq}});
  }
  return WriteFileReplacing((std::filesystem::path(out_dir) / kImportRecordName).string(), SafeJsonText(json, 2) + "\n");
}

std::optional<ImportRecord> ReadImportRecord(const std::string& out_dir) {
  const std::filesystem::path path = std::filesystem::path(out_dir) / kImportRecordName;
  constexpr uint64_t kMaxImportRecordBytes = 64 << 20;
  absl::StatusOr<std::string> text = ReadRegularFile(path.string(), kMaxImportRecordBytes);
  if (!text.ok()) return std::nullopt;
  const nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  ImportRecord record;
  record.job = Get<std::string>(json, "job", "");
  record.as_of_ns = Get<int64_t>(json, "as_of_ns", 0);
  record.as_of_basis = Get<std::string>(json, "as_of_basis", "");
  record.stall_after_s = Get<double>(json, "stall_after_s", 0);
  if (auto it = json.find("missing_ranks"); it != json.end() && it->is_array()) {
    for (const nlohmann::json& rank : *it) {
      if (rank.is_number_integer()) record.missing_ranks.push_back(rank.get<int32_t>());
    }
  }
  if (auto it = json.find("notes"); it != json.end() && it->is_array()) {
    for (const nlohmann::json& note : *it) {
      if (note.is_string()) record.notes.push_back(note.get<std::string>());
    }
  }
  if (auto it = json.find("not_read"); it != json.end() && it->is_array()) {
    for (const nlohmann::json& file : *it) {
      if (file.is_string()) record.not_read.push_back(file.get<std::string>());
    }
  }
  if (auto it = json.find("dumps"); it != json.end() && it->is_array()) {
    for (const nlohmann::json& item : *it) {
      if (!item.is_object()) continue;
      record.dumps.push_back(ImportedDump{Get<std::string>(item, "file", ""), Get<int32_t>(item, "rank", -1),
                                          Get<std::string>(item, "version", ""), Get<uint64_t>(item, "entries", 0),
                                          Get<bool>(item, "history_cut", false)});
    }
  }
  if (auto it = json.find("cut_groups"); it != json.end() && it->is_array()) {
    for (const nlohmann::json& item : *it) {
      if (!item.is_object()) continue;
      GroupHistory group;
      group.group = Get<std::string>(item, "group", "");
      if (auto id = item.find("comm_id"); id != item.end()) group.comm_id = JsonIdValue(*id).value_or(0);
      group.compared_from_seq = Get<uint64_t>(item, "compared_from_seq", 0);
      record.cut_groups.push_back(std::move(group));
    }
  }
  return record;
}

}  // namespace collwatch::flight_recorder
