// libcollwatch.so preloaded into real multi-process NCCL programs: on the CPU NCCL
// backend (every call recorded exactly once, arguments and results untouched, identical
// communicator ids on every rank, groups, splits, NVTX regions, a real hang read live and
// after SIGKILL, silence in non-NCCL and forked processes) and on the real libnccl.so.2
// for the calls that need no GPU.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ring/hash.h"
#include "ring/ring_names.h"
#include "ring/ring_reader.h"
#include "tests/support/ring_ranks.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch {
namespace {

using ring::ApiFn;
using ring::RecordKind;
using testing::EnterNames;
using testing::RankTrace;
using testing::ReadRanks;
using testing::Subprocess;
using testing::TempDir;

class InterpositionTest : public ::testing::Test {
 protected:
  std::map<std::string, std::string> PreloadEnv() const {
    return {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
            {"NVTX_INJECTION64_PATH", COLLWATCH_PRELOAD_PATH},
            {"COLLWATCH_RING_DIR", RingDir()},
            {"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}};
  }
  std::string RingDir() const { return dir_.path() + "/rings"; }
  std::vector<std::string> RanksCommand(int nproc, const std::string& plan) const {
    return {COLLWATCH_NCCL_RANKS_PATH, std::to_string(nproc), plan, dir_.path()};
  }

  TempDir dir_;
};

TEST_F(InterpositionTest, FourRanksRecordEveryCallExactlyOnce) {
  constexpr int kRanks = 4;
  Subprocess job(RanksCommand(kRanks, "all"), PreloadEnv());
  ASSERT_EQ(job.Wait(60), 0) << "the program's own result checks failed under the preload";

  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), /*writers_gone=*/true);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks)) << "one ring per rank, none for the launcher";

  const std::vector<std::string> expected_body = {
      "comm-init-rank", "all-reduce", "broadcast", "bcast", "reduce", "all-gather", "reduce-scatter",
      "all-to-all", "gather", "scatter", "group-start", "send", "recv", "group-end", "group-start",
      "group-start", "all-reduce", "group-end", "all-reduce", "group-end", "comm-split", "all-reduce",
      "comm-destroy", "comm-finalize", "comm-destroy"};
  std::set<uint64_t> main_ids;
  std::map<int, std::set<uint64_t>> child_ids_by_parity;
  for (auto& [rank, trace] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(trace.identity.world_size, kRanks);
    EXPECT_EQ(trace.reader->writer_state(), ring::WriterState::kExited);
    std::vector<std::string> expected = expected_body;
    if (rank == 0) expected.insert(expected.begin(), "get-unique-id");
    EXPECT_EQ(EnterNames(trace), expected);

    // Exactly one return per enter, pointing back at it, with NCCL's result.
    std::map<std::pair<uint32_t, uint64_t>, int> returns_per_enter;
    for (const IndexedRecord& item : trace.records) {
      if (item.record.kind == static_cast<uint16_t>(RecordKind::kReturn)) {
        ++returns_per_enter[{item.record.ref_lane, item.record.ref_index}];
        EXPECT_EQ(item.record.result, 0);
      }
    }
    for (const IndexedRecord& item : trace.records) {
      if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter)) {
        EXPECT_EQ((returns_per_enter[{item.lane, item.index}]), 1) << "enter at " << item.index;
      }
    }
    EXPECT_EQ(returns_per_enter.size(), trace.OfKind(RecordKind::kEnter).size());

    // Collectives of the world communicator: seq 1..11 in order, with their arguments.
    const std::vector<ring::Record> enters = trace.OfKind(RecordKind::kEnter);
    const uint64_t world_id = enters[rank == 0 ? 1 : 0].comm_id;
    main_ids.insert(world_id);
    uint64_t expected_seq = 1;
    uint64_t child_id = 0;
    for (const ring::Record& record : enters) {
      const auto fn = static_cast<ApiFn>(record.fn);
      if (ring::IsCollective(fn) && record.comm_id == world_id) {
        EXPECT_EQ(record.seq, expected_seq++);
        EXPECT_EQ(record.rank, rank);
        EXPECT_EQ(record.nranks, kRanks);
      }
      if (fn == ApiFn::kAllGather) {
        EXPECT_EQ(record.count, 4u);
      }
      if (fn == ApiFn::kReduceScatter) {
        EXPECT_EQ(record.count, 2u);
      }
      if (fn == ApiFn::kBroadcast) {
        EXPECT_EQ(record.root_or_peer, 1);
      }
      if (fn == ApiFn::kBcast) {
        EXPECT_EQ(record.dtype, 2);
      }  // ncclInt32
      if (fn == ApiFn::kReduce) {
        EXPECT_EQ(record.root_or_peer, 0);
        EXPECT_EQ(record.redop, 0);  // ncclSum
      }
      if (fn == ApiFn::kSend) {
        EXPECT_EQ(record.root_or_peer, (rank + 1) % kRanks);
        EXPECT_EQ(record.seq, 1u);
      }
      if (fn == ApiFn::kRecv) {
        EXPECT_EQ(record.root_or_peer, (rank + kRanks - 1) % kRanks);
      }
      if (fn == ApiFn::kCommSplit) {
        EXPECT_EQ(record.aux0, world_id);  // parent
        EXPECT_EQ(record.aux1, static_cast<uint64_t>(rank % 2));
        child_id = record.comm_id;
      }
    }
    EXPECT_EQ(expected_seq, 12u);

    // The split child: its all-reduce is seq 1 on the child id, with the child's shape.
    ASSERT_NE(child_id, 0u);
    EXPECT_NE(child_id, world_id);
    child_ids_by_parity[rank % 2].insert(child_id);
    bool saw_child_collective = false;
    for (const ring::Record& record : enters) {
      if (record.comm_id != child_id || static_cast<ApiFn>(record.fn) != ApiFn::kAllReduce) continue;
      saw_child_collective = true;
      EXPECT_EQ(record.seq, 1u);
      EXPECT_EQ(record.rank, rank / 2);
      EXPECT_EQ(record.nranks, kRanks / 2);
    }
    EXPECT_TRUE(saw_child_collective);

    // Groups: the members carry the group's id; nested starts share it.
    uint64_t open_group = 0;
    int depth = 0;
    for (const ring::Record& record : enters) {
      const auto fn = static_cast<ApiFn>(record.fn);
      if (fn == ApiFn::kGroupStart && depth++ == 0) open_group = record.group_id;
      if (depth > 0) {
        EXPECT_NE(record.group_id, 0u);
        EXPECT_EQ(record.group_id, open_group);
      } else {
        EXPECT_EQ(record.group_id, 0u) << OpName(fn);
      }
      if (fn == ApiFn::kGroupEnd) --depth;
    }

    // On the CPU backend the return is the completion: flagged on ungrouped device work.
    for (const ring::Record& record : trace.OfKind(RecordKind::kReturn)) {
      const auto fn = static_cast<ApiFn>(record.fn);
      if ((ring::IsCollective(fn) || ring::IsP2p(fn)) && record.group_id == 0) {
        EXPECT_TRUE(record.flags & ring::kFlagCompletesAtReturn);
      }
    }

    // NVTX: the ranges the program opened name the region of each call.
    for (const ring::Record& record : enters) {
      const std::string region = trace.reader->Name(record.region_id);
      const auto fn = static_cast<ApiFn>(record.fn);
      if (fn == ApiFn::kGather) {
        EXPECT_EQ(region, "collectives");
      }
      if (fn == ApiFn::kSend) {
        EXPECT_EQ(region, "p2p");
      }
      if (fn == ApiFn::kCommSplit) {
        EXPECT_EQ(region, "split");
      }
      if (fn == ApiFn::kCommInitRank) {
        EXPECT_EQ(region, "");
      }
    }
  }
  EXPECT_EQ(main_ids.size(), 1u) << "every rank derives the same communicator id";
  EXPECT_EQ(child_ids_by_parity[0].size(), 1u);
  EXPECT_EQ(child_ids_by_parity[1].size(), 1u);
  EXPECT_NE(*child_ids_by_parity[0].begin(), *child_ids_by_parity[1].begin());
}

TEST_F(InterpositionTest, SameProgramPassesWithoutThePreload) {
  Subprocess job(RanksCommand(4, "all"), {{"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}});
  EXPECT_EQ(job.Wait(60), 0);
  EXPECT_FALSE(std::filesystem::exists(RingDir()));
}

// A rank skips an all-reduce: the others block in it for real. The rings show who is
// inside which call while the job hangs, and still after the job is SIGKILLed.
TEST_F(InterpositionTest, HangIsReadableLiveAndAfterSigkill) {
  constexpr int kRanks = 3;
  Subprocess job(RanksCommand(kRanks, "skip"), PreloadEnv());

  auto blocked_in_second_all_reduce = [&](const RankTrace& trace) {
    for (const ring::Record& record : trace.OfKind(RecordKind::kEnter)) {
      if (static_cast<ApiFn>(record.fn) == ApiFn::kAllReduce && record.seq == 2) return true;
    }
    return false;
  };
  bool stuck = false;
  for (int attempt = 0; attempt < testing::Scaled(300) && !stuck; ++attempt) {
    usleep(100000);
    std::map<int, RankTrace> live = ReadRanks(RingDir(), /*writers_gone=*/false);
    stuck = live.size() == kRanks && blocked_in_second_all_reduce(live[0]) &&
            blocked_in_second_all_reduce(live[2]);
  }
  ASSERT_TRUE(stuck) << "ranks 0 and 2 never entered the second all-reduce";
  sleep(2);
  ASSERT_TRUE(job.Running()) << "the job should hang, not finish";

  std::map<int, RankTrace> live = ReadRanks(RingDir(), /*writers_gone=*/false);
  for (int rank : {0, 2}) {
    EXPECT_EQ(live[rank].OfKind(RecordKind::kEnter).size(),
              live[rank].OfKind(RecordKind::kReturn).size() + 1)
        << "rank " << rank << " is inside exactly one call";
  }
  EXPECT_EQ(live[1].OfKind(RecordKind::kEnter).size(), live[1].OfKind(RecordKind::kReturn).size());
  EXPECT_TRUE(live[1].reader->WriterProcessAlive());
  // The watcher thread keeps beating while the rank's main thread is stuck in NCCL.
  const uint64_t beat = live[0].reader->heartbeat_ns();
  usleep(300000);
  EXPECT_GT(live[0].reader->heartbeat_ns(), beat);

  job.KillGroup();
  // SIGKILL is delivered asynchronously: give the ranks a moment to be gone.
  auto all_gone = [&] {
    for (auto& [rank, trace] : ReadRanks(RingDir(), true)) {
      if (trace.reader->WriterProcessAlive()) return false;
    }
    return true;
  };
  for (int attempt = 0; attempt < testing::Scaled(500) && !all_gone(); ++attempt) usleep(10000);
  std::map<int, RankTrace> dead = ReadRanks(RingDir(), /*writers_gone=*/true);
  ASSERT_EQ(dead.size(), static_cast<size_t>(kRanks));
  for (auto& [rank, trace] : dead) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_FALSE(trace.reader->WriterProcessAlive());
    EXPECT_EQ(trace.reader->writer_state(), ring::WriterState::kRunning);  // never exited
    const std::vector<ring::Record> enters = trace.OfKind(RecordKind::kEnter);
    ASSERT_FALSE(enters.empty());
    const ring::Record& last = enters.back();
    EXPECT_EQ(static_cast<ApiFn>(last.fn), ApiFn::kAllReduce);
    EXPECT_EQ(last.seq, rank == 1 ? 1u : 2u);
  }
}

// Fast calls skip the clock at return (flagged, return time = enter time); a call that
// blocks gets a real return time.
TEST_F(InterpositionTest, BlockingCallsGetRealReturnTimesFastOnesAreFlagged) {
  Subprocess job(RanksCommand(2, "late"), PreloadEnv());
  ASSERT_EQ(job.Wait(60), 0);
  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), /*writers_gone=*/true);
  ASSERT_EQ(ranks.size(), 2u);
  const RankTrace& early = ranks[0];
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> enter_ns;
  for (const IndexedRecord& item : early.records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter)) {
      enter_ns[{item.lane, item.index}] = item.record.t_ns;
    }
  }
  int flagged = 0;
  uint64_t last_all_reduce_ns = 0;
  bool last_flagged = true;
  for (const IndexedRecord& item : early.records) {
    const ring::Record& record = item.record;
    if (record.kind != static_cast<uint16_t>(RecordKind::kReturn) ||
        static_cast<ApiFn>(record.fn) != ApiFn::kAllReduce) {
      continue;
    }
    const uint64_t entered = enter_ns.at({record.ref_lane, record.ref_index});
    ASSERT_GE(record.t_ns, entered);
    const bool within_tick = (record.flags & ring::kFlagReturnedWithinTick) != 0;
    if (within_tick) {
      EXPECT_EQ(record.t_ns, entered) << "a flagged return carries its enter time";
      ++flagged;
    }
    last_all_reduce_ns = record.t_ns - entered;
    last_flagged = within_tick;
  }
  EXPECT_GT(flagged, 0) << "quick calls return within the watcher's 1 ms tick";
  EXPECT_FALSE(last_flagged) << "the blocked call spans many ticks";
  EXPECT_GE(last_all_reduce_ns, 250'000'000u) << "rank 0 waited 300 ms for rank 1";
}

TEST_F(InterpositionTest, ForkedWorkerWritesNothingIntoItsParentsRing) {
  Subprocess job(RanksCommand(2, "fork"), PreloadEnv());
  ASSERT_EQ(job.Wait(60), 0);
  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), true);
  ASSERT_EQ(ranks.size(), 2u);
  for (auto& [rank, trace] : ranks) {
    for (const ring::Record& record : trace.OfKind(RecordKind::kEnter)) {
      EXPECT_NE(static_cast<ApiFn>(record.fn), ApiFn::kGetErrorString);
    }
  }
}

// on_exit records the status each rank passed to exit(), not that of a worker it forked;
// a SIGKILLed rank never exits, so its ring has none.
TEST_F(InterpositionTest, ExitStatusIsRecordedAndAKilledRankHasNone) {
  Subprocess exited(RanksCommand(2, "exit3"), PreloadEnv());
  ASSERT_EQ(exited.Wait(60), 3);
  // The workers exit after their ranks: wait for them, so that a write of theirs would show.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string marker = dir_.path() + "/worker_exiting." + std::to_string(rank);
    for (int i = 0; i < testing::Scaled(1000) && !std::filesystem::exists(marker); ++i) usleep(10'000);
    EXPECT_TRUE(std::filesystem::exists(marker)) << marker;
  }
  usleep(300'000);
  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), true);
  ASSERT_EQ(ranks.size(), 2u);
  for (auto& [rank, trace] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(trace.reader->writer_state(), ring::WriterState::kExited);
    EXPECT_EQ(trace.reader->exit_code(), std::optional<int32_t>(3));
    EXPECT_EQ(trace.OfKind(RecordKind::kEnter).back().fn, static_cast<uint16_t>(ApiFn::kAllReduce));
  }

  std::filesystem::remove_all(RingDir());
  std::filesystem::remove(dir_.path() + "/unique_id");
  Subprocess killed(RanksCommand(2, "sigkill"), PreloadEnv());
  ASSERT_EQ(killed.Wait(60), 128 + SIGKILL);
  ranks = ReadRanks(RingDir(), true);
  ASSERT_EQ(ranks.size(), 2u);
  for (auto& [rank, trace] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(trace.reader->writer_state(), ring::WriterState::kRunning) << "never exited";
    EXPECT_FALSE(trace.reader->WriterProcessAlive());
    EXPECT_EQ(trace.reader->exit_code(), std::nullopt);
  }
}

TEST_F(InterpositionTest, CommunicatorLifecycleCornersAreRecorded) {
  Subprocess job(RanksCommand(2, "lifecycle"), PreloadEnv());
  ASSERT_EQ(job.Wait(60), 0);
  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), true);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(EnterNames(ranks[0]),
            (std::vector<std::string>{"get-unique-id", "comm-init-rank", "comm-split", "comm-shrink",
                                      "comm-destroy", "comm-destroy", "comm-init-all", "group-start",
                                      "all-reduce", "all-reduce", "group-end", "comm-destroy",
                                      "comm-destroy", "comm-abort"}));
  EXPECT_EQ(EnterNames(ranks[1]),
            (std::vector<std::string>{"comm-init-rank", "comm-split", "comm-abort"}));

  auto returns_of = [](const RankTrace& trace, ApiFn fn) {
    std::vector<ring::Record> out;
    for (const ring::Record& record : trace.OfKind(RecordKind::kReturn)) {
      if (static_cast<ApiFn>(record.fn) == fn) out.push_back(record);
    }
    return out;
  };
  // Rank 1 opted out of the split: no communicator; both ranks counted the split.
  const ring::Record split0 = returns_of(ranks[0], ApiFn::kCommSplit).at(0);
  const ring::Record split1 = returns_of(ranks[1], ApiFn::kCommSplit).at(0);
  EXPECT_NE(split0.comm_id, 0u);
  EXPECT_EQ(split0.rank, 0);
  EXPECT_EQ(split0.nranks, 1);
  EXPECT_EQ(split1.comm_id, 0u);
  EXPECT_EQ(split0.aux2, split1.aux2) << "same child serial on every member of the parent";
  // The shrink is the parent's second child; its communicator has only rank 0.
  const ring::Record shrink = returns_of(ranks[0], ApiFn::kCommShrink).at(0);
  EXPECT_EQ(shrink.aux2, 2u);
  EXPECT_EQ(shrink.aux1, 1u);  // one excluded rank
  EXPECT_EQ(shrink.nranks, 1);
  // InitAll: one return per rank of its one communicator (one id, ranks 0 and 1 of 2);
  // the grouped all-reduces are seq 1 of each rank.
  const std::vector<ring::Record> init_all = returns_of(ranks[0], ApiFn::kCommInitAll);
  ASSERT_EQ(init_all.size(), 2u);
  EXPECT_NE(init_all[0].comm_id, 0u);
  EXPECT_EQ(init_all[0].comm_id, init_all[1].comm_id) << "the ranks of one communicator share its id";
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(init_all[i].rank, i);
    EXPECT_EQ(init_all[i].nranks, 2);
  }
  std::set<int32_t> all_reduce_ranks;
  for (const ring::Record& record : returns_of(ranks[0], ApiFn::kAllReduce)) {
    EXPECT_EQ(record.comm_id, init_all[0].comm_id);
    all_reduce_ranks.insert(record.rank);
    EXPECT_EQ(record.seq, 1u);
    EXPECT_NE(record.group_id, 0u);
  }
  EXPECT_EQ(all_reduce_ranks, (std::set<int32_t>{0, 1}));
}

// The ring cannot be created: the job runs exactly as without collwatch, with one
// warning per process, and nothing is written.
TEST_F(InterpositionTest, UnwritableRingFolderWarnsAndChangesNothing) {
  std::map<std::string, std::string> env = PreloadEnv();
  env["COLLWATCH_RING_DIR"] = "/proc/collwatch-cannot-exist";
  const std::string log = dir_.path() + "/stderr.log";
  Subprocess job({"/bin/sh", "-c", std::string(COLLWATCH_NCCL_RANKS_PATH) + " 2 all " +
                                       dir_.path() + " 2> " + log},
                 env);
  ASSERT_EQ(job.Wait(60), 0);
  std::ifstream file(log);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  size_t warnings = 0;
  for (size_t at = text.find("collwatch: cannot use ring folder"); at != std::string::npos;
       at = text.find("collwatch: cannot use ring folder", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 2u) << text;
}

TEST_F(InterpositionTest, ProcessWithoutNcclCreatesNothing) {
  Subprocess shell({"/bin/sh", "-c", "echo hello > /dev/null"}, PreloadEnv());
  EXPECT_EQ(shell.Wait(30), 0);
  EXPECT_FALSE(std::filesystem::exists(RingDir()));
}

// The real NCCL: the calls that work without a GPU pass through unchanged and are
// recorded once each.
TEST_F(InterpositionTest, RealNcclQueriesPassThroughAndAreRecordedOnce) {
#ifndef COLLWATCH_NCCL_QUERIES_PATH
  GTEST_SKIP() << "no real libnccl.so.2 found at configure time";
#else
  Subprocess program({COLLWATCH_NCCL_QUERIES_PATH}, PreloadEnv());
  ASSERT_EQ(program.Wait(60), 0) << "results through the preload differ from direct calls";
  std::map<int, RankTrace> ranks = ReadRanks(RingDir(), true);
  ASSERT_EQ(ranks.size(), 1u);
  const RankTrace& trace = ranks.begin()->second;
  EXPECT_EQ(EnterNames(trace),
            (std::vector<std::string>{"get-unique-id", "get-version", "get-error-string"}));
  const std::vector<ring::Record> returns = trace.OfKind(RecordKind::kReturn);
  ASSERT_EQ(returns.size(), 3u);
  EXPECT_NE(returns[0].aux0, 0u);          // hash of the id NCCL produced
  EXPECT_EQ(returns[1].aux0, 22809u);      // NCCL 2.28.9
  EXPECT_EQ(returns[2].aux0, 4u);          // ncclInvalidArgument
#endif
}

}  // namespace
}  // namespace collwatch
