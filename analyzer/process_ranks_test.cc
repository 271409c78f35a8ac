// Ranks per process: the rule (process_ranks.h) on plain memberships and on job models of
// one-rank and several-rank processes, the texts, and ncclCommInitAll's returns.
#include "analyzer/process_ranks.h"

#include "analyzer/analyzer.h"
#include "analyzer/finding_words.h"
#include "analyzer/synthetic_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::process_ranks_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kWorld = 0x5000000000000001ull;
constexpr uint64_t kLocal = 0x1000000000000002ull;  // a smaller communicator, lower id
constexpr int64_t kT0 = 1'700'000'000'000'000'000;

ProcessInfo Unranked(int32_t pid) {
  ProcessInfo info;
  info.host = "node0";
  info.pid = pid;
  return info;  // RANK and WORLD_SIZE unset: a process that may hold several ranks
}

TEST(ProcessRanksTest, WorldIsTheLargestCommunicatorLowestIdAmongEquals) {
  EXPECT_EQ(collwatch::WorldCommId(std::vector<CommMembership>{}), 0u);
  EXPECT_EQ(collwatch::WorldCommId({{kLocal, 2, 0}, {kWorld, 4, 1}, {kLocal, 2, 1}}), kWorld);
  EXPECT_EQ(collwatch::WorldCommId({{9, 4, 0}, {7, 4, 0}, {8, 4, 0}}), 7u);
}

TEST(ProcessRanksTest, RankFromTheLauncherUnlessTheProcessHoldsSeveralWorldRanks) {
  const std::vector<CommMembership> two = {{kWorld, 4, 3}, {kLocal, 2, 0}, {kWorld, 4, 2}};
  EXPECT_THAT(JobRanksOf(ring::kUnset, two, kWorld), ElementsAre(2, 3));
  EXPECT_THAT(JobRanksOf(1, two, kWorld), ElementsAre(2, 3)) << "RANK numbered processes, not ranks";
  EXPECT_THAT(JobRanksOf(5, {{kWorld, 8, 5}}, kWorld), ElementsAre(5));
  EXPECT_THAT(JobRanksOf(5, {{kWorld, 8, 4}}, kWorld), ElementsAre(5)) << "RANK wins over a same-sized split";
  EXPECT_THAT(JobRanksOf(ring::kUnset, {{kWorld, 8, 4}}, kWorld), ElementsAre(4));
  EXPECT_THAT(JobRanksOf(ring::kUnset, {{kLocal, 2, 0}}, kWorld), IsEmpty()) << "not on the world communicator";
  EXPECT_THAT(JobRanksOf(ring::kUnset, {}, 0), IsEmpty());
  EXPECT_THAT(JobRanksOf(2, {}, 0), ElementsAre(2));
}

TEST(ProcessRanksTest, MembershipOfARecordNeedsAValidCommunicatorRank) {
  ring::Record record{};
  record.comm_id = kWorld;
  record.rank = 1;
  record.nranks = 4;
  EXPECT_EQ(MembershipOf(record), (CommMembership{kWorld, 4, 1}));
  record.rank = ring::kUnset;
  EXPECT_FALSE(MembershipOf(record));
  record.rank = 4;
  EXPECT_FALSE(MembershipOf(record));
  record.rank = 0;
  record.nranks = kMaxRanks + 1;
  EXPECT_FALSE(MembershipOf(record));
  record.nranks = 4;
  record.comm_id = 0;
  EXPECT_FALSE(MembershipOf(record));
}

TEST(ProcessRanksTest, TextsNameRanksAndProcess) {
  EXPECT_EQ(ProcessRanksText({3}), "rank 3");
  EXPECT_EQ(ProcessRanksText({0, 1}), "ranks 0-1");
  EXPECT_EQ(ProcessRanksText({}), "rank unknown");
  EXPECT_EQ(ProcessLabel({0, 1}, "node0", 4242), "ranks 0-1 (node0, pid 4242)");
  EXPECT_EQ(ProcessLabel({}, "", 7), "process (unknown host, pid 7)");
  EXPECT_EQ(HeldRankCount({}), 1);
  EXPECT_EQ(HeldRankCount({4, 5, 6}), 3);
}

// Two processes of two ranks each, the ranks initialised in a group (InitRank per rank),
// plus a process-local communicator per process.
class ProcessRanksTwoByTwoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int p = 0; p < 2; ++p) {
      processes_.push_back(job_.AddProcess(Unranked(4242 + p)));
      for (int local = 0; local < 2; ++local) {
        job_.Init(processes_[p], kWorld, 2 * p + local, 4, kT0);
        job_.Init(processes_[p], kLocal + static_cast<uint64_t>(p), local, 2, kT0);
      }
    }
  }

  Analyzer analyzer_;
  JobModel& model_ = analyzer_.model();
  SyntheticJob job_{&model_};
  std::vector<ProcessId> processes_;
};

TEST_F(ProcessRanksTwoByTwoTest, EachProcessShowsAsItsWorldRanks) {
  EXPECT_EQ(WorldCommId(model_), kWorld);
  EXPECT_THAT(RanksOfProcess(model_, processes_[0]), ElementsAre(0, 1));
  EXPECT_THAT(RanksOfProcess(model_, processes_[1]), ElementsAre(2, 3));
  const std::vector<std::vector<int32_t>> all = RanksOfProcesses(model_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_THAT(all[1], ElementsAre(2, 3));
  int total = 0;
  for (const std::vector<int32_t>& ranks : all) total += HeldRankCount(ranks);
  EXPECT_EQ(total, 4);
}

TEST_F(ProcessRanksTwoByTwoTest, CommunicatorRanksMapToJobRanksWhereRecordsTellWhich) {
  const Comm& world = *model_.FindComm(kWorld);
  const Comm& local = *model_.FindComm(kLocal + 1);
  EXPECT_EQ(JobRankOfCommRank(model_, world, 3), 3);
  // Rank 1 of process 1's local communicator drives one of ranks 2-3; records do not say which.
  EXPECT_EQ(JobRankOfCommRank(model_, local, 1), std::nullopt);
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model_, world, {1, 2})), "") << "world ranks are the job's";
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model_, local, {1})), " (in the process of ranks 2-3 (node0, pid 4243))");
}

TEST(ProcessRanksModelTest, OneRankProcessesKeepTheirLaunchersRank) {
  JobModel model;
  SyntheticJob job(&model);
  std::vector<ProcessId> processes;
  for (int rank = 0; rank < 4; ++rank) processes.push_back(job.AddProcess(rank));
  constexpr uint64_t kChild = 0x2222ull;
  for (int rank = 0; rank < 4; ++rank) job.Init(processes[rank], kWorld, rank, 4, kT0);
  job.Init(processes[2], kChild, 0, 2, kT0);
  job.Init(processes[3], kChild, 1, 2, kT0);
  EXPECT_THAT(RanksOfProcess(model, processes[2]), ElementsAre(2));
  const Comm& child = *model.FindComm(kChild);
  EXPECT_EQ(JobRankOfCommRank(model, child, 1), 3);
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model, child, {0})), " (global rank 2)");
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model, child, {0, 1})), " (global ranks 2-3)");
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model, *model.FindComm(kWorld), {0, 1})), "");
}

TEST(ProcessRanksModelTest, ProcessOfUnknownRankMakesNoNote) {
  JobModel model;
  SyntheticJob job(&model);
  const ProcessId a = job.AddProcess(Unranked(1));
  const ProcessId b = job.AddProcess(Unranked(2));
  constexpr uint64_t kBig = 0x9999ull;
  job.Init(a, kBig, 0, 8, kT0);  // the world, as far as records tell; b is not on it
  job.Init(a, kLocal, 0, 2, kT0);
  job.Init(b, kLocal, 1, 2, kT0);
  EXPECT_THAT(RanksOfProcess(model, b), IsEmpty());
  EXPECT_EQ(JobRanksNote(JobPlaceOf(model, *model.FindComm(kLocal), {0, 1})), "");
}

// ncclCommInitAll: one enter, then one return per rank of its communicator, in rank order
// (interposer/recorder.cc); every rank joins with the call as its creation.
TEST(ProcessRanksModelTest, CommInitAllReturnsJoinEveryRank) {
  JobModel model;
  const ProcessId process = model.AddProcess(Unranked(99));
  ring::Record enter{};
  enter.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  enter.fn = static_cast<uint16_t>(ring::ApiFn::kCommInitAll);
  enter.comm_id = kLocal;
  enter.rank = ring::kUnset;
  enter.nranks = 3;
  enter.t_ns = 100;
  model.AddRecord(process, 0, 0, enter);
  for (int32_t rank = 0; rank < 3; ++rank) {
    ring::Record back = enter;
    back.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    back.rank = rank;
    back.aux0 = static_cast<uint64_t>(rank);
    back.ref_lane = 0;
    back.ref_index = 0;
    back.t_ns = 200 + static_cast<uint64_t>(rank);
    model.AddRecord(process, 0, 1 + static_cast<uint64_t>(rank), back);
  }
  EXPECT_EQ(model.unmatched_records(), 0u);
  const Comm& comm = *model.FindComm(kLocal);
  EXPECT_EQ(comm.ranks_present, 3);
  for (const CommRank& rank : comm.ranks) EXPECT_EQ(rank.init_call, 0u);
  EXPECT_TRUE(model.process(process).pending.empty()) << "the last rank's return ends the call";
  EXPECT_THAT(RanksOfProcess(model, process), ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace collwatch::analyzer::process_ranks_test
