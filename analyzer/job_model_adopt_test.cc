// JobModel::Adopt (post-mortem loading on many cores): every process built into a model of
// its own and adopted in order must leave the model, and the report, exactly as applying
// the same traces in that order does; where that cannot be told apart from the one
// process's records alone, the process is not adopted and the model is left unchanged.
#include <gtest/gtest.h>

#include <tuple>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"
#include "analyzer/comm_order.h"
#include "analyzer/fold_references.h"
#include "analyzer/report.h"

namespace collwatch::analyzer::job_model_adopt_test {
namespace {

using ring::ApiFn;

constexpr uint64_t kWorld = 0x1111aaaa;
constexpr uint64_t kGroupBase = 0x2222bb00;  // one group per pair of ranks
constexpr uint64_t kChild = 0x3333cccc;      // split from the world by ranks 0-3
constexpr int kRanks = 6;

int64_t At(size_t position) { return kT0 + 10 * kMs + static_cast<int64_t>(position) * kMs; }

// A process named by its host and pid alone (no global rank).
ProcessId AddProcessOn(SyntheticJob& job, const std::string& host, int32_t pid) {
  ProcessInfo info;
  info.host = host;
  info.pid = pid;
  return job.AddProcess(info);
}

// Two processes on node0 that both claim rank 0 of the world, each issuing `collectives`
// all-gathers, the second a position later.
RecordedJob TwoClaimsOfRankZero(uint64_t collectives) {
  RecordedJob recorded;
  SyntheticJob job(&recorded);
  for (int copy = 0; copy < 2; ++copy) {
    const ProcessId process = AddProcessOn(job, "node0", 100 + copy);
    job.Init(process, kWorld, 0, 2, kT0);
    for (uint64_t seq = 1; seq <= collectives; ++seq) {
      const int64_t t = At(seq - 1 + static_cast<size_t>(copy));
      job.Collective(process, kWorld, 0, 2, seq, Gather("fwd"), t, t + kMs);
    }
  }
  return recorded;
}

CallPath PathAt(const std::string& file, int line) {
  CallPath path;
  path.frames.push_back(CallFrame{file, "step", line});
  return path;
}

// A job whose processes name regions, call paths and communicators in different orders,
// split a communicator from another, send and receive, and (rank 4) skip two collectives.
RecordedJob RecordJob() {
  RecordedJob recorded;
  SyntheticJob job(&recorded);
  for (int rank = 0; rank < kRanks; ++rank) {
    const ProcessId process = job.AddProcess(rank);
    const uint64_t group = kGroupBase + static_cast<uint64_t>(rank / 2);
    // Odd ranks make their group first: their model numbers the communicators otherwise.
    if (rank % 2 == 1) job.Init(process, group, rank % 2, 2, kT0);
    job.Init(process, kWorld, rank, kRanks, kT0);
    if (rank % 2 == 0) job.Init(process, group, rank % 2, 2, kT0);
    if (rank < 4) job.Init(process, kChild, rank, 4, kT0, true, kWorld);
    uint64_t world_seq = 1, group_seq = 1, child_seq = 1;
    for (size_t position = 0; position < 150; ++position) {
      SyntheticOp op = Gather(rank % 3 == 0 ? "fwd/a" : "fwd/b", 1024 + position % 5);
      // Rank 2 names the regions (and paths) in the other order.
      const bool first_half = position % 2 == (rank == 2 ? 1 : 0);
      op.region = first_half ? "fwd/a" : "fwd/b";
      op.call_path = PathAt(first_half ? "train.py" : "model.py", first_half ? 10 : 20);
      op.count = 1024 + position % 2;
      const int64_t t = At(position);
      if (!(rank == 4 && (position == 100 || position == 101))) {
        job.Collective(process, kWorld, rank, kRanks, world_seq++, op, t, t + kMs / 2);
      }
      job.Collective(process, group, rank % 2, 2, group_seq++, Scatter("bwd"), t + kMs / 4, t + kMs / 3);
      if (rank < 4 && position % 10 == 0) {
        job.Collective(process, kChild, rank, 4, child_seq++, Gather(""), t + kMs / 5, t + kMs / 4);
      }
      if (position % 25 == 0) {
        const int peer = rank ^ 1;
        job.P2p(process, kWorld, rank, kRanks, rank % 2 == 0 ? ApiFn::kSend : ApiFn::kRecv, peer, position / 25 + 1,
                64, 7, t + kMs / 6, t + kMs / 5);
      }
    }
    job.Lifecycle(process, ApiFn::kCommDestroy, group, At(200));
  }
  return recorded;
}

std::string ReportOf(Analyzer& analyzer, bool fold) {
  for (ProcessId p = 0; fold && p < analyzer.model().process_count(); ++p) analyzer.FoldLoadedProcess(p);
  const std::vector<Finding> findings = analyzer.Analyze(At(300), /*final_pass=*/true);
  const ReportInfo info = DescribeJob(analyzer.model());
  return ReportText(findings, info) + "\n" + ReportJson(findings, info).dump(2);
}

// The same model: processes, their calls field by field, communicators, names.
void ExpectSameModel(const JobModel& adopted, const JobModel& applied) {
  ASSERT_EQ(adopted.process_count(), applied.process_count());
  for (ProcessId p = 0; p < applied.process_count(); ++p) {
    const Process& want = applied.process(p);
    const Process& got = adopted.process(p);
    EXPECT_EQ(got.info.pid, want.info.pid);
    EXPECT_EQ(got.memberships, want.memberships);
    EXPECT_EQ(got.damaged_labels, want.damaged_labels);
    ASSERT_EQ(got.calls.size(), want.calls.size());
    for (size_t i = 0; i < want.calls.size(); ++i) {
      ASSERT_TRUE(CallFieldsOf(got.calls[i]) == CallFieldsOf(want.calls[i])) << "process " << p << " call " << i;
    }
  }
  ASSERT_EQ(adopted.comms().size(), applied.comms().size());
  for (size_t c = 0; c < applied.comms().size(); ++c) {
    const Comm& want = applied.comms()[c];
    const Comm& got = adopted.comms()[c];
    EXPECT_EQ(std::tie(got.id, got.nranks, got.parent_id, got.ranks_present),
              std::tie(want.id, want.nranks, want.parent_id, want.ranks_present));
    for (size_t r = 0; r < want.ranks.size(); ++r) {
      EXPECT_EQ(got.ranks[r].process, want.ranks[r].process);
      EXPECT_EQ(got.ranks[r].collectives.size(), want.ranks[r].collectives.size());
      EXPECT_EQ(got.ranks[r].p2p.size(), want.ranks[r].p2p.size());
      EXPECT_EQ(got.ranks[r].init_call, want.ranks[r].init_call);
      // The chains the agreement checks read (a usable window's: a link holds a region id).
      ASSERT_EQ(got.ranks[r].chains.size(), want.ranks[r].chains.size());
      for (uint64_t window = want.ranks[r].chains.first(); window < want.ranks[r].chains.size(); ++window) {
        const WindowChain& want_chain = want.ranks[r].chains[window];
        if (want_chain.usable()) {
          EXPECT_EQ(got.ranks[r].chains[window].chain, want_chain.chain) << "window " << window;
        }
      }
    }
  }
  EXPECT_EQ(adopted.region_names(), applied.region_names());
  EXPECT_EQ(adopted.unmatched_records(), applied.unmatched_records());
}

TEST(JobModelAdoptTest, AdoptingInOrderGivesTheModelApplyingInOrderGives) {
  RecordedJob recorded = RecordJob();
  Analyzer applying(TestOptions()), adopting(TestOptions());
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    applying.model().Apply(applying.model().AddProcess(traced.info), traced.update);
    ProcessBuiltApart built = BuildProcessApart(traced.info, traced.update);
    // Built apart, a communicator holds only the rank the process is, not all kRanks.
    const Comm* world = built.alone.FindComm(kWorld);
    ASSERT_NE(world, nullptr);
    EXPECT_EQ(world->ranks.size(), 1u);
    EXPECT_EQ(world->rank_base, traced.info.global_rank);
    EXPECT_EQ(world->nranks, kRanks);
    ASSERT_TRUE(adopting.model().Adopt(std::move(built.alone)).has_value()) << traced.info.pid;
  }
  ExpectSameModel(adopting.model(), applying.model());
  // Ranks 0 and 2 named regions in other orders, odd ranks their communicators: remapped.
  ASSERT_GE(applying.model().comms().size(), 5u);
  const std::string report = ReportOf(applying, /*fold=*/true);
  EXPECT_EQ(ReportOf(adopting, /*fold=*/true), report);
  EXPECT_NE(report.find("PATH_DIVERGENCE"), std::string::npos) << report;
}

// Every collective of every rank, read through Collective (a folded one made again), and
// every usable window's chain: what the checks read of a folded model.
void ExpectSameCollectives(const JobModel& got, const JobModel& want) {
  ASSERT_EQ(got.comms().size(), want.comms().size());
  for (size_t c = 0; c < want.comms().size(); ++c) {
    const Comm& want_comm = want.comms()[c];
    const Comm& got_comm = got.comms()[c];
    ASSERT_EQ(got_comm.id, want_comm.id);
    for (size_t r = 0; r < want_comm.ranks.size(); ++r) {
      const auto rank = static_cast<int32_t>(r);
      const CommRank& want_rank = want_comm.ranks[r];
      ASSERT_EQ(got_comm.ranks[r].collectives.size(), want_rank.collectives.size());
      for (uint64_t seq = 1; seq <= want_rank.collectives.size(); ++seq) {
        const Call* want_call = want.Collective(want_comm, rank, seq);
        const Call* got_call = got.Collective(got_comm, rank, seq);
        ASSERT_EQ(got_call == nullptr, want_call == nullptr) << "comm " << c << " rank " << r << " seq " << seq;
        if (want_call != nullptr) {
          EXPECT_TRUE(CallFieldsOf(*got_call) == CallFieldsOf(*want_call)) << "comm " << c << " rank " << r << " seq "
                                                                           << seq;
        }
      }
      for (uint64_t window = want_rank.chains.first(); window < want_rank.chains.size(); ++window) {
        if (!want_rank.chains[window].usable()) continue;
        EXPECT_EQ(got_comm.ranks[r].chains[window].chain, want_rank.chains[window].chain) << "window " << window;
      }
    }
  }
}

TEST(JobModelAdoptTest, FoldingApartGivesWhatFoldingInOrderGives) {
  // The job above, and a world of three ranks of which ranks 1 and 2 first name a region
  // and a call path on a communicator of their own: their models number the world's names
  // otherwise, and their windows fold only when read in the job's numbering. Ranks 0 and 1
  // share a pair communicator too, on which rank 1 issues its 31st collective before its
  // world's 31st: an order inversion inside windows its worker folds, which the order check
  // sees only in the collectives the worker listed before dropping their calls.
  constexpr uint64_t kSolo = 0x4444dd00;
  constexpr uint64_t kPair = 0x5555ee00;
  RecordedJob recorded = RecordJob();
  SyntheticJob job(&recorded);
  for (int rank = 0; rank < 3; ++rank) {
    const ProcessId process = AddProcessOn(job, "other", 500 + rank);
    job.Init(process, kWorld + 1, rank, 3, kT0);
    if (rank > 0) {
      job.Init(process, kSolo + static_cast<uint64_t>(rank), 0, 1, kT0);
      SyntheticOp warm_up = Gather("warm-up");
      warm_up.call_path = PathAt("warm_up.py", 3);
      job.Collective(process, kSolo + static_cast<uint64_t>(rank), 0, 1, 1, warm_up, At(0), At(0) + kMs);
    }
    if (rank < 2) job.Init(process, kPair, rank, 2, kT0);
    for (size_t position = 0; position < 130; ++position) {
      SyntheticOp op = Gather(position % 2 == 0 ? "fwd/a" : "fwd/b", 1024 + position % 3);
      op.call_path = PathAt("train.py", 10 + static_cast<int>(position % 2));
      const int64_t t = At(position + 1);
      auto on_pair = [&] { job.Collective(process, kPair, rank, 2, position + 1, Scatter("pair"), t, t + kMs / 2); };
      if (rank == 1 && position == 30) on_pair();
      job.Collective(process, kWorld + 1, rank, 3, position + 1, op, t + rank * kMs / 10, t + kMs / 2);
      if (rank == 0 || (rank == 1 && position != 30)) on_pair();
    }
  }
  Analyzer in_order(TestOptions()), apart(TestOptions());
  const FoldReferences* references = apart.model().ShareFoldReferences();
  size_t folded_apart = 0;  // windows folded on the "worker"
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    in_order.model().Apply(in_order.model().AddProcess(traced.info), traced.update);
    in_order.FoldLoadedProcess(in_order.model().process_count() - 1);
    ProcessBuiltApart built = BuildProcessApart(traced.info, traced.update, references);
    for (const Comm& comm : built.alone.comms()) {
      for (const CommRank& rank : comm.ranks) folded_apart += rank.folded_like.size();
    }
    const ProcessId process = *TakeBuiltProcess(&apart.model(), std::move(built));
    apart.FoldLoadedProcess(process);
  }
  // World windows 0 and 1 of ranks 1, 3, 4 and 5 (rank 4's skip keeps the parity its calls
  // follow: only later times), two group windows of each odd rank, the other world's two
  // windows of ranks 1 and 2, and the pair's two of rank 1.
  EXPECT_EQ(folded_apart, 2u * 4 + 2 * 3 + 2 * 2 + 2);
  ExpectSameCollectives(apart.model(), in_order.model());
  const std::string report = ReportOf(in_order, /*fold=*/false);
  EXPECT_EQ(ReportOf(apart, /*fold=*/false), report);
  EXPECT_NE(report.find("PATH_DIVERGENCE"), std::string::npos) << report;
  EXPECT_NE(report.find("ORDER_INVERSION"), std::string::npos) << report;
}

TEST(JobModelAdoptTest, TheOrderCheckReadsAListedPairAsItReadsTheCollectivesOneByOne) {
  // Six ranks on a world and a data-parallel communicator, and a pair communicator per two
  // ranks. Rank 1 issues its pair's 31st collective before the world's 31st, rank 3 the data
  // communicator's 51st before the world's 51st. Rank 2 launches its 91st world and pair
  // collectives in one group (not compared with each other), rank 3 the pair's first, alone.
  // The order check reading each process's listed pairs must find what reading its
  // collectives one by one finds, at each process.
  constexpr uint64_t kData = 0x6666ff00;
  constexpr uint64_t kPairBase = 0x7777aa00;
  RecordedJob recorded;
  SyntheticJob job(&recorded);
  for (int rank = 0; rank < kRanks; ++rank) {
    const ProcessId process = AddProcessOn(job, "node", 700 + rank);
    const uint64_t pair = kPairBase + static_cast<uint64_t>(rank / 2);
    job.Init(process, kWorld, rank, kRanks, kT0);
    job.Init(process, pair, rank % 2, 2, kT0);
    job.Init(process, kData, rank, kRanks, kT0);
    for (size_t position = 0; position < 130; ++position) {
      const int64_t t = At(position + 1);
      auto world = [&] { job.Collective(process, kWorld, rank, kRanks, position + 1, Gather("fwd"), t, t + kMs); };
      auto on_pair = [&] { job.Collective(process, pair, rank % 2, 2, position + 1, Scatter("tp"), t, t + kMs); };
      auto data = [&] { job.Collective(process, kData, rank, kRanks, position + 1, Scatter("dp"), t, t + kMs); };
      if (rank == 2 && position == 90) {
        const std::vector<SyntheticJob::GroupedCall> grouped = {{kWorld, rank, kRanks, position + 1, Gather("fwd")},
                                                                 {pair, 0, 2, position + 1, Scatter("tp")}};
        job.GroupAcross(process, grouped, t, t + kMs, true);
        data();
        continue;
      }
      if ((rank == 1 && position == 30) || (rank == 3 && position == 90)) on_pair();
      if (rank == 3 && position == 50) data();
      world();
      if ((rank != 1 || position != 30) && (rank != 3 || position != 90)) on_pair();
      if (rank != 3 || position != 50) data();
    }
  }
  JobModel model;
  const FoldReferences* references = model.ShareFoldReferences();  // so that each is listed
  CommOrderTracker by_pairs, one_by_one;
  size_t inversions = 0;
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    const ProcessId process = *TakeBuiltProcess(&model, BuildProcessApart(traced.info, traced.update, references));
    std::optional<ListedOrder> listed = model.TakeListedOrder(process);
    ASSERT_TRUE(listed.has_value());
    EXPECT_TRUE(listed->by_pairs);
    EXPECT_EQ(listed->pairs.size(), 6u);  // each of its three communicators against the other two
    const std::vector<OrderInversion> got = by_pairs.Observe(model, false, process, &*listed);
    listed->by_pairs = false;
    const std::vector<OrderInversion> want = one_by_one.Observe(model, false, process, &*listed);
    ASSERT_EQ(got.size(), want.size()) << "process " << process;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(std::tie(got[i].first, got[i].second, got[i].comm_x, got[i].seq_x, got[i].comm_c, got[i].seq_c),
                std::tie(want[i].first, want[i].second, want[i].comm_x, want[i].seq_x, want[i].comm_c,
                         want[i].seq_c));
    }
    inversions += want.size();
  }
  // Rank 3 issued the data collective before its pair's too; and its 91st world collective
  // after its pair's, where rank 2's world one, launched first in its group, was compared.
  EXPECT_EQ(inversions, 4u);
}

TEST(JobModelAdoptTest, ARankTakenAlreadyIsAppliedInstead) {
  // Two processes claim rank 0 of the world: what the second's calls do there depends on
  // the first's, so it is not adopted (the model is unchanged), and TakeBuiltProcess
  // applies its trace: the model reads as applying both in turn.
  const RecordedJob recorded = TwoClaimsOfRankZero(1);
  JobModel applied, adopted;
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    applied.Apply(applied.AddProcess(traced.info), traced.update);
  }
  ASSERT_TRUE(adopted.Adopt(BuildProcessApart(recorded.processes()[0].info, recorded.processes()[0].update).alone));
  ProcessBuiltApart second = BuildProcessApart(recorded.processes()[1].info, recorded.processes()[1].update);
  JobModel alone = std::move(second.alone);
  EXPECT_FALSE(adopted.Adopt(std::move(alone)).has_value());
  EXPECT_EQ(adopted.process_count(), 1u);
  EXPECT_EQ(adopted.comms()[0].ranks_present, 1);
  EXPECT_EQ(TakeBuiltProcess(&adopted, BuildProcessApart(recorded.processes()[1].info, recorded.processes()[1].update)),
            1u);
  ExpectSameModel(adopted, applied);
}

// A trace streamed into the worker's model piece by piece, none of it kept: adopted as the
// same trace built whole is; where it cannot be, handed back (nullopt) with the model
// unchanged, for the caller to read again, never taken as an empty trace.
TEST(JobModelAdoptTest, ATraceStreamedInIsAdoptedAsAWholeOneOrHandedBack) {
  const RecordedJob recorded = TwoClaimsOfRankZero(40);
  // Its records in pieces of 7, its names first.
  auto streamed = [&](const RecordedJob::RecordedProcess& traced) {
    return BuildProcessApartStreamed(traced.info, [&](JobModel& alone, ProcessId process) {
      ProcessUpdate names;
      names.regions = traced.update.regions;
      names.call_paths = traced.update.call_paths;
      alone.Apply(process, names);
      for (size_t from = 0; from < traced.update.records.size(); from += 7) {
        ProcessUpdate piece;
        const auto begin = traced.update.records.begin() + static_cast<std::ptrdiff_t>(from);
        piece.records.assign(begin, begin + static_cast<std::ptrdiff_t>(
                                                std::min<size_t>(7, traced.update.records.size() - from)));
        alone.Apply(process, piece);
      }
      return absl::OkStatus();
    });
  };
  JobModel whole, pieces;
  ASSERT_TRUE(whole.Adopt(BuildProcessApart(recorded.processes()[0].info, recorded.processes()[0].update).alone));
  absl::StatusOr<ProcessBuiltApart> first = streamed(recorded.processes()[0]);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->trace_kept);
  EXPECT_TRUE(first->update.records.empty());
  EXPECT_EQ(TakeBuiltProcess(&pieces, *std::move(first)), 0u);
  ExpectSameModel(pieces, whole);

  // The second claims the first's rank: not adopted, not applied, the model as it was.
  absl::StatusOr<ProcessBuiltApart> second = streamed(recorded.processes()[1]);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(TakeBuiltProcess(&pieces, *std::move(second)), std::nullopt);
  EXPECT_EQ(pieces.process_count(), 1u);
  ExpectSameModel(pieces, whole);

  // A read that fails builds nothing.
  absl::StatusOr<ProcessBuiltApart> failed = BuildProcessApartStreamed(
      recorded.processes()[0].info, [](JobModel&, ProcessId) { return absl::DataLossError("frame 3 damaged"); });
  EXPECT_EQ(failed.status(), absl::DataLossError("frame 3 damaged"));
}

TEST(JobModelAdoptTest, AnEndOfACommunicatorItNeverJoinedIsAppliedInstead) {
  // Process 1 destroys the communicator only process 0 made: its model alone cannot name it.
  RecordedJob recorded;
  SyntheticJob job(&recorded);
  const ProcessId first = job.AddProcess(0);
  job.Init(first, kWorld, 0, 1, kT0);
  const ProcessId second = job.AddProcess(1);
  job.Lifecycle(second, ApiFn::kCommDestroy, kWorld, At(5));
  JobModel applied, adopted;
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    applied.Apply(applied.AddProcess(traced.info), traced.update);
  }
  for (const RecordedJob::RecordedProcess& traced : recorded.processes()) {
    JobModel alone = BuildProcessApart(traced.info, traced.update).alone;
    const bool names_unknown_end = &traced == &recorded.processes()[1];
    EXPECT_EQ(adopted.Adopt(std::move(alone)).has_value(), !names_unknown_end);
    if (names_unknown_end) TakeBuiltProcess(&adopted, BuildProcessApart(traced.info, traced.update));
  }
  ExpectSameModel(adopted, applied);
  EXPECT_EQ(adopted.process(1).calls[0].comm, 0u) << "the destroy names the world communicator";
}

TEST(JobModelAdoptTest, AProcessSeenFromOutsideFirstIsTakenOverByApplying) {
  // `collwatch run` may have observed the process before its trace is read: AddProcess
  // takes that entry over (keeping its sample), which adoption leaves to it.
  RecordedJob recorded;
  SyntheticJob job(&recorded);
  const ProcessId process = job.AddProcess(0);
  job.Init(process, kWorld, 0, 1, kT0);
  JobModel model;
  ProcessSample sample;
  sample.sampled_ns = At(1);
  model.ObserveProcess(recorded.processes()[0].info, sample);
  EXPECT_FALSE(model.Adopt(BuildProcessApart(recorded.processes()[0].info, recorded.processes()[0].update).alone));
  EXPECT_EQ(TakeBuiltProcess(&model, BuildProcessApart(recorded.processes()[0].info, recorded.processes()[0].update)),
            0u);
  EXPECT_EQ(model.process_count(), 1u);
  EXPECT_FALSE(model.process(0).observed_only);
  EXPECT_EQ(model.process(0).sample.sampled_ns, At(1));
}

}  // namespace
}  // namespace collwatch::analyzer::job_model_adopt_test
