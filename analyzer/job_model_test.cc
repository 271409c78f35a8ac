// The job model on records as rings yield them: group members complete with their group,
// a return may arrive before its enter, damaged records and clocks are counted or
// saturated instead of allocated or overflowed; Apply takes all a ProcessUpdate says.
// Threading: single-threaded.
#include "analyzer/job_model.h"

#include <cstdint>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::job_model_test {
namespace {

using ring::ApiFn;

// No device (the preload found no CUDA): the GroupEnd completes at its return, and so
// do its members; none stays pending (online, pending calls are never forgotten).
TEST(JobModelTest, GroupEndCompletingAtReturnCompletesItsMembers) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId process = job.AddProcess(0);
  job.Group(process, kComm, 0, 1, 1, {Gather("g"), Gather("g")}, kT0, 0, /*end_completes_at_return=*/true);
  EXPECT_EQ(analyzer.model().comms()[0].ranks[0].progress.completed(), 2u);
  EXPECT_TRUE(analyzer.model().process(process).pending_groups.empty());
  EXPECT_TRUE(analyzer.model().process(process).pending.empty());
}

TEST(JobModelTest, ReturnArrivingBeforeItsEnterIsKept) {
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
  EXPECT_EQ(analyzer.model().comms()[0].ranks[0].progress.completed(), 1u);
  EXPECT_EQ(analyzer.model().unmatched_records(), 0u);
}

TEST(JobModelTest, DamagedRecordsAreCountedNotAllocated) {
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

// A trace that kept only its last entries (a Flight Recorder dump of a long job): its
// first collective far into the communicator is placed, without slots for its past.
TEST(JobModelTest, AHistoryThatStartsLateIsPlacedWithoutItsPast) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId process = job.AddProcess(0);
  constexpr uint64_t kFirst = 5'000'001;
  job.Collective(process, kComm, 0, 2, kFirst, Gather("a"), kT0, kT0 + kMs);
  job.Collective(process, kComm, 0, 2, kFirst + 1, Gather("b"), kT0 + kMs, kT0 + 2 * kMs);
  const Comm& comm = analyzer.model().comms()[0];
  ASSERT_NE(analyzer.model().Collective(comm, 0, kFirst + 1), nullptr);
  EXPECT_EQ(analyzer.model().Collective(comm, 0, 1), nullptr);
  EXPECT_LE(comm.ranks[0].collectives.stored(), kLateHistoryMargin + 2);
  EXPECT_EQ(analyzer.model().unmatched_records(), 0u);
}

// Post-mortem, a rank that never reported on a communicator (a missing dump) does not
// keep the others from being compared, and the stall frontier starts past what the
// reporting ranks completed (which the silent rank must have joined).
TEST(JobModelTest, ARankThatNeverReportedLeavesTheOthersComparedPostMortem) {
  Analyzer analyzer(TestOptions());
  SyntheticJob job(&analyzer.model());
  const ProcessId p0 = job.AddProcess(0);
  const ProcessId p1 = job.AddProcess(1);
  job.Collective(p0, kComm, 0, 3, 1, Gather("a"), kT0, kT0 + kMs);
  job.Collective(p1, kComm, 1, 3, 1, Gather("a"), kT0, kT0 + kMs);
  job.Collective(p0, kComm, 0, 3, 2, Gather("vision", 4096), kT0 + kMs, 0);
  job.Collective(p1, kComm, 1, 3, 2, Gather("text", 2048), kT0 + kMs, 0);
  const std::vector<Finding> findings = analyzer.Analyze(kT0 + 60 * kSecond, /*final_pass=*/true);
  ASSERT_FALSE(findings.empty());
  EXPECT_NE(findings[0].kind, FindingKind::kNotJoined);
  EXPECT_EQ(findings[0].seq, 2u);
  EXPECT_EQ(findings[0].lagging_ranks, std::vector<int32_t>{2});
}

// The ring fuzzer's find: clocks from a damaged ring header or record (an offset near
// 2^63, a time near 2^64) overflowed the realtime conversion (undefined behaviour).
TEST(JobModelTest, DamagedClocksSaturateInsteadOfOverflowing) {
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

// An all-reduce as a ring holds it: its enter at (0, index) and its return after it.
std::vector<IndexedRecord> AllReduceRecords(uint64_t index, uint64_t seq, uint32_t region_id) {
  ring::Record enter{};
  enter.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  enter.fn = static_cast<uint16_t>(ApiFn::kAllReduce);
  enter.comm_id = kComm;
  enter.rank = 0;
  enter.nranks = 1;
  enter.seq = seq;
  enter.count = 1024;
  enter.dtype = 7;
  enter.region_id = region_id;
  enter.t_ns = 1000 * (index + 1);
  ring::Record back = enter;
  back.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
  back.ref_lane = 0;
  back.ref_index = index;
  back.t_ns = enter.t_ns + 500;
  back.flags = ring::kFlagCompletesAtReturn;
  return {{0, index, enter}, {0, index + 1, back}};
}

// Apply is the one door every source feeds a process through: all an update says lands.
TEST(JobModelApplyTest, EverythingAnUpdateSaysLands) {
  JobModel model;
  ProcessInfo info;
  info.realtime_offset_ns = kT0;
  const ProcessId process = model.AddProcess(info);
  ProcessUpdate update;
  update.regions = {{3, "fwd/embed"}};
  for (const IndexedRecord& item : AllReduceRecords(0, 1, 3)) update.records.push_back(item);
  for (const IndexedRecord& item : AllReduceRecords(2, 2, 0)) update.records.push_back(item);
  update.status = ProcessStatus::kExited;
  update.heartbeat_ns = 5 * kSecond;
  update.lost_records = 7;
  update.sample.state = ProcessState::kZombie;
  update.sample.sampled_ns = kT0 + 6 * kSecond;
  update.exit_code = 300;  // more than exit() can pass: clamped
  model.Apply(process, update);

  const Comm* comm = model.FindComm(kComm);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->ranks[0].progress.completed(), 2u);
  EXPECT_EQ(model.unmatched_records(), 0u);
  const Call* first = model.Collective(*comm, 0, 1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(model.RegionName(first->region), "fwd/embed") << "region names come before the records that use them";
  EXPECT_EQ(first->enter_ns, kT0 + 1000);
  const Process& held = model.process(process);
  EXPECT_EQ(held.status, ProcessStatus::kExited);
  EXPECT_EQ(held.heartbeat_ns, kT0 + 5 * kSecond);
  EXPECT_EQ(held.lost_records, 7u);
  EXPECT_EQ(held.sample.state, ProcessState::kZombie);
  EXPECT_TRUE(held.exit_recorded);
  EXPECT_EQ(held.exit_code, 255);
}

// A later update that says nothing of the status, the process or an exit (an agent's
// batch of records only) leaves what earlier ones said.
TEST(JobModelApplyTest, WhatAnUpdateDoesNotSayStaysAsItWas) {
  JobModel model;
  const ProcessId process = model.AddProcess({});
  ProcessUpdate first;
  first.records = AllReduceRecords(0, 1, 0);
  first.status = ProcessStatus::kSilent;
  first.heartbeat_ns = 5 * kSecond;
  first.lost_records = 2;
  first.sample.state = ProcessState::kStopped;
  first.sample.sampled_ns = kT0;
  first.exit_code = 3;
  model.Apply(process, first);
  ProcessUpdate records_only;
  records_only.records = AllReduceRecords(2, 2, 0);
  model.Apply(process, records_only);

  EXPECT_EQ(model.FindComm(kComm)->ranks[0].progress.completed(), 2u);
  const Process& held = model.process(process);
  EXPECT_EQ(held.status, ProcessStatus::kSilent);
  EXPECT_EQ(held.heartbeat_ns, 5 * kSecond);
  EXPECT_EQ(held.lost_records, 2u);
  EXPECT_EQ(held.sample.state, ProcessState::kStopped);
  EXPECT_EQ(held.sample.sampled_ns, kT0);
  EXPECT_TRUE(held.exit_recorded);
  EXPECT_EQ(held.exit_code, 3);
}

// FSDP's backward runs in autograd's threads, where no frame of the user's code exists:
// a unit's reduce-scatter there takes the call path of the unit's forward all-gather (same
// communicator, same element count), marked inferred; one of another size takes none.
TEST(JobModelTest, ACallWithoutUserFramesTakesItsUnitsForwardCallPath) {
  JobModel model;
  const ProcessId process = model.AddProcess({});
  ProcessUpdate update;
  const CallPath forward{{{"/opt/torch/distributed/fsdp/_fsdp_collectives.py", "foreach_all_gather", 290},
                          {"/home/me/model.py", "VisionTower.forward", 41},
                          {"/home/me/train.py", "step", 12}}};
  const CallPath backward{{{"/opt/torch/distributed/fsdp/_fsdp_collectives.py", "foreach_reduce", 410},
                           {"/opt/torch/autograd/graph.py", "_engine_run_backward", 768}}};
  update.call_paths = {{1, forward}, {2, backward}};
  auto enter = [](uint64_t index, ApiFn fn, uint64_t seq, uint64_t count, uint32_t path) {
    ring::Record record{};
    record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    record.fn = static_cast<uint16_t>(fn);
    record.comm_id = kComm;
    record.rank = 0;
    record.nranks = 2;
    record.seq = seq;
    record.count = count;
    record.t_ns = 100 + index;
    record.call_path_id = path;
    return IndexedRecord{1, index, record};
  };
  update.records = {enter(0, ApiFn::kAllGather, 1, 4096, 1), enter(1, ApiFn::kReduceScatter, 2, 4096, 2),
                    enter(2, ApiFn::kReduceScatter, 3, 512, 2)};
  model.Apply(process, update);
  const Comm& comm = *model.FindComm(kComm);
  const Call* gather = model.Collective(comm, 0, 1);
  const Call* scatter = model.Collective(comm, 0, 2);
  const Call* other = model.Collective(comm, 0, 3);
  ASSERT_TRUE(gather && scatter && other);
  EXPECT_FALSE(gather->call_path_inferred);
  EXPECT_EQ(scatter->call_path, gather->call_path);
  EXPECT_TRUE(scatter->call_path_inferred);
  EXPECT_EQ(model.RegionName(scatter->region), "step/VisionTower.forward()");
  EXPECT_FALSE(other->call_path_inferred);
  EXPECT_EQ(model.call_path(other->call_path), backward) << "its own path, library frames only";
  EXPECT_EQ(other->region, 0u) << "no user frame: no code region";
}

// A stall names the code the waiting ranks wait in: NOT_JOINED carries the entered
// ranks' call path (the late rank made no call there to name).
TEST(JobModelTest, NotJoinedNamesWhereTheWaitingRanksWait) {
  Analyzer analyzer(TestOptions());
  JobModel& model = analyzer.model();
  const CallPath waiting{{{"/home/me/model.py", "VisionTower.forward", 41}, {"/home/me/train.py", "step", 12}}};
  for (int32_t rank = 0; rank < 2; ++rank) {
    const ProcessId process = model.AddProcess({});
    ProcessUpdate update;
    ring::Record init{};
    init.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    init.fn = static_cast<uint16_t>(ApiFn::kCommInitRank);
    init.comm_id = kComm;
    init.rank = rank;
    init.nranks = 2;
    init.t_ns = kT0;
    update.records.push_back({1, 0, init});
    ring::Record created = init;  // its return: the communicator exists
    created.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    created.ref_lane = 1;
    created.ref_index = 0;
    created.t_ns = kT0 + 500;
    created.flags = ring::kFlagCompletesAtReturn;
    update.records.push_back({1, 1, created});
    if (rank == 0) {
      ring::Record gather = init;
      gather.fn = static_cast<uint16_t>(ApiFn::kAllGather);
      gather.seq = 1;
      gather.count = 4096;
      gather.t_ns = kT0 + 1000;
      gather.flags = 0;
      gather.call_path_id = 9;
      update.call_paths = {{9, waiting}};
      update.records.push_back({1, 2, gather});
    }
    model.Apply(process, update);
  }
  const std::vector<Finding> found = analyzer.Analyze(kT0 + 60 * kSecond);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].kind, FindingKind::kNotJoined);
  ASSERT_EQ(found[0].call_paths.size(), 1u);
  EXPECT_EQ(found[0].call_paths[0].ranks, std::vector<int32_t>{0});
  EXPECT_EQ(found[0].call_paths[0].path, waiting);
}

}  // namespace
}  // namespace collwatch::analyzer::job_model_test
