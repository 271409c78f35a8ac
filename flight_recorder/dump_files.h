// Which files are one job's dumps: the files and folders the user named, each dump's rank
// from its name, every file of those folders left out with the reason (none dropped
// without a word), and dumps of different jobs refused. Threading: single-threaded.
#ifndef COLLWATCH_FLIGHT_RECORDER_DUMP_FILES_H_
#define COLLWATCH_FLIGHT_RECORDER_DUMP_FILES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flight_recorder/dump.h"
#include "flight_recorder/import_record.h"

namespace collwatch::flight_recorder {

// A dump read from its file, with the rank its name gives.
struct RankDump {
  std::string file;
  int32_t rank = -1;
  FlightRecorderDump dump;
};

// A file of a folder of dumps whose name ends in a number, not read.
struct SkippedFile {
  std::string file;
  std::optional<int32_t> rank;  // what its name gives; none: a number beyond any rank
  std::string why;              // "is a FIFO, not a regular file", "not a dump", ...
  bool regular = false;         // a regular file, read and found to be no dump
};

// The dumps `inputs` name (a folder: every file in it whose name ends in a number; one
// there that cannot be read, is no regular file, has a number beyond any rank, or is
// plainly no dump, neither pickle nor JSON, goes to `skipped` with why). INVALID_ARGUMENT
// naming the file for a file named by the user that is unreadable or not a dump, a name
// without a rank, a rank given twice, or dumps of different jobs (CheckOneJob).
absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::vector<std::string>& inputs,
                                                std::vector<SkippedFile>* skipped = nullptr);

// Dumps of one job: one format version and NCCL version, the same members in every group
// they share, and no collective that completed on one rank (one that needs every rank:
// all-reduce, all-gather, reduce-scatter, all-to-all) enqueued on another rank more than
// kClockSlackS later. INVALID_ARGUMENT naming both files otherwise.
absl::Status CheckOneJob(const std::vector<RankDump>& dumps);
inline constexpr double kClockSlackS = 10;  // hosts' clocks may differ this much

// What the import says of the skipped files, given the ranks `missing` (named by a group,
// with no dump read): a file that may have been a missing rank's dump (its rank, or a
// number beyond any rank) or is no regular file where its rank had no dump goes to
// record->not_read (a data gap of the report: the verdict is incomplete); others, to the
// notes. Each missing rank's note names the files that may have been its dump.
void SaySkipped(const std::vector<SkippedFile>& skipped, ImportRecord* record);

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_DUMP_FILES_H_
