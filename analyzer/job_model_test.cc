// The job model on records as rings yield them: group members complete with their group,
// a return may arrive before its enter, damaged records and clocks are counted or
// saturated instead of allocated or overflowed. Threading: single-threaded.
#include "analyzer/job_model.h"

#include <cstdint>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

// No device (the preload found no CUDA): the GroupEnd completes at its return, and so
// do its members; none stays pending (online, pending calls are never forgotten).
TEST(AnalyzerTest, GroupEndCompletingAtReturnCompletesItsMembers) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId process = job.AddProcess(0);
  job.Group(process, kComm, 0, 1, 1, {Gather("g"), Gather("g")}, kT0, 0, /*end_completes_at_return=*/true);
  EXPECT_EQ(analyzer.model().comms()[0].ranks[0].completed_seq, 2u);
  EXPECT_TRUE(analyzer.model().process(process).pending_groups.empty());
  EXPECT_TRUE(analyzer.model().process(process).pending.empty());
}

TEST(AnalyzerTest, ReturnArrivingBeforeItsEnterIsKept) {
  Analyzer analyzer(TestOptions());
  const ProcessId process = analyzer.model().AddProcess({});
  ring::Record enter{};
  enter.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  enter.fn = static_cast<uint16_t>(ApiFn::kAllReduce);
  enter.comm_id = kComm;
  enter.rank = 0;
  enter.nranks = 1;
  enter.seq = 1;
  enter.t_ns = 100;
  ring::Record back = enter;
  back.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
  back.ref_lane = 2;
  back.ref_index = 5;
  back.t_ns = 200;
  back.flags = ring::kFlagCompletesAtReturn;
  analyzer.model().AddRecord(process, 0, 0, back);
  analyzer.model().AddRecord(process, 2, 5, enter);
  EXPECT_EQ(analyzer.model().comms()[0].ranks[0].completed_seq, 1u);
  EXPECT_EQ(analyzer.model().unmatched_records(), 0u);
}

TEST(AnalyzerTest, DamagedRecordsAreCountedNotAllocated) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId process = job.AddProcess(0);
  job.Collective(process, kComm, 0, 2, 1, Gather("a"), kT0, kT0 + kMs);
  job.Collective(process, kComm, 0, 2, 1ull << 40, Gather("a"), kT0, kT0 + kMs);  // seq from nowhere
  job.Collective(process, 77, 0, 1 << 30, 1, Gather("a"), kT0, kT0 + kMs);       // a billion ranks
  EXPECT_EQ(analyzer.model().comms()[0].ranks[0].collectives.size(), 1u);
  EXPECT_EQ(analyzer.model().FindComm(77), nullptr);
  EXPECT_GE(analyzer.model().unmatched_records(), 2u);
}

// The ring fuzzer's find: clocks from a damaged ring header or record (an offset near
// 2^63, a time near 2^64) overflowed the realtime conversion (undefined behaviour).
TEST(AnalyzerTest, DamagedClocksSaturateInsteadOfOverflowing) {
  EXPECT_EQ(RealtimeOffsetNs(UINT64_MAX, 0), kMaxTimeNs);
  EXPECT_EQ(RealtimeOffsetNs(0, UINT64_MAX), -kMaxTimeNs);
  Analyzer analyzer(TestOptions());
  JobModel& model = analyzer.model();
  ProcessInfo info;
  info.realtime_offset_ns = INT64_MAX;
  const ProcessId late = model.AddProcess(info);
  info.realtime_offset_ns = INT64_MIN;
  const ProcessId early = model.AddProcess(info);
  for (ProcessId process : {late, early}) {
    ring::Record record{};
    record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    record.fn = static_cast<uint16_t>(ApiFn::kAllReduce);
    record.comm_id = kComm;
    record.rank = static_cast<int32_t>(process);
    record.nranks = 2;
    record.seq = 1;
    record.t_ns = UINT64_MAX - 5;
    model.AddRecord(process, 0, 0, record);
    model.SetStatus(process, ProcessStatus::kDead, UINT64_MAX, 0);
  }
  EXPECT_EQ(model.call(late, 0).enter_ns, kMaxTimeNs);
  EXPECT_EQ(model.call(early, 0).enter_ns, 1);
  EXPECT_EQ(model.LatestTimeNs(), kMaxTimeNs);
  analyzer.Analyze(model.LatestTimeNs(), /*final_pass=*/true);
}

}  // namespace
}  // namespace collwatch::analyzer
