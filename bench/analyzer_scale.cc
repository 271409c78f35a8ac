// Analyzer at scale: a synthetic job of N ranks x M collectives on one world communicator
// (a ZeRO-3-like step of all-gathers and reduce-scatters in named regions), optionally
// also C group communicators of N/C ranks each (M all-reduces per rank, clean), with one
// injected fault on the world communicator at position M/2:
//   divergence: every fourth rank skips a two-collective run and goes on (PATH_DIVERGENCE)
//   dtype:      every fourth rank issues that collective in another dtype (SIGNATURE_MISMATCH)
//   stall:      one rank never enters it; the others wait inside it (NOT_JOINED)
// Prints how long building the model from the records, analysing and rendering the report
// take, ns per record (also the analyzer's own share, the benchmark's record making taken
// out), and the process's peak memory.
// Post-mortem by default (each rank's whole trace in turn, its agreeing windows folded once
// it is in, one final pass, as `collwatch analyze`; --no-fold keeps every call, as before
// issue 39's folding); --online feeds every rank's next 64 positions between analysis
// passes with bounded history, as the collector does (its "build" time includes them).
// Post-mortem, each rank's records are made on --threads workers (default: every core) and
// built there into a model of its own, which the main thread takes into the job's model in
// rank order (JobModel::Adopt), as `collwatch analyze` decodes and builds rank traces apart
// (cli/ordered_parallel.h) from 2 threads up; --apply-in-order applies the records on the
// main thread instead, as it does on one; --build-apart builds apart whatever the threads;
// --threads 1 does everything in turn. Built apart and folding, the workers fold
// each rank's windows against the classes published so far (JobModel::FoldApart), as
// `collwatch analyze` does; --no-fold-apart leaves all folding to the main thread.
//   collwatch_analyzer_scale [--ranks 4096] [--collectives 2000] [--comms 0]
//                            [--case divergence|dtype|stall] [--online] [--no-fold]
//                            [--build-apart|--apply-in-order] [--no-fold-apart] [--report FILE]
//                            [--threads N]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "analyzer/synthetic_job.h"
#include "cli/ordered_parallel.h"

namespace {

using collwatch::analyzer::Analyzer;
using collwatch::analyzer::AnalyzerOptions;
using collwatch::analyzer::FindingKind;
using collwatch::analyzer::SyntheticJob;
using collwatch::analyzer::FsdpLikeStep;
using collwatch::analyzer::RecordedJob;
using collwatch::analyzer::SyntheticOp;
using collwatch::ring::ApiFn;

double Now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

enum class Case { kDivergence, kDtype, kStall };

// Takes the synthetic job's records and keeps nothing: times the record making alone.
class DiscardingSink final : public collwatch::analyzer::SyntheticSink {
 public:
  collwatch::analyzer::ProcessId AddProcess(const collwatch::ProcessInfo& /*info*/) override { return next_++; }
  void AddRegionName(collwatch::analyzer::ProcessId, uint32_t, std::string_view) override {}
  void AddCallPath(collwatch::analyzer::ProcessId, uint32_t, const collwatch::CallPath&) override {}
  void AddRecord(collwatch::analyzer::ProcessId, uint32_t, uint64_t, const collwatch::ring::Record&) override {}

 private:
  collwatch::analyzer::ProcessId next_ = 0;
};

// Online: schedule positions fed for every rank between two analysis passes.
constexpr size_t kOnlineBlock = 64;

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4096;
  int collectives = 2000;
  int comms = 0;
  Case fault = Case::kDivergence;
  bool online = false;
  bool fold = true;
  std::optional<bool> build_apart;  // unset: as `collwatch analyze` decides (BuildingApartPays)
  bool fold_apart = true;  // built apart and folding: fold on the workers too (JobModel::FoldApart)
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::string report_path;  // where the report's text and JSON go (to compare two runs)
  bool usage_error = false;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--online") == 0) {
      online = true;
      --i;  // a flag without a value
    } else if (std::strcmp(argv[i], "--no-fold") == 0) {
      fold = false;
      --i;
    } else if (std::strcmp(argv[i], "--no-fold-apart") == 0) {
      fold_apart = false;
      --i;
    } else if (std::strcmp(argv[i], "--apply-in-order") == 0 || std::strcmp(argv[i], "--build-apart") == 0) {
      build_apart = std::strcmp(argv[i], "--build-apart") == 0;
      --i;
    } else if (i + 1 >= argc) {
      usage_error = true;
    } else if (std::strcmp(argv[i], "--report") == 0) {
      report_path = argv[i + 1];
    } else if (std::strcmp(argv[i], "--ranks") == 0) {
      ranks = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--collectives") == 0) {
      collectives = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
    } else if (std::strcmp(argv[i], "--comms") == 0) {
      comms = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--case") == 0) {
      const std::string name = argv[i + 1];
      if (name == "divergence") fault = Case::kDivergence;
      else if (name == "dtype") fault = Case::kDtype;
      else if (name == "stall") fault = Case::kStall;
      else usage_error = true;
    } else {
      usage_error = true;
    }
  }
  if (usage_error || ranks < 2 || collectives < 4 || comms < 0 || (comms > 0 && ranks % comms != 0)) {
    std::fprintf(stderr,
                 "usage: collwatch_analyzer_scale [--ranks N>=2] [--collectives M>=4] [--comms C (divides N)]"
                 " [--case divergence|dtype|stall] [--online] [--no-fold] [--build-apart|--apply-in-order]"
                 " [--no-fold-apart] [--report FILE] [--threads N]\n");
    return 2;
  }
  if (!build_apart) build_apart = collwatch::analyzer::BuildingApartPays(threads);
  constexpr uint64_t kWorld = 0x5ca1ab1e0000c0deull;
  constexpr uint64_t kGroupBase = 0x9a0b000000000000ull;
  constexpr int64_t kStart = 1'700'000'000LL * collwatch::analyzer::kSecond;
  constexpr int64_t kOpNs = 200'000;  // 0.2 ms per collective
  const std::vector<SyntheticOp> step = FsdpLikeStep(/*scatter_redop=*/0);
  const SyntheticOp group_op{ApiFn::kAllReduce, 1u << 12, 7, "tp/allreduce", 0};
  const size_t bad = static_cast<size_t>(collectives) / 2;
  const int group_size = comms > 0 ? ranks / comms : 0;
  const int stuck_rank = ranks - 3;

  struct RankState {
    collwatch::analyzer::ProcessId process = 0;
    uint64_t seq = 1;
    bool done = false;
  };
  // A rank's process and its communicators' creation, into `job`: an enter and a return each.
  const uint64_t init_records = comms > 0 ? 4 : 2;
  auto start_rank = [&](SyntheticJob& job, int rank) {
    RankState state;
    state.process = job.AddProcess(rank);
    job.Init(state.process, kWorld, rank, ranks, kStart);
    if (comms > 0) {
      job.Init(state.process, kGroupBase + static_cast<uint64_t>(rank / group_size), rank % group_size, group_size,
               kStart);
    }
    return state;
  };
  // The calls of `rank` at schedule position `position` into `job` (none once its run
  // ended). Returns the records made: a collective's enter, return and completion, each a
  // ring record. Reads only what is shared and constant, and `state`: ranks may be made on
  // several threads at once.
  auto issue = [&](SyntheticJob& job, int rank, RankState& state, size_t position) -> uint64_t {
    if (state.done || state.seq > static_cast<uint64_t>(collectives)) return 0;
    const uint64_t group = kGroupBase + static_cast<uint64_t>(comms > 0 ? rank / group_size : 0);
    const int group_rank = comms > 0 ? rank % group_size : 0;
    const int64_t t = kStart + static_cast<int64_t>(position + 1) * kOpNs;
    const SyntheticOp& scheduled = step[position % step.size()];
    if (fault == Case::kStall && position == bad) {
      // The stuck rank never arrives; the others wait inside the collective for it.
      state.done = true;
      if (rank == stuck_rank) return 0;
      job.Collective(state.process, kWorld, rank, ranks, state.seq, scheduled, t, 0);
      return 2;  // entered and returned, never completed
    }
    // The divergent ranks leave out two schedule entries at the fault.
    if (fault == Case::kDivergence && rank % 4 == 1 && (position == bad || position == bad + 1)) return 0;
    if (fault == Case::kDtype && rank % 4 == 1 && position == bad) {
      SyntheticOp other = scheduled;
      other.dtype = 6;  // ncclFloat16, not 32
      job.Collective(state.process, kWorld, rank, ranks, state.seq, other, t, t + kOpNs / 2);
    } else {
      job.Collective(state.process, kWorld, rank, ranks, state.seq, scheduled, t, t + kOpNs / 2);
    }
    uint64_t records = 3;
    if (comms > 0) {
      job.Collective(state.process, group, group_rank, group_size, state.seq, group_op, t + kOpNs / 2,
                     t + kOpNs * 3 / 4);
      records += 3;
    }
    ++state.seq;
    return records;
  };
  // Positions run past the last collective: the divergent ranks skip two.
  const size_t positions = static_cast<size_t>(collectives) + 2;
  // Post-mortem: one rank's trace as a worker reads it, made apart.
  struct MadeRank {
    collwatch::analyzer::ProcessBuiltApart trace;  // its model built apart where build_apart says so
    uint64_t records = 0;
    double building_s = 0;  // making its records and building its model apart, on the worker
  };
  // Its records into `job`, each handed on as it is made, as a worker decodes a rank trace.
  // Where they are kept (`kept`), their room is made at once: the count is known here, and
  // growing the vector would time the benchmark's copying, not the analyzer.
  auto feed_rank = [&](SyntheticJob& job, size_t rank, RecordedJob* kept = nullptr) {
    RankState state = start_rank(job, static_cast<int>(rank));
    uint64_t records = init_records;
    if (kept != nullptr) {
      kept->processes().front().update.records.reserve(positions * (comms > 0 ? 6 : 3) + init_records);
    }
    for (size_t position = 0; position < positions; ++position) {
      records += issue(job, static_cast<int>(rank), state, position);
    }
    return records;
  };
  // Its trace whole, kept to apply on the model's thread.
  auto make_whole = [&](size_t rank) {
    RecordedJob recorded;
    SyntheticJob job(&recorded);
    MadeRank made;
    made.records = feed_rank(job, rank, &recorded);
    made.trace.info = std::move(recorded.processes().front().info);
    made.trace.update = std::move(recorded.processes().front().update);
    return made;
  };
  // The job's model's classes, where the workers fold too (set once the model is made).
  const collwatch::analyzer::FoldReferences* references = nullptr;
  // Its records streamed into its model built apart on the same worker, where build_apart
  // says so, as `collwatch analyze` decodes a stored trace into it.
  auto make_rank = [&](size_t rank) {
    if (!*build_apart) return make_whole(rank);
    MadeRank made;
    const double building = Now();
    absl::StatusOr<collwatch::analyzer::ProcessBuiltApart> built = collwatch::analyzer::BuildProcessApartStreamed(
        SyntheticJob::RankProcessInfo(static_cast<int32_t>(rank)),
        [&](collwatch::analyzer::JobModel& alone, collwatch::analyzer::ProcessId process) {
          SyntheticJob job(&alone, process);
          made.records = feed_rank(job, rank);
          return absl::OkStatus();
        },
        references);
    made.building_s = Now() - building;
    made.trace = *std::move(built);
    return made;
  };
  // Online: every rank's calls of the next block of positions into `job`, then
  // `after_block(first position after it)`, as the collector analyses what its agents
  // shipped. Returns the records made.
  auto generate_online = [&](SyntheticJob& job, const std::function<void(size_t, bool)>& after_block) {
    uint64_t records = 0;
    std::vector<RankState> states;
    for (int rank = 0; rank < ranks; ++rank) {
      states.push_back(start_rank(job, rank));
      records += init_records;
    }
    for (size_t from = 0; from < positions; from += kOnlineBlock) {
      const bool bad_block = bad >= from && bad < from + kOnlineBlock;
      const size_t to = std::min(positions, from + kOnlineBlock);
      if (bad_block) after_block(from, /*bad_block_starts=*/true);
      for (int rank = 0; rank < ranks; ++rank) {
        for (size_t position = from; position < to; ++position) {
          records += issue(job, rank, states[static_cast<size_t>(rank)], position);
        }
      }
      after_block(to, false);
    }
    return records;
  };

  const double rss_before = PeakRssMiB();
  const double t0 = Now();
  AnalyzerOptions options;
  options.bounded_history = online;
  if (!online) options.read_threads = threads;  // as collwatch analyze reads on every core
  Analyzer analyzer(options);
  if (!online && fold && *build_apart && fold_apart) references = analyzer.model().ShareFoldReferences();
  SyntheticJob job(&analyzer.model());
  std::vector<collwatch::analyzer::Finding> findings;
  // Online detection: from the moment the block holding the first bad record starts to
  // arrive until the pass that names it returns (an upper bound: the whole block, every
  // rank's 64 positions, is fed before that pass, where a real job's records trickle in).
  double bad_block_started = 0, named_after = -1;
  uint64_t records = 0;
  double model_busy = 0;  // post-mortem: the model's thread taking in (or applying) and folding rank traces
  double building_apart = 0;  // post-mortem: the workers building each rank's model apart, summed
  if (online) {
    records = generate_online(job, [&](size_t to, bool bad_block_starts) {
      if (bad_block_starts) {
        bad_block_started = Now();
        return;
      }
      const int64_t block_end = kStart + static_cast<int64_t>(to + 1) * kOpNs;
      for (auto& finding : analyzer.Analyze(block_end)) findings.push_back(std::move(finding));
      if (named_after < 0 && bad_block_started > 0 && !findings.empty()) named_after = Now() - bad_block_started;
    });
  } else {
    collwatch::OrderedParallel<MadeRank>(static_cast<size_t>(ranks), threads, 2 * threads, make_rank,
                                         [&](size_t rank, MadeRank made) {
      const double applying = Now();
      std::optional<collwatch::analyzer::ProcessId> process =
          collwatch::analyzer::TakeBuiltProcess(&analyzer.model(), std::move(made.trace));
      // Never here (no rank is claimed twice), but as `collwatch analyze` would: made again.
      if (!process) process = collwatch::analyzer::TakeBuiltProcess(&analyzer.model(), make_whole(rank).trace);
      if (fold) analyzer.FoldLoadedProcess(*process);
      model_busy += Now() - applying;
      building_apart += made.building_s;
      records += made.records;
    });
  }
  if (named_after >= 0) {
    std::printf("named online             : %.3f s after its block of %zu positions began to arrive\n", named_after,
                kOnlineBlock);
  }
  const double t1 = Now();
  // Past the stall threshold (30 s floor) when a rank is stuck.
  const int64_t now = kStart + static_cast<int64_t>(collectives + 10) * kOpNs +
                      (fault == Case::kStall ? 120 * collwatch::analyzer::kSecond : 0);
  for (auto& finding : analyzer.Analyze(now, /*final_pass=*/!online)) findings.push_back(std::move(finding));
  const double t2 = Now();
  collwatch::analyzer::ReportInfo info = collwatch::analyzer::DescribeJob(analyzer.model());
  const std::string json = collwatch::analyzer::ReportJson(findings, info).dump(2);
  const std::string text = collwatch::analyzer::ReportText(findings, info);
  if (!report_path.empty()) {
    if (FILE* file = std::fopen(report_path.c_str(), "w")) {
      std::fprintf(file, "%s\n%s\n", text.c_str(), json.c_str());
      std::fclose(file);
    }
  }
  const double t3 = Now();

  // The same records made again, on this thread alone, and thrown away: what the
  // benchmark's own record making costs (a collector or `analyze` decodes records instead),
  // so the model's share can be read.
  const double t4 = Now();
  if (online) {
    DiscardingSink discard;
    SyntheticJob making_only(&discard);
    generate_online(making_only, [](size_t, bool) {});
  } else {
    for (size_t rank = 0; rank < static_cast<size_t>(ranks); ++rank) {
      DiscardingSink discard;  // one a rank: its process is the job's first, as on a worker
      SyntheticJob making_only(&discard);
      feed_rank(making_only, rank);
    }
  }
  const double making = Now() - t4;

  const char* case_name = fault == Case::kDivergence ? "divergence" : fault == Case::kDtype ? "dtype" : "stall";
  std::printf("ranks %d, collectives per rank %d, group comms %d of %d, records %llu, %s injected at position %zu, %s\n",
              ranks, collectives, comms, group_size, static_cast<unsigned long long>(records), case_name, bad,
              online ? "online (bounded history)"
              : fold ? "post-mortem, agreeing windows folded"
                     : "post-mortem, no folding");
  if (!online) {
    std::printf("rank traces made on %u worker thread(s), %s\n", threads,
                references != nullptr ? "each built into a model of its own and folded there, adopted in rank order"
                                        " on this one"
                : *build_apart          ? "each built into a model of its own there, adopted in rank order on this one"
                                        : "applied in rank order on this one");
  }
  const double per_record = 1e9 / static_cast<double>(records);
  std::printf("%s : %.2f s (%.0f ns per record)\n", online ? "build + online passes    " : "build model from records ",
              t1 - t0, (t1 - t0) * per_record);
  std::printf("%s : %.3f s\n", online ? "last analysis pass       " : "analyze                  ", t2 - t1);
  std::printf("render report            : %.3f s (json %zu bytes, text %zu bytes)\n", t3 - t2, json.size(), text.size());
  std::printf("analyze + report         : %.3f s\n", t3 - t1);
  std::printf("records -> findings      : %.2f s (%.0f ns per record)\n", t3 - t0, (t3 - t0) * per_record);
  if (online) {
    std::printf("  of which making records: %.2f s (%.0f ns per record); the analyzer alone: %.0f ns per record\n",
                making, making * per_record, (t3 - t0 - making) * per_record);
  } else {
    // The records are made on the workers while the model's thread takes in earlier ranks:
    // the analyzer's share is its busy time on every thread, not the wall time less the making.
    // Built apart, a worker makes a piece and builds from it in turn: its making is taken off.
    const double analyzer_busy = building_apart - (*build_apart ? making : 0) + model_busy + (t3 - t1);
    std::printf("  the analyzer alone     : %.2f s (%.0f ns per record) building, folding, analysing, reporting\n",
                analyzer_busy, analyzer_busy * per_record);
    std::printf("    on the model's thread: %.2f s (%.0f ns per record)%s\n", model_busy + (t3 - t1),
                (model_busy + t3 - t1) * per_record, *build_apart ? "; the rest on the workers" : "");
    std::printf("  making the records     : %.2f s (%.0f ns per record) on one thread, run on the workers\n", making,
                making * per_record);
  }
  std::printf("peak RSS                 : %.0f MiB (%.0f MiB before the model)\n", PeakRssMiB(), rss_before);
  std::printf("findings                 : %zu\n", findings.size());
  for (const auto& finding : findings) std::printf("  %s\n", finding.headline.c_str());
  bool named = findings.size() == 1;
  if (named && fault == Case::kStall) {
    named = findings[0].kind == FindingKind::kNotJoined && findings[0].lagging_ranks == std::vector<int32_t>{stuck_rank};
  } else if (named) {
    const FindingKind want = fault == Case::kDivergence ? FindingKind::kPathDivergence : FindingKind::kSignatureMismatch;
    named = findings[0].kind == want && findings[0].rank_classes.size() == 2 &&
            findings[0].rank_classes[1].ranks.size() == static_cast<size_t>((ranks + 2) / 4);
  }
  std::printf("%s named correctly: %s\n", case_name, named ? "yes" : "NO");
  return named ? 0 : 1;
}
