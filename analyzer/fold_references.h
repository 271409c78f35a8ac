// The reference windows of a job's model (Comm::window_classes) copied out for the workers
// that fold a process's model apart before the job's model adopts it (JobModel::FoldApart):
// each class's calls in the job's model's numbering, and the names that numbering gives.
// Threading: the job's model's thread publishes; any thread reads; one mutex, held briefly.
#ifndef COLLWATCH_ANALYZER_FOLD_REFERENCES_H_
#define COLLWATCH_ANALYZER_FOLD_REFERENCES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

// A name the job's model has not interned yet: no call of the job's model carries it.
inline constexpr uint32_t kNotInterned = UINT32_MAX;

class FoldReferences {
 public:
  // One class of one window: the calls of the first rank seen with `chain` there.
  struct Window {
    uint64_t chain = 0;
    int32_t reference = 0;  // that rank
    std::vector<Call> calls;  // its kChainWindow calls by seq, numbered as the job's model numbers
  };
  using Classes = std::vector<std::shared_ptr<const Window>>;

  // What one worker reads for one process, copied under the lock once.
  struct View {
    std::vector<RegionId> region_of;       // its model's region id -> the job's (kNotInterned)
    std::vector<CallPathId> call_path_of;  // its model's call path id -> the job's (kNotInterned)
    // By (communicator id, window): the classes published there, in the order seen.
    absl::flat_hash_map<std::pair<uint64_t, uint64_t>, Classes> classes;
  };

  // The job's model's thread: a class registered at `window` of communicator `comm_id`.
  void Publish(uint64_t comm_id, uint64_t window, Window published);
  // The job's model's thread: the region names and call paths `model` interned since the
  // last call.
  void PublishNames(const JobModel& model);

  // Any thread: the job's numbering of `region_names` and `call_paths` (a model's own, as
  // it interned them; index 0 is none), and the classes of each (communicator id, window)
  // in `wanted`.
  View ViewOf(const std::vector<std::string>& region_names, const std::vector<CallPath>& call_paths,
              const std::vector<std::pair<uint64_t, uint64_t>>& wanted) const;

 private:
  mutable std::mutex mutex_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, Classes> classes_;
  absl::flat_hash_map<std::string, RegionId> region_ids_;
  absl::flat_hash_map<std::string, CallPathId> call_path_ids_;  // by CallPathKey
  size_t regions_published_ = 1;  // the model's names below these are in the maps
  size_t call_paths_published_ = 1;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FOLD_REFERENCES_H_
