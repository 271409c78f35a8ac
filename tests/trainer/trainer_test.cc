// collwatch-trainer run as users run it (`--nproc 4` on the CPU NCCL backend, with
// libcollwatch.so preloaded): the loss falls; the failing scenarios really hang and their
// rings show where the ranks parted; the fixes give every rank the same collective
// schedule; ZeRO-3's gradients and updated parameters match a single-process run.
// Threading: single-threaded test code driving child processes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ring/ring_names.h"
#include "ring/ring_reader.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using ring::ApiFn;
using ring::RecordKind;
using testing::Subprocess;
using testing::TempDir;

constexpr int kRanks = 4;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclBfloat16 = 9;
// A tiny model: a step takes tens of milliseconds on one core.
const std::vector<std::string> kTinyModel = {"--hidden", "32", "--layers", "2", "--vision-layers",
                                             "1", "--seq", "16", "--vocab", "32"};

// A collective as one rank issued it.
struct Collective {
  ApiFn fn = ApiFn::kNone;
  uint64_t count = 0;
  int dtype = 0;
  int redop = 0;
  int root = 0;
  uint64_t comm = 0;
  std::string region;    // innermost NVTX range
  bool returned = false;  // false: the rank is still inside it (or was killed there)

  // What must agree across ranks for the collective to match.
  std::string Fingerprint() const {
    std::ostringstream out;
    out << OpName(fn) << " count=" << count << " dtype=" << dtype << " redop=" << redop
        << " root=" << root;
    return out.str();
  }
};

struct RankRings {
  std::vector<Collective> collectives;  // in issue order
  std::set<std::string> regions;        // every region a record names
};

// Every rank's collectives from the rings in `dir` (writers gone: killed or exited).
std::map<int, RankRings> ReadRings(const std::string& dir) {
  std::map<int, RankRings> ranks;
  auto paths = ListRingFiles(dir);
  EXPECT_TRUE(paths.ok()) << paths.status();
  if (!paths.ok()) return ranks;
  for (const std::string& path : *paths) {
    auto reader = RingReader::Open(path);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) continue;
    const ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/true);
    std::set<std::pair<uint32_t, uint64_t>> returned;
    for (const IndexedRecord& item : batch.records) {
      if (item.record.kind == static_cast<uint16_t>(RecordKind::kReturn)) {
        returned.insert({item.record.ref_lane, item.record.ref_index});
      }
    }
    RankRings& rank = ranks[(*reader)->identity().rank];
    for (const IndexedRecord& item : batch.records) {
      const ring::Record& record = item.record;
      if (record.kind != static_cast<uint16_t>(RecordKind::kEnter)) continue;
      const std::string region = (*reader)->Name(record.region_id);
      if (!region.empty()) rank.regions.insert(region);
      if (!ring::IsCollective(static_cast<ApiFn>(record.fn))) continue;
      rank.collectives.push_back({static_cast<ApiFn>(record.fn), record.count, record.dtype,
                                  record.redop, record.root_or_peer, record.comm_id, region,
                                  returned.count({item.lane, item.index}) > 0});
    }
  }
  return ranks;
}

// Per communicator, the sequence of fingerprints.
std::map<uint64_t, std::vector<std::string>> Schedule(const RankRings& rings) {
  std::map<uint64_t, std::vector<std::string>> schedule;
  for (const Collective& collective : rings.collectives) {
    schedule[collective.comm].push_back(collective.Fingerprint());
  }
  return schedule;
}

// The first position where the ranks' collectives differ or some rank has none.
size_t FirstDivergence(const std::map<int, RankRings>& ranks) {
  for (size_t position = 0;; ++position) {
    std::set<std::string> seen;
    bool someone_missing = false;
    bool everyone_missing = true;
    for (const auto& [rank, rings] : ranks) {
      if (position < rings.collectives.size()) {
        seen.insert(rings.collectives[position].Fingerprint());
        everyone_missing = false;
      } else {
        someone_missing = true;
      }
    }
    if (everyone_missing || someone_missing || seen.size() > 1) return position;
  }
}

// Losses printed as "rank R step S loss L ...", by rank then step.
std::map<int, std::vector<double>> ParseLosses(const std::string& log) {
  std::map<int, std::vector<double>> losses;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    int rank = 0;
    long long step = 0;
    double loss = 0;
    if (std::sscanf(line.c_str(), "rank %d step %lld loss %lf", &rank, &step, &loss) == 3) {
      std::vector<double>& of_rank = losses[rank];
      if (of_rank.size() <= static_cast<size_t>(step)) of_rank.resize(step + 1, NAN);
      of_rank[step] = loss;
    }
  }
  return losses;
}

// One collwatch-trainer job with its own folder for rings, shared memory and output.
class TrainerJob {
 public:
  TrainerJob(const std::vector<std::string>& flags, bool preload) {
    std::string command = "exec " COLLWATCH_TRAINER_PATH;
    for (const std::string& flag : kTinyModel) command += " " + flag;
    for (const std::string& flag : flags) command += " " + flag;
    command += " > " + LogPath() + " 2>&1";
    std::map<std::string, std::string> env = {{"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}};
    if (preload) {
      env["LD_PRELOAD"] = COLLWATCH_PRELOAD_LIST;
      env["NVTX_INJECTION64_PATH"] = COLLWATCH_PRELOAD_PATH;
      env["COLLWATCH_RING_DIR"] = RingDir();
    }
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{"/bin/sh", "-c", command}, env);
  }

  Subprocess& process() { return *process_; }
  std::string RingDir() const { return dir_.path() + "/rings"; }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string Log() const {
    std::ifstream file(LogPath());
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }

 private:
  std::string LogPath() const { return dir_.path() + "/trainer.log"; }

  TempDir dir_;
  std::unique_ptr<Subprocess> process_;
};

std::vector<std::string> Flags(const std::string& scenario, int steps,
                               std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--nproc", std::to_string(kRanks), "--scenario", scenario,
                                    "--steps", std::to_string(steps), "--batch", "2"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

void ExpectIdenticalSchedules(const std::map<int, RankRings>& ranks) {
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  const auto reference = Schedule(ranks.at(0));
  ASSERT_FALSE(reference.empty());
  for (const auto& [rank, rings] : ranks) {
    EXPECT_EQ(Schedule(rings), reference) << "rank " << rank << " issued another schedule";
  }
}

TEST(TrainerTest, CleanTrainsAndNamesUnitsInTheRings) {
  TrainerJob job(Flags("clean", 10, {"--lr", "1e-2"}), /*preload=*/true);
  ASSERT_EQ(job.process().Wait(120), 0) << job.Log();

  const auto losses = ParseLosses(job.Log());
  ASSERT_EQ(losses.size(), static_cast<size_t>(kRanks)) << job.Log();
  double first = 0;
  double last = 0;
  for (const auto& [rank, of_rank] : losses) {
    ASSERT_EQ(of_rank.size(), 10u) << job.Log();
    for (double loss : of_rank) ASSERT_TRUE(std::isfinite(loss)) << job.Log();
    first += of_rank.front() / kRanks;
    last += (of_rank[8] + of_rank[9]) / (2 * kRanks);
  }
  EXPECT_LT(last, first - 0.5) << "the loss did not fall:\n" << job.Log();

  const auto ranks = ReadRings(job.RingDir());
  ExpectIdenticalSchedules(ranks);
  for (const auto& [rank, rings] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    for (const char* region : {"fwd/vision.patch", "fwd/vision.block0", "fwd/projector", "fwd/embed",
                               "fwd/trunk.block1", "fwd/trunk.expert1", "fwd/mtp.head3", "fwd/unembed",
                               "bwd/mtp.head0", "bwd/unembed", "bwd/trunk.expert0",
                               "bwd/trunk.block0", "bwd/projector", "bwd/embed"}) {
      EXPECT_TRUE(rings.regions.count(region)) << region;
    }
    // Frozen: the vision tower is gathered but never reduce-scattered.
    for (const Collective& collective : rings.collectives) {
      if (collective.region.rfind("fwd/vision.", 0) == 0) {
        EXPECT_EQ(collective.fn, ApiFn::kAllGather);
      }
      EXPECT_EQ(collective.region.find("bwd/vision."), std::string::npos);
      EXPECT_TRUE(collective.returned);
    }
    ASSERT_FALSE(rings.collectives.empty());
    EXPECT_EQ(rings.collectives.front().region, "fwd/vision.patch");
  }
}

// The fixes: text-only batches on some ranks, yet every rank issues the same collectives.
TEST(TrainerTest, DummyImageGivesIdenticalSchedules) {
  TrainerJob job(Flags("image-text-dummy", 3), /*preload=*/true);
  ASSERT_EQ(job.process().Wait(120), 0) << job.Log();
  const auto ranks = ReadRings(job.RingDir());
  ExpectIdenticalSchedules(ranks);
  // Text-only ranks (odd) run the dummy image through the tower every step.
  for (const auto& [rank, rings] : ranks) {
    int vision_gathers = 0;
    for (const Collective& collective : rings.collectives) {
      vision_gathers += collective.region == "fwd/vision.patch";
    }
    EXPECT_EQ(vision_gathers, 3) << "rank " << rank;
  }
}

TEST(TrainerTest, BatchSyncGivesIdenticalSchedules) {
  // Less skew: rank 0's draw, which everyone follows, is sometimes text-only.
  TrainerJob job(Flags("image-text-batchsync", 6, {"--image-skew", "0"}), /*preload=*/true);
  ASSERT_EQ(job.process().Wait(120), 0) << job.Log();
  const auto ranks = ReadRings(job.RingDir());
  ExpectIdenticalSchedules(ranks);
  int broadcasts = 0;
  int vision_gathers = 0;
  for (const Collective& collective : ranks.at(0).collectives) {
    broadcasts += collective.fn == ApiFn::kBroadcast && collective.region == "data/batch_kind";
    vision_gathers += collective.region == "fwd/vision.patch";
  }
  EXPECT_EQ(broadcasts, 6);
  EXPECT_GT(vision_gathers, 0) << "no image step";
  EXPECT_LT(vision_gathers, 6) << "no text-only step: the test exercises nothing";
}

// Per-head backward through the trunk: the ranks agree, but the schedule is not clean's,
// while the maths (the loss) is the same.
TEST(TrainerTest, MtpSequentialBackwardChangesTheScheduleNotTheLoss) {
  TrainerJob clean(Flags("clean", 2), /*preload=*/true);
  ASSERT_EQ(clean.process().Wait(120), 0) << clean.Log();
  TrainerJob per_head(Flags("mtp-sequential-backward", 2), /*preload=*/true);
  ASSERT_EQ(per_head.process().Wait(120), 0) << per_head.Log();

  const auto clean_ranks = ReadRings(clean.RingDir());
  const auto per_head_ranks = ReadRings(per_head.RingDir());
  ExpectIdenticalSchedules(per_head_ranks);
  ASSERT_EQ(clean_ranks.size(), per_head_ranks.size());
  EXPECT_GT(per_head_ranks.at(0).collectives.size(), clean_ranks.at(0).collectives.size());

  const auto clean_losses = ParseLosses(clean.Log());
  const auto per_head_losses = ParseLosses(per_head.Log());
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(per_head_losses.at(rank).size(), 2u);
    EXPECT_EQ(per_head_losses.at(rank)[0], clean_losses.at(rank)[0]);
    EXPECT_NEAR(per_head_losses.at(rank)[1], clean_losses.at(rank)[1], 2e-3);
  }
}

// A failing scenario: still running well after a healthy job would have finished; then
// killed, and the rings read.
// Records written so far by each live ring of `dir` (rings still being created skipped).
std::vector<uint64_t> RecordsPerRing(const std::string& dir) {
  std::vector<uint64_t> counts;
  auto paths = ListRingFiles(dir);
  if (!paths.ok()) return counts;
  for (const std::string& path : *paths) {
    auto reader = RingReader::Open(path);
    if (reader.ok()) counts.push_back((*reader)->records_written());
  }
  return counts;
}

// True once every rank has a ring and none has written a record for `quiet_seconds`:
// the job is stuck. A bound on start-up time, not a speed check (sanitizer builds of the
// trainer start slowly on a loaded machine).
bool WaitUntilQuiet(TrainerJob& job, double quiet_seconds, double deadline_seconds) {
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  };
  std::vector<uint64_t> last;
  auto last_change = std::chrono::steady_clock::now();
  while (since(start) < deadline_seconds && job.process().Running()) {
    std::vector<uint64_t> counts = RecordsPerRing(job.RingDir());
    if (counts != last || counts.size() < static_cast<size_t>(kRanks)) {
      last = counts;
      last_change = std::chrono::steady_clock::now();
    } else if (since(last_change) >= quiet_seconds) {
      return true;
    }
    usleep(200000);
  }
  return false;
}

std::map<int, RankRings> RunUntilHung(const std::string& scenario) {
  TrainerJob job(Flags(scenario, 4), /*preload=*/true);
  EXPECT_TRUE(WaitUntilQuiet(job, /*quiet_seconds=*/5, /*deadline_seconds=*/120))
      << "expected the ranks to hang, quietly:\n" << job.Log();
  EXPECT_TRUE(job.process().Running()) << "expected a hang, but it ended:\n" << job.Log();
  job.process().KillGroup();
  EXPECT_EQ(ParseLosses(job.Log()).count(0), 0u) << "a hung job finished a step:\n" << job.Log();
  auto ranks = ReadRings(job.RingDir());
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  return ranks;
}

// Every rank that issued collectives is stuck inside its last one.
void ExpectStuckInLastCollective(const std::map<int, RankRings>& ranks) {
  for (const auto& [rank, rings] : ranks) {
    if (rings.collectives.empty()) continue;
    EXPECT_FALSE(rings.collectives.back().returned) << "rank " << rank << " is not blocked";
    for (size_t i = 0; i + 1 < rings.collectives.size(); ++i) EXPECT_TRUE(rings.collectives[i].returned);
  }
}

TEST(TrainerHangTest, ImageTextDivergesAtTheVisionTower) {
  const auto ranks = RunUntilHung("image-text");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  ExpectStuckInLastCollective(ranks);
  const size_t position = FirstDivergence(ranks);
  for (const auto& [rank, rings] : ranks) {
    ASSERT_GT(rings.collectives.size(), position) << "rank " << rank;
    const Collective& collective = rings.collectives[position];
    EXPECT_EQ(collective.fn, ApiFn::kAllGather);
    // Even ranks drew image batches, odd ranks text-only ones and skipped the tower.
    EXPECT_EQ(collective.region, rank % 2 == 0 ? "fwd/vision.patch" : "fwd/embed") << "rank " << rank;
  }
  EXPECT_NE(ranks.at(0).collectives[position].Fingerprint(),
            ranks.at(1).collectives[position].Fingerprint());
}

TEST(TrainerHangTest, ExpertSkipMissesAReduceScatter) {
  const auto ranks = RunUntilHung("expert-skip");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  ExpectStuckInLastCollective(ranks);
  const size_t position = FirstDivergence(ranks);
  for (const auto& [rank, rings] : ranks) {
    ASSERT_GT(rings.collectives.size(), position) << "rank " << rank;
    const Collective& collective = rings.collectives[position];
    if (rank % 2 == 0) {
      EXPECT_EQ(collective.fn, ApiFn::kReduceScatter);
      EXPECT_EQ(collective.region, "bwd/trunk.expert1");
    } else {
      // Its samples never reached expert 1: no gradient, no reduce-scatter; it moved on.
      EXPECT_EQ(collective.region, "bwd/trunk.block1") << "rank " << rank;
    }
  }
}

TEST(TrainerHangTest, DtypeMismatchAtTheFirstReduceScatter) {
  const auto ranks = RunUntilHung("dtype-mismatch");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  ExpectStuckInLastCollective(ranks);
  const size_t position = FirstDivergence(ranks);
  for (const auto& [rank, rings] : ranks) {
    ASSERT_GT(rings.collectives.size(), position) << "rank " << rank;
    const Collective& collective = rings.collectives[position];
    EXPECT_EQ(collective.fn, ApiFn::kReduceScatter);
    EXPECT_EQ(collective.region, "bwd/mtp.head0");
    EXPECT_EQ(collective.count, ranks.at(0).collectives[position].count);
    EXPECT_EQ(collective.dtype, rank == 1 ? kNcclBfloat16 : kNcclFloat32) << "rank " << rank;
  }
}

TEST(TrainerHangTest, FirstForwardStallLeavesOneRankOut) {
  const auto ranks = RunUntilHung("first-forward-stall");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_TRUE(ranks.at(1).collectives.empty()) << "the stalled rank reached a collective";
  for (int rank : {0, 2, 3}) {
    const std::vector<Collective>& collectives = ranks.at(rank).collectives;
    ASSERT_EQ(collectives.size(), 1u) << "rank " << rank;
    EXPECT_EQ(collectives[0].fn, ApiFn::kAllGather);
    EXPECT_EQ(collectives[0].region, "fwd/vision.patch");
    EXPECT_FALSE(collectives[0].returned);
  }
}

// --dump-params: unit name -> (parameters, gradients).
struct UnitDump {
  std::vector<float> params;
  std::vector<float> grads;  // empty for frozen units
};

std::map<std::string, UnitDump> ReadDump(const std::string& path) {
  std::map<std::string, UnitDump> units;
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << path;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream header(line);
    std::string word, name;
    size_t numel = 0;
    int trainable = 0;
    header >> word >> name >> numel >> trainable;
    EXPECT_EQ(word, "unit");
    if (word != "unit") break;
    UnitDump& unit = units[name];
    unit.params.resize(numel);
    file.read(reinterpret_cast<char*>(unit.params.data()), numel * sizeof(float));
    if (trainable) {
      unit.grads.resize(numel);
      file.read(reinterpret_cast<char*>(unit.grads.data()), numel * sizeof(float));
    }
  }
  return units;
}

class Zero3Test : public ::testing::TestWithParam<int> {};

// One step of N ranks with B samples each against one process with N*B samples.
TEST_P(Zero3Test, OneStepMatchesASingleProcess) {
  const int world = GetParam();
  constexpr int kBatch = 2;
  constexpr double kLearningRate = 3e-3;  // the trainer's default
  constexpr double kGradAbsTolerance = 1e-6;
  TempDir dumps;
  auto run = [&](int nproc, int batch, int steps, const std::string& name) {
    const std::string path = dumps.path() + "/" + name;
    TrainerJob job({"--nproc", std::to_string(nproc), "--batch", std::to_string(batch), "--steps",
                    std::to_string(steps), "--dump-params", path},
                   /*preload=*/false);
    EXPECT_EQ(job.process().Wait(120), 0) << job.Log();
    return ReadDump(path);
  };
  const auto initial = run(1, world * kBatch, 0, "initial");
  const auto single = run(1, world * kBatch, 1, "single");
  const auto sharded = run(world, kBatch, 1, "sharded");
  ASSERT_FALSE(single.empty());
  ASSERT_EQ(single.size(), sharded.size());
  for (const auto& [name, expected] : single) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(sharded.count(name));
    const UnitDump& actual = sharded.at(name);
    ASSERT_EQ(actual.params.size(), expected.params.size());
    ASSERT_EQ(actual.grads.size(), expected.grads.size());
    double largest_grad = 0;
    double largest_change = 0;
    int bad_grads = 0;
    int bad_params = 0;
    for (size_t i = 0; i < expected.grads.size(); ++i) {
      largest_grad = std::max(largest_grad, std::fabs(double(expected.grads[i])));
      bad_grads += std::fabs(actual.grads[i] - expected.grads[i]) > kGradAbsTolerance + 1e-3 * std::fabs(expected.grads[i]);
    }
    for (size_t i = 0; i < expected.params.size(); ++i) {
      largest_change = std::max(largest_change, std::fabs(double(expected.params[i] - initial.at(name).params[i])));
      // AdamW's first step moves each element by about lr * sign(gradient): where the
      // gradient is within rounding of zero its sign, and so the step, may flip.
      const bool sign_uncertain = !expected.grads.empty() && std::fabs(expected.grads[i]) < kGradAbsTolerance;
      const double tolerance = sign_uncertain ? 2 * kLearningRate + 2e-5 : 2e-5;
      bad_params += std::fabs(actual.params[i] - expected.params[i]) > tolerance;
    }
    EXPECT_EQ(bad_grads, 0) << "gradients differ from the single-process run";
    EXPECT_EQ(bad_params, 0) << "updated parameters differ from the single-process run";
    if (expected.grads.empty()) {
      EXPECT_EQ(largest_change, 0) << "a frozen unit changed";
    } else {
      EXPECT_GT(largest_grad, 0) << "no gradient reached the unit";
      EXPECT_GT(largest_change, 1e-4) << "the optimizer did not move the unit";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Zero3Test, ::testing::Values(3, 4));

}  // namespace
}  // namespace collwatch
