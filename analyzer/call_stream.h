// One process's NCCL calls placed on a communicator (creations, collectives, sends and
// receives), handed out one by one as each settles (returned, and for communication also
// completed), in call order per communicator, from its records fed in pieces: a private
// JobModel merges the records, and whatever was handed out is forgotten, so memory
// follows the calls in flight, never the calls made. For readers of runs of any size
// (the Chrome trace export).
// Threading: single-threaded.
#ifndef COLLWATCH_ANALYZER_CALL_STREAM_H_
#define COLLWATCH_ANALYZER_CALL_STREAM_H_

#include <cstdint>
#include <functional>
#include <map>

#include "analyzer/job_model.h"
#include "process/process_update.h"

namespace collwatch::analyzer {

// Whether `call` is over: communication once its device work completed, anything else
// once it returned.
bool CallFinished(const Call& call);

class CallStream {
 public:
  // Each call handed out, with the model that names its communicator, region and call path,
  // and its index among the process's calls (their order of arrival).
  using Each = std::function<void(const JobModel& model, uint32_t index, const Call& call)>;

  explicit CallStream(const ProcessInfo& info);

  // Applies `piece` (JobModel::Apply), then hands out each call that settled.
  void Add(const ProcessUpdate& piece, const Each& each);
  // No more records: hands out the calls that never settled too.
  void Finish(const Each& each);

  // The process as its records left it (status, memberships); its calls are forgotten.
  const Process& process() const { return model_.process(0); }
  const JobModel& model() const { return model_; }
  // Calls held now: those in flight and the margin kept below the newest (tests and
  // benchmarks read it to see that memory stays bounded).
  size_t calls_held() const { return process().calls.stored(); }

 private:
  enum class Placed : int8_t { kUnknown, kNo, kYes };
  // Whether the call at `index` sits in its communicator's lists (what the export draws).
  Placed PlacedNow(uint32_t index, const Call& call) const;
  void HandOutSettled(bool all, const Each& each);
  void Forget();

  JobModel model_;
  uint32_t next_ = 0;  // calls below it have been looked at
  // Calls looked at and not handed out yet (unplaced ones are dropped at once), with what
  // their placement was at first sight.
  std::map<uint32_t, Placed> waiting_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_CALL_STREAM_H_
