// Analyzer at scale: a synthetic job of N ranks x M collectives on one world communicator
// (a ZeRO-3-like step of all-gathers and reduce-scatters in named regions), optionally
// also C group communicators of N/C ranks each (M all-reduces per rank, clean), with one
// injected fault on the world communicator at position M/2:
//   divergence: every fourth rank skips a two-collective run and goes on (PATH_DIVERGENCE)
//   dtype:      every fourth rank issues that collective in another dtype (SIGNATURE_MISMATCH)
//   stall:      one rank never enters it; the others wait inside it (NOT_JOINED)
// Prints how long building the model from the records, analysing and rendering the report
// take, ns per record, and the process's peak memory. Single-threaded.
//   collwatch_analyzer_scale [--ranks 4096] [--collectives 2000] [--comms 0]
//                            [--case divergence|dtype|stall]
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "analyzer/synthetic_job.h"

namespace {

using collwatch::analyzer::Analyzer;
using collwatch::analyzer::FindingKind;
using collwatch::analyzer::SyntheticJob;
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

// One training step's schedule: forward all-gathers, backward all-gathers and
// reduce-scatters of 12 units.
std::vector<SyntheticOp> StepSchedule() {
  std::vector<SyntheticOp> ops;
  for (int unit = 0; unit < 12; ++unit) {
    ops.push_back({ApiFn::kAllGather, 1u << 16, 7, "fwd/unit" + std::to_string(unit)});
  }
  for (int unit = 11; unit >= 0; --unit) {
    ops.push_back({ApiFn::kAllGather, 1u << 16, 7, "bwd/unit" + std::to_string(unit)});
    ops.push_back({ApiFn::kReduceScatter, 1u << 14, 7, "bwd/unit" + std::to_string(unit), 0});
  }
  return ops;
}

enum class Case { kDivergence, kDtype, kStall };

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4096;
  int collectives = 2000;
  int comms = 0;
  Case fault = Case::kDivergence;
  bool usage_error = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) {
      ranks = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--collectives") == 0) {
      collectives = std::atoi(argv[i + 1]);
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
                 " [--case divergence|dtype|stall]\n");
    return 2;
  }
  constexpr uint64_t kWorld = 0x5ca1ab1e0000c0deull;
  constexpr uint64_t kGroupBase = 0x9a0b000000000000ull;
  constexpr int64_t kStart = 1'700'000'000LL * collwatch::analyzer::kSecond;
  constexpr int64_t kOpNs = 200'000;  // 0.2 ms per collective
  const std::vector<SyntheticOp> step = StepSchedule();
  const SyntheticOp group_op{ApiFn::kAllReduce, 1u << 12, 7, "tp/allreduce", 0};
  const size_t bad = static_cast<size_t>(collectives) / 2;
  const int group_size = comms > 0 ? ranks / comms : 0;
  const int stuck_rank = ranks - 3;

  const double rss_before = PeakRssMiB();
  const double t0 = Now();
  Analyzer analyzer;
  SyntheticJob job(&analyzer.model());
  uint64_t records = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    const auto process = job.AddProcess(rank);
    job.Init(process, kWorld, rank, ranks, kStart);
    const uint64_t group = kGroupBase + static_cast<uint64_t>(comms > 0 ? rank / group_size : 0);
    const int group_rank = comms > 0 ? rank % group_size : 0;
    if (comms > 0) job.Init(process, group, group_rank, group_size, kStart);
    const bool odd = rank % 4 == 1;
    uint64_t seq = 1;
    for (size_t position = 0; seq <= static_cast<uint64_t>(collectives); ++position) {
      const int64_t t = kStart + static_cast<int64_t>(position + 1) * kOpNs;
      if (fault == Case::kStall && position == bad) {
        // The stuck rank never arrives; the others wait inside the collective for it.
        if (rank != stuck_rank) {
          job.Collective(process, kWorld, rank, ranks, seq, step[position % step.size()], t, 0);
          records += 1;
        }
        break;
      }
      // The divergent ranks leave out two schedule entries at the fault.
      if (fault == Case::kDivergence && odd && (position == bad || position == bad + 1)) continue;
      SyntheticOp op = step[position % step.size()];
      if (fault == Case::kDtype && odd && position == bad) op.dtype = 6;  // ncclFloat16, not 32
      job.Collective(process, kWorld, rank, ranks, seq, op, t, t + kOpNs / 2);
      records += 2;
      if (comms > 0) {
        job.Collective(process, group, group_rank, group_size, seq, group_op, t + kOpNs / 2, t + kOpNs * 3 / 4);
        records += 2;
      }
      ++seq;
    }
  }
  const double t1 = Now();
  // Past the stall threshold (30 s floor) when a rank is stuck.
  const int64_t now = kStart + static_cast<int64_t>(collectives + 10) * kOpNs +
                      (fault == Case::kStall ? 120 * collwatch::analyzer::kSecond : 0);
  const std::vector<collwatch::analyzer::Finding> findings = analyzer.Analyze(now, /*final_pass=*/true);
  const double t2 = Now();
  collwatch::analyzer::ReportInfo info = collwatch::analyzer::DescribeJob(analyzer.model());
  const std::string json = collwatch::analyzer::ReportJson(findings, info).dump(2);
  const std::string text = collwatch::analyzer::ReportText(findings, info);
  const double t3 = Now();

  const char* case_name = fault == Case::kDivergence ? "divergence" : fault == Case::kDtype ? "dtype" : "stall";
  std::printf("ranks %d, collectives per rank %d, group comms %d of %d, records %llu, %s injected at position %zu\n",
              ranks, collectives, comms, group_size, static_cast<unsigned long long>(records), case_name, bad);
  const double per_record = 1e9 / static_cast<double>(records);
  std::printf("build model from records : %.2f s (%.0f ns per record)\n", t1 - t0, (t1 - t0) * per_record);
  std::printf("analyze                  : %.3f s\n", t2 - t1);
  std::printf("render report            : %.3f s (json %zu bytes, text %zu bytes)\n", t3 - t2, json.size(), text.size());
  std::printf("analyze + report         : %.3f s\n", t3 - t1);
  std::printf("records -> findings      : %.2f s (%.0f ns per record)\n", t3 - t0, (t3 - t0) * per_record);
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
