// The files of a Flight Recorder import, and the check that they are one job's
// (dump_files.h).
#include "flight_recorder/dump_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "files/safe_files.h"

namespace collwatch::flight_recorder {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxDumpBytes = uint64_t{1} << 30;  // a 2000-entry dump with stacks is a few MB

// A pickle or a JSON object: what a dump starts with (anything else in a folder of dumps
// is another file).
bool LooksLikeDump(std::string_view bytes) {
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && (static_cast<uint8_t>(bytes[first]) == 0x80 || bytes[first] == '{');
}

// Whether a file's name ends in a number, as RankFromFileName reads it (an extension after
// the number allowed), however long: a name with a number beyond any rank is named, not
// passed over as another tool's file.
bool NameEndsInNumber(std::string_view name) {
  if (const size_t dot = name.rfind('.');
      dot != std::string_view::npos && dot > 0 && !std::isdigit(static_cast<unsigned char>(name.back()))) {
    name = name.substr(0, dot);
  }
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name.back()));
}

// An operation that completes on no rank before every rank of its group enqueued it.
bool NeedsEveryRank(std::string_view profiling_name) {
  const std::string name = absl::AsciiStrToLower(std::string(profiling_name));
  for (const char* op : {"all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "all_to_all"}) {
    if (absl::StrContains(name, op)) return true;
  }
  return false;
}

std::string Seconds(int64_t ns) { return absl::StrCat(static_cast<double>(ns) / 1e9); }

}  // namespace

absl::Status CheckOneJob(const std::vector<RankDump>& dumps) {
  std::map<std::string, const RankDump*> group_source;
  const RankDump& first = dumps.front();
  for (const RankDump& rank : dumps) {
    if (rank.dump.version != first.dump.version) {
      return absl::InvalidArgumentError(absl::StrCat(rank.file, ": format version ", rank.dump.version, ", ",
                                                     first.file, ": ", first.dump.version,
                                                     ": dumps of different PyTorch builds, not one job"));
    }
    if (!rank.dump.comm_lib_version.empty() && !first.dump.comm_lib_version.empty() &&
        rank.dump.comm_lib_version != first.dump.comm_lib_version) {
      return absl::InvalidArgumentError(absl::StrCat(rank.file, ": NCCL ", rank.dump.comm_lib_version, ", ", first.file,
                                                     ": NCCL ", first.dump.comm_lib_version,
                                                     ": dumps of different builds, not one job"));
    }
    for (const auto& [name, group] : rank.dump.groups) {
      auto [it, fresh] = group_source.emplace(name, &rank);
      if (fresh) continue;
      const DumpGroup& other = it->second->dump.groups.at(name);
      if (other.ranks != group.ranks) {
        return absl::InvalidArgumentError(absl::StrCat(
            rank.file, ": its process group ", name, " holds ranks [", absl::StrJoin(group.ranks, ", "), "], ",
            it->second->file, "'s holds [", absl::StrJoin(other.ranks, ", "), "]: dumps of different jobs"));
      }
    }
  }
  // One collective of one job: it completes on a rank only once every rank enqueued it.
  // Per (group, collective): its earliest completion and its latest enqueueing.
  struct Moment {
    int64_t ns = 0;
    const RankDump* dump = nullptr;
  };
  std::map<std::pair<std::string, int64_t>, std::pair<Moment, Moment>> collectives;
  for (const RankDump& rank : dumps) {
    for (const DumpEntry& entry : rank.dump.entries) {
      if (entry.is_p2p || entry.collective_seq_id <= 0) continue;
      auto& [completed, created] = collectives[{entry.group_name, entry.collective_seq_id}];
      if (entry.time_created_ns > created.ns) created = {entry.time_created_ns, &rank};
      if (entry.completed() && entry.time_completed_ns > 0 && NeedsEveryRank(entry.profiling_name) &&
          (completed.dump == nullptr || entry.time_completed_ns < completed.ns)) {
        completed = {entry.time_completed_ns, &rank};
      }
    }
  }
  constexpr auto kSlackNs = static_cast<int64_t>(kClockSlackS * 1e9);
  for (const auto& [key, moments] : collectives) {
    const auto& [completed, created] = moments;
    if (completed.dump == nullptr || completed.dump == created.dump || created.ns <= completed.ns + kSlackNs) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        created.dump->file, ": its collective #", key.second, " of process group ", key.first, " was enqueued ",
        Seconds(created.ns - completed.ns), " s after ", completed.dump->file,
        "'s had completed; one collective completes on no rank before every rank enqueued it, so these are dumps "
        "of different jobs (or runs), not one (host clocks ", kClockSlackS, " s apart are allowed for): give "
        "the dumps of one job"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::vector<std::string>& inputs,
                                                std::vector<SkippedFile>* skipped) {
  std::vector<std::string> files;
  std::set<std::string> listed;  // found in a folder, not named by the user
  std::vector<SkippedFile> left_out;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (fs::is_directory(input, error)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(input, error)) {
        const std::string name = entry.path().filename().string();
        if (!NameEndsInNumber(name) || entry.is_directory(error)) continue;  // another tool's file, a folder
        const std::optional<int32_t> rank = RankFromFileName(name);
        if (!rank) {
          left_out.push_back({entry.path().string(), std::nullopt, "its number is beyond any rank", false});
        } else {
          found.push_back(entry.path().string());
        }
      }
      if (error) return absl::InvalidArgumentError(absl::StrCat(input, ": cannot list: ", error.message()));
      if (found.empty() && left_out.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(input, ": no file whose name ends in a rank number "
                                                              "(PyTorch names its dumps PREFIX<rank>)"));
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
      listed.insert(found.begin(), found.end());
    } else {
      files.push_back(input);
    }
  }
  std::vector<RankDump> dumps;
  std::map<int32_t, std::string> rank_files;
  for (const std::string& file : files) {
    const std::optional<int32_t> rank = RankFromFileName(fs::path(file).filename().string());
    if (!rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": its name ends in no rank number (PyTorch names each dump PREFIX<rank>)"));
    }
    absl::StatusOr<std::string> bytes = ReadRegularFile(file, kMaxDumpBytes);
    // In a folder, a FIFO, a device or a file that cannot be read is named, never dropped.
    if (!bytes.ok() && listed.count(file) != 0) {
      std::string why(bytes.status().message());
      if (absl::StartsWith(why, file + ": ")) why = why.substr(file.size() + 2);
      left_out.push_back({file, rank, why, false});
      continue;
    }
    if (!bytes.ok()) return bytes.status();
    if (listed.count(file) != 0 && !LooksLikeDump(*bytes)) {
      left_out.push_back({file, rank, "not a dump", true});
      continue;
    }
    if (auto [it, fresh] = rank_files.emplace(*rank, file); !fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, " and ", it->second, " are both rank ", *rank, ": give one dump per rank"));
    }
    absl::StatusOr<FlightRecorderDump> dump = ParseDump(*bytes);
    if (!dump.ok()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", dump.status().message()));
    dumps.push_back(RankDump{file, *rank, *std::move(dump)});
  }
  if (files.empty() && left_out.empty()) return absl::InvalidArgumentError("no dump files given");
  if (dumps.empty()) {
    std::string named;
    for (const SkippedFile& file : left_out) absl::StrAppend(&named, "; ", file.file, ": ", file.why);
    return absl::InvalidArgumentError(absl::StrCat("none of the files found is a Flight Recorder dump", named));
  }
  if (absl::Status status = CheckOneJob(dumps); !status.ok()) return status;
  if (skipped != nullptr) *skipped = std::move(left_out);
  return dumps;
}

void SaySkipped(const std::vector<SkippedFile>& skipped, ImportRecord* record) {
  const std::set<int32_t> missing(record->missing_ranks.begin(), record->missing_ranks.end());
  std::set<int32_t> dumped;
  for (const ImportedDump& dump : record->dumps) dumped.insert(dump.rank);
  std::map<int32_t, std::vector<std::string>> maybe_of;  // missing rank -> files that may be its dump
  std::vector<std::string> of_unknown_rank;
  for (const SkippedFile& file : skipped) {
    const std::string words = absl::StrCat(file.file, ": ", file.why, ", not read");
    const bool rank_missing = file.rank && missing.count(*file.rank) != 0;
    // Not a data gap: another tool's file in the folder (its rank has a dump, or is none of
    // the job's), or a FIFO beside a rank's dump (PyTorch's dump pipe, PREFIX<rank>.pipe).
    const bool harmless = file.rank && !rank_missing && (file.regular || dumped.count(*file.rank) != 0);
    if (harmless) {
      record->notes.push_back(file.regular ? absl::StrCat(file.file, ": not a dump, skipped") : words);
      continue;
    }
    record->not_read.push_back(words);
    if (rank_missing) {
      maybe_of[*file.rank].push_back(words);
    } else if (!file.rank) {
      of_unknown_rank.push_back(file.file);
    }
  }
  for (const int32_t rank : record->missing_ranks) {
    if (auto it = maybe_of.find(rank); it != maybe_of.end()) {
      record->notes.push_back(absl::StrCat("rank ", rank, " has no dump read: ", absl::StrJoin(it->second, "; "),
                                           " (it may hold rank ", rank, "'s dump: nothing is known of its calls)"));
    } else if (!of_unknown_rank.empty()) {
      record->notes.push_back(absl::StrCat("rank ", rank, " has no dump read: ", absl::StrJoin(of_unknown_rank, ", "),
                                           " (a number beyond any rank) may be its dump, not read"));
    } else {
      record->notes.push_back(absl::StrCat("rank ", rank, " wrote no dump (given none): it may have been stopped, "
                                                          "killed, or have left before the others timed out"));
    }
  }
}

}  // namespace collwatch::flight_recorder
