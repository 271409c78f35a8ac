// Which of the job's ranks each process of the analyzer's model holds, by the one rule of
// process/rank_membership.h, and how a communicator's ranks map onto the job's.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_PROCESS_RANKS_H_
#define COLLWATCH_ANALYZER_PROCESS_RANKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"
#include "process/rank_membership.h"

namespace collwatch::analyzer {

// The same rule over a JobModel.
uint64_t WorldCommId(const JobModel& model);
std::vector<int32_t> RanksOfProcess(const JobModel& model, ProcessId process);
// Every process's ranks, by ProcessId (one pass: for loops over all processes).
std::vector<std::vector<int32_t>> RanksOfProcesses(const JobModel& model);

// The job's world size: the world communicator's size, else the largest WORLD_SIZE a
// process was launched with; 0 when neither is known.
int32_t JobWorldSize(const JobModel& model);
// The job's ranks below its world size that no process with records holds: ranks that
// left no trace (lost, or never called NCCL). Empty when the world size is not known.
std::vector<int32_t> MissingJobRanks(const JobModel& model);

// The job rank behind `rank` of `comm`: itself on the world communicator, else the one
// rank its process holds. nullopt when that process holds several (records do not say
// which device a rank of a smaller communicator drives) or none is known.
std::optional<int32_t> JobRankOfCommRank(const JobModel& model, const Comm& comm, int32_t rank);

// Where `ranks` of `comm` sit in the job, so that people find them: their job ranks where
// those differ from the communicator's, and the processes of several ranks that hold
// some of them. Empty when the communicator's ranks are the job's, or when some rank's
// process is not known. Its words: JobRanksNote (finding_words.h).
JobPlace JobPlaceOf(const JobModel& model, const Comm& comm, const std::vector<int32_t>& ranks);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PROCESS_RANKS_H_
