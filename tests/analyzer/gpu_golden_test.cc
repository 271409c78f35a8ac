// Golden traces: the rings of real 2-rank runs of the bundled trainer on 2 x H200 with
// NCCL 2.28.9 (tests/data/gpu/README.md), analysed post-mortem and online in the
// collector's 100 ms ticks, with their NVTX regions and without them (classification
// from the call sequences alone). Threading: single-threaded.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/analyzer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/ring_dump_text.h"

namespace collwatch::analyzer::gpu_golden_test {
namespace {

using ::collwatch::testing::DumpedJob;
using ::collwatch::testing::DumpedJobFeeder;
using ::collwatch::testing::DumpedRecord;
using ::collwatch::testing::DumpedRing;
using ::collwatch::testing::DumpRegions;
using ::collwatch::testing::FirstRecordNs;
using ::collwatch::testing::LastRecordNs;
using ::collwatch::testing::ReadRingDumpText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kExpertSkip[] = "2026-11-23-h200x2-trainer-expert-skip.rings.txt";
constexpr char kDtypeMismatch[] = "2026-11-23-h200x2-trainer-dtype-mismatch.rings.txt";
constexpr char kImageText[] = "2026-11-23-h200x2-trainer-image-text.rings.txt";

constexpr int64_t kTickNs = 100'000'000;  // the collector's analysis period (analyze_interval_s)
// The jobs hung after their last record until a 45 s timeout stopped them: the collector
// went on ticking meanwhile (a few seconds cover every grace and settle window).
constexpr int64_t kTicksAfterTraceNs = 3'000'000'000;

DumpedJob Load(const std::string& trace, DumpRegions regions) {
  absl::StatusOr<DumpedJob> job = ReadRingDumpText(std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + trace, regions);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *std::move(job) : DumpedJob{};
}

// Post-mortem, as `collwatch analyze` reads rings: everything, then one final pass as of
// the end of the trace.
std::vector<Finding> PostMortem(const DumpedJob& job) {
  Analyzer analyzer;
  DumpedJobFeeder feeder(job, &analyzer.model());
  feeder.FeedRest();
  analyzer.Analyze(analyzer.model().LatestTimeNs(), /*final_pass=*/true);
  return analyzer.findings();
}

// Online, as the collector runs it (collector/online_analyzer.cc): bounded history, each
// tick adds what the rings held by then and analyses as of that moment.
std::vector<Finding> Online(const DumpedJob& job) {
  AnalyzerOptions options;
  options.bounded_history = true;
  Analyzer analyzer(options);
  DumpedJobFeeder feeder(job, &analyzer.model());
  const int64_t first_tick = (FirstRecordNs(job) / kTickNs + 1) * kTickNs;
  for (int64_t now = first_tick; now <= LastRecordNs(job) + kTicksAfterTraceNs; now += kTickNs) {
    feeder.FeedUntil(now);
    analyzer.Analyze(now);
  }
  return analyzer.findings();
}

bool IsDivergence(FindingKind kind) {
  return kind == FindingKind::kPathDivergence || kind == FindingKind::kSkippedReduceScatter ||
         kind == FindingKind::kSignatureMismatch || kind == FindingKind::kOpMismatch;
}

std::string KindsText(const std::vector<FindingKind>& kinds) {
  std::vector<std::string> names;
  for (FindingKind kind : kinds) names.emplace_back(FindingKindName(kind));
  return absl::StrJoin(names, ",");
}

// One line a reader of the test log can compare with tests/data/gpu/README.md.
std::string VerdictText(const Finding& finding) {
  std::vector<std::string> classes;
  for (const RankClass& rank_class : finding.rank_classes) {
    classes.push_back("[" + absl::StrJoin(rank_class.ranks, ",") + "] " + rank_class.label);
  }
  return absl::StrFormat("%s seq %d decided=%s other_readings={%s} latency %.3f s | classes: %s | %s",
                         std::string(FindingKindName(finding.kind)), finding.seq, finding.decided ? "true" : "false",
                         KindsText(finding.other_readings), finding.detect_latency_s, absl::StrJoin(classes, "; "),
                         finding.headline);
}

// Both analyses of one trace, and the checks every trace shares: a divergence is all that
// is found, and online finds what post-mortem finds, within 1 s of the first bad record.
struct Analyses {
  std::vector<Finding> post_mortem;
  std::vector<Finding> online;
  const Finding& divergence() const { return post_mortem.front(); }
};

Analyses Analyse(const std::string& trace, DumpRegions regions) {
  const DumpedJob job = Load(trace, regions);
  Analyses analyses{PostMortem(job), Online(job)};
  const char* labels = regions == DumpRegions::kKeep ? "with regions" : "without regions";
  for (const auto& [mode, findings] : {std::pair{"post-mortem", &analyses.post_mortem}, std::pair{"online", &analyses.online}}) {
    for (const Finding& finding : *findings) std::printf("%s %s %s: %s\n", trace.c_str(), labels, mode, VerdictText(finding).c_str());
  }
  return analyses;
}

void ExpectOnlineAgreesWithPostMortem(const Analyses& analyses) {
  ASSERT_FALSE(analyses.post_mortem.empty());
  ASSERT_FALSE(analyses.online.empty());
  // The divergence and nothing else: the stalls and lost ranks after it are its echo.
  EXPECT_EQ(analyses.post_mortem.size(), 1u);
  EXPECT_EQ(analyses.online.size(), 1u);
  const Finding& post_mortem = analyses.post_mortem.front();
  const Finding& online = analyses.online.front();
  EXPECT_TRUE(IsDivergence(post_mortem.kind)) << VerdictText(post_mortem);
  EXPECT_EQ(online.kind, post_mortem.kind) << VerdictText(online);
  EXPECT_EQ(online.seq, post_mortem.seq);
  EXPECT_EQ(online.comm_id, post_mortem.comm_id);
  EXPECT_EQ(online.decided, post_mortem.decided);
  EXPECT_EQ(online.other_readings, post_mortem.other_readings);
  EXPECT_EQ(online.first_bad_ns, post_mortem.first_bad_ns);
  EXPECT_GT(online.first_bad_ns, 0);
  EXPECT_LT(online.detect_latency_s, 1.0) << VerdictText(online);
}

std::vector<std::vector<int32_t>> ClassRanks(const Finding& finding) {
  std::vector<std::vector<int32_t>> ranks;
  for (const RankClass& rank_class : finding.rank_classes) ranks.push_back(rank_class.ranks);
  return ranks;
}

// Where the ranks' enter records first differ on the one communicator (op, count, dtype,
// reduce op, root, and the region name where kept): the truth each verdict must name.
uint64_t FirstDifferingSeq(const DumpedJob& job) {
  using Signature = std::tuple<uint16_t, uint64_t, uint8_t, int32_t, int32_t, std::string>;
  std::vector<std::map<uint64_t, Signature>> by_ring;
  for (const DumpedRing& ring : job.rings) {
    std::map<uint64_t, Signature>& calls = by_ring.emplace_back();
    for (const DumpedRecord& item : ring.records) {
      const ring::Record& r = item.record;
      if (r.kind != static_cast<uint16_t>(ring::RecordKind::kEnter) || !ring::IsCollective(static_cast<ring::ApiFn>(r.fn))) continue;
      const auto region = ring.region_names.find(r.region_id);
      calls[r.seq] = {r.fn, r.count, r.dtype, r.redop, r.root_or_peer, region == ring.region_names.end() ? "" : region->second};
    }
  }
  for (uint64_t seq = 1;; ++seq) {
    std::vector<const Signature*> at_seq;
    for (const auto& calls : by_ring) {
      const auto call = calls.find(seq);
      if (call == calls.end()) return 0;  // no difference while every rank reported
      at_seq.push_back(&call->second);
    }
    for (const Signature* signature : at_seq) {
      if (*signature != *at_seq.front()) return seq;
    }
  }
}

TEST(GpuGoldenTraces, ReadBackWhole) {
  for (const char* trace : {kExpertSkip, kDtypeMismatch, kImageText}) {
    SCOPED_TRACE(trace);
    const DumpedJob job = Load(trace, DumpRegions::kKeep);
    ASSERT_EQ(job.rings.size(), 2u);
    for (int32_t rank = 0; rank < 2; ++rank) {
      const DumpedRing& ring = job.rings[static_cast<size_t>(rank)];
      EXPECT_EQ(ring.info.host, "vm");
      EXPECT_EQ(ring.info.global_rank, rank);
      EXPECT_EQ(ring.info.world_size, 2);
      EXPECT_EQ(ring.status, ProcessStatus::kDead);  // killed by the timeout: "running (writer gone)"
      EXPECT_EQ(ring.lost_records, 0u);
    }
  }
}

// The truth from the records themselves. dtype-mismatch: rank 1 reduce-scatters in bf16
// from its first reduce-scatter on (trainer/zero3_shards.cc: reduce_dtype_ for the whole
// run), so the first bad collective is seq 20 (bwd/mtp.head0), not 47, the last one
// enqueued before the hang (the number docs/gpu-validation.md first gave).
TEST(GpuGoldenTraces, RecordsFirstDifferAtTheKnownCollective) {
  for (const DumpRegions regions : {DumpRegions::kKeep, DumpRegions::kDrop}) {
    EXPECT_EQ(FirstDifferingSeq(Load(kExpertSkip, regions)), 31u);
    EXPECT_EQ(FirstDifferingSeq(Load(kDtypeMismatch, regions)), 20u);
    EXPECT_EQ(FirstDifferingSeq(Load(kImageText, regions)), 1u);
  }
}

// Rank 1's batch did not use expert 1: its backward skipped that expert's reduce-scatter
// (rank 0: bwd/trunk.expert1, 8,393,728 floats) and went on with bwd/trunk.block7's
// all-gather; both ranks then issued the same 20 collectives, shifted by one.
TEST(GpuGoldenTraces, ExpertSkipIsASkippedReduceScatterAtSeq31) {
  for (const DumpRegions regions : {DumpRegions::kKeep, DumpRegions::kDrop}) {
    SCOPED_TRACE(regions == DumpRegions::kKeep ? "with regions" : "without regions");
    const Analyses analyses = Analyse(kExpertSkip, regions);
    ExpectOnlineAgreesWithPostMortem(analyses);
    if (analyses.post_mortem.empty()) continue;
    const Finding& finding = analyses.divergence();
    EXPECT_EQ(finding.kind, FindingKind::kSkippedReduceScatter) << VerdictText(finding);
    EXPECT_EQ(finding.seq, 31u);
    EXPECT_TRUE(finding.decided);
    EXPECT_THAT(ClassRanks(finding), ElementsAre(ElementsAre(0), ElementsAre(1)));
    ASSERT_EQ(finding.rank_classes.size(), 2u);
    EXPECT_THAT(finding.rank_classes[0].label, StartsWith("reduce-scattered"));
    EXPECT_THAT(finding.rank_classes[1].label, StartsWith("skipped it"));
    EXPECT_THAT(finding.headline, HasSubstr("rank 1 did not reduce-scatter"));
    if (regions == DumpRegions::kKeep) {
      EXPECT_THAT(finding.regions, ElementsAre("bwd/trunk.expert1"));
    }
  }
}

// Rank 1 reduce-scatters in bf16 where rank 0 does in fp32: the same calls, half the bytes.
TEST(GpuGoldenTraces, DtypeMismatchIsASignatureMismatchAtTheFirstReduceScatter) {
  for (const DumpRegions regions : {DumpRegions::kKeep, DumpRegions::kDrop}) {
    SCOPED_TRACE(regions == DumpRegions::kKeep ? "with regions" : "without regions");
    const Analyses analyses = Analyse(kDtypeMismatch, regions);
    ExpectOnlineAgreesWithPostMortem(analyses);
    if (analyses.post_mortem.empty()) continue;
    const Finding& finding = analyses.divergence();
    EXPECT_EQ(finding.kind, FindingKind::kSignatureMismatch) << VerdictText(finding);
    EXPECT_EQ(finding.seq, 20u);
    EXPECT_TRUE(finding.decided);
    EXPECT_THAT(ClassRanks(finding), ElementsAre(ElementsAre(0), ElementsAre(1)));
    EXPECT_THAT(finding.headline, HasSubstr("dtype float32 vs bfloat16"));
    EXPECT_THAT(finding.summary, HasSubstr("byte ratio 2.00"));
  }
}

// Rank 0 had an image batch (all-gather 1 is fwd/vision.patch, 263,168 floats), rank 1 a
// text-only one (fwd/embed, 33,030,144 floats); nothing after that call was issued.
TEST(GpuGoldenTraces, ImageTextIsAPathDivergenceByItsRegions) {
  const Analyses analyses = Analyse(kImageText, DumpRegions::kKeep);
  ExpectOnlineAgreesWithPostMortem(analyses);
  ASSERT_FALSE(analyses.post_mortem.empty());
  const Finding& finding = analyses.divergence();
  EXPECT_EQ(finding.kind, FindingKind::kPathDivergence) << VerdictText(finding);
  EXPECT_EQ(finding.seq, 1u);
  EXPECT_TRUE(finding.decided);
  EXPECT_THAT(ClassRanks(finding), ElementsAre(ElementsAre(0), ElementsAre(1)));
  EXPECT_THAT(finding.regions, ::testing::UnorderedElementsAre("fwd/vision.patch", "fwd/embed"));
}

// Without regions one all-gather per rank of other sizes is all there is: a size mismatch
// of the same call and calls of a module one rank skipped both fit, and the finding says so.
TEST(GpuGoldenTraces, ImageTextWithoutRegionsIsHonestlyUndecided) {
  const Analyses analyses = Analyse(kImageText, DumpRegions::kDrop);
  ExpectOnlineAgreesWithPostMortem(analyses);
  ASSERT_FALSE(analyses.post_mortem.empty());
  const Finding& finding = analyses.divergence();
  EXPECT_EQ(finding.kind, FindingKind::kSignatureMismatch) << VerdictText(finding);  // the literal reading
  EXPECT_EQ(finding.seq, 1u);
  EXPECT_FALSE(finding.decided);
  EXPECT_THAT(finding.other_readings, ElementsAre(FindingKind::kPathDivergence));
  EXPECT_THAT(ClassRanks(finding), ElementsAre(ElementsAre(0), ElementsAre(1)));
  EXPECT_THAT(finding.summary, HasSubstr("PATH_DIVERGENCE"));
}

}  // namespace
}  // namespace collwatch::analyzer::gpu_golden_test
