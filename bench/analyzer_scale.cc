// Analyzer at scale: a synthetic job of N ranks x M collectives on one communicator (a
// ZeRO-3-like step of all-gathers and reduce-scatters in named regions), with one
// injected divergence: every fourth rank skips a two-collective run at seq M/2 and goes
// on. Prints how long building the model from the records, analysing and rendering the
// report take, and the process's peak memory.
//   collwatch_analyzer_scale [--ranks 4096] [--collectives 2000]
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

}  // namespace

int main(int argc, char** argv) {
  int ranks = 4096;
  int collectives = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) ranks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--collectives") == 0) collectives = std::atoi(argv[i + 1]);
  }
  if (ranks < 2 || collectives < 4) {
    std::fprintf(stderr, "usage: collwatch_analyzer_scale [--ranks N>=2] [--collectives M>=4]\n");
    return 2;
  }
  constexpr uint64_t kComm = 0x5ca1ab1e0000c0deull;
  constexpr int64_t kStart = 1'700'000'000LL * collwatch::analyzer::kSecond;
  constexpr int64_t kOpNs = 200'000;  // 0.2 ms per collective
  const std::vector<SyntheticOp> step = StepSchedule();
  const size_t divergence = static_cast<size_t>(collectives) / 2;

  const double rss_before = PeakRssMiB();
  const double t0 = Now();
  Analyzer analyzer;
  SyntheticJob job(&analyzer.model());
  uint64_t records = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    const auto process = job.AddProcess(rank);
    job.Init(process, kComm, rank, ranks, kStart);
    uint64_t seq = 1;
    const bool skips = rank % 4 == 1;
    for (size_t position = 0; seq <= static_cast<uint64_t>(collectives); ++position) {
      // The divergent ranks leave out two schedule entries at the divergence point.
      if (skips && (position == divergence || position == divergence + 1)) continue;
      const int64_t t = kStart + static_cast<int64_t>(position + 1) * kOpNs;
      job.Collective(process, kComm, rank, ranks, seq++, step[position % step.size()], t, t + kOpNs / 2);
      records += 2;
    }
  }
  const double t1 = Now();
  const int64_t now = kStart + static_cast<int64_t>(collectives + 10) * kOpNs;
  const std::vector<collwatch::analyzer::Finding> findings = analyzer.Analyze(now);
  const double t2 = Now();
  collwatch::analyzer::ReportInfo info = collwatch::analyzer::DescribeJob(analyzer.model());
  const std::string json = collwatch::analyzer::ReportJson(findings, info).dump(2);
  const std::string text = collwatch::analyzer::ReportText(findings, info);
  const double t3 = Now();

  std::printf("ranks %d, collectives per rank %d, records %llu, divergence injected at position %zu\n", ranks,
              collectives, static_cast<unsigned long long>(records), divergence);
  std::printf("build model from records : %.2f s (%.0f ns per record)\n", t1 - t0, (t1 - t0) * 1e9 / static_cast<double>(records));
  std::printf("analyze                  : %.3f s\n", t2 - t1);
  std::printf("render report            : %.3f s (json %zu bytes, text %zu bytes)\n", t3 - t2, json.size(), text.size());
  std::printf("analyze + report         : %.3f s\n", t3 - t1);
  std::printf("peak RSS                 : %.0f MiB (%.0f MiB before the model)\n", PeakRssMiB(), rss_before);
  std::printf("findings                 : %zu\n", findings.size());
  if (!findings.empty()) std::printf("first                    : %s\n", findings.front().headline.c_str());
  const bool named = findings.size() == 1 && findings[0].kind == collwatch::analyzer::FindingKind::kPathDivergence &&
                     findings[0].rank_classes.size() == 2 &&
                     findings[0].rank_classes[1].ranks.size() == static_cast<size_t>((ranks + 2) / 4);
  std::printf("divergence named correctly: %s\n", named ? "yes" : "NO");
  return named ? 0 : 1;
}
