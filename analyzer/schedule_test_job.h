// Test-only: the training steps, jobs, baselines and op ids that the schedule tests
// (schedule, step folding, baseline, check, diff) share. Header-only; single-threaded.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_TEST_JOB_H_
#define COLLWATCH_ANALYZER_SCHEDULE_TEST_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/baseline.h"
#include "analyzer/job_model.h"
#include "analyzer/schedule.h"
#include "analyzer/test_job.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::testing {

inline constexpr uint64_t kWorld = 0xa11ce00000000001ull;

inline std::vector<Op> Step(int layers = 2) {
  std::vector<Op> ops = {Gather("fwd/embed", 512)};
  for (int l = 0; l < layers; ++l) ops.push_back(Gather("fwd/block" + std::to_string(l)));
  for (int l = layers; l-- > 0;) {
    ops.push_back(Gather("bwd/block" + std::to_string(l)));
    ops.push_back(ReduceScatter("bwd/block" + std::to_string(l)));
  }
  ops.push_back(ReduceScatter("bwd/embed", 128));
  return ops;
}

inline std::vector<Op> Repeat(const std::vector<Op>& warmup, const std::vector<Op>& step, int steps,
                       const std::vector<Op>& tail = {}) {
  std::vector<Op> ops = warmup;
  for (int s = 0; s < steps; ++s) ops.insert(ops.end(), step.begin(), step.end());
  ops.insert(ops.end(), tail.begin(), tail.end());
  return ops;
}

// `world` ranks on one communicator (id `comm`), rank r issuing ops_of(r).
template <typename OpsOf>
inline void BuildJob(JobModel* model, int world, OpsOf ops_of, uint64_t comm = kWorld) {
  TestJob job(model);
  for (int r = 0; r < world; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, comm, r, world);
    for (const Op& op : ops_of(r)) job.Collective(p, comm, r, world, op);
  }
}

inline std::string BaselineText(const std::vector<Op>& ops, OpTable* table, int world = 4) {
  JobModel model;
  BuildJob(&model, world, [&](int) { return ops; });
  absl::StatusOr<Baseline> baseline = MakeBaseline(ExtractSchedule(model, table));
  EXPECT_TRUE(baseline.ok()) << baseline.status();
  return baseline.ok() ? FormatBaseline(*baseline, *table) : "";
}

inline std::vector<uint32_t> Ids(OpTable* table, const std::vector<Op>& ops) {
  std::vector<uint32_t> ids;
  for (const Op& op : ops) {
    ids.push_back(table->Intern(ScheduleOp{op.fn, op.count, op.dtype, op.redop, op.root_or_peer, op.region}));
  }
  return ids;
}

}  // namespace collwatch::analyzer::testing

#endif  // COLLWATCH_ANALYZER_SCHEDULE_TEST_JOB_H_
