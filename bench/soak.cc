// The soak (issue 8): simulated ranks (bench/soak_rank.cc under the preload, writing real
// rings) shipped by real `collwatch agent`s (one per simulated node) to a real `collwatch
// collector`, while a seeded chaos loop SIGKILLs and restarts the collector and the
// agents at random moments. At the end the store must hold every ring record exactly
// once, in order, byte for byte (tests/collector/trace_check.h), and the collector's RSS,
// sampled through every lifetime, must not climb. Exits 1 on any mismatch, when the store
// stops growing short of the rings (nothing ships), or when the collector's RSS grows by
// more than --max-rss-growth-mib over the second half of its longest lifetime.
// Threading: one thread; the chaos loop samples RSS between its events.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ring/clocks.h"
#include "tests/collector/trace_check.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using testing::Subprocess;

constexpr char kJob[] = "soak";
constexpr int kRingSlotsPerStep = 5;  // all-reduce, group start, send, recv, group end

struct Options {
  int ranks = 64;
  double seconds = 600;
  uint64_t seed = 1;
  int nodes = 4;                // one agent per node, ranks spread over them
  // Per rank. At 30 the analyzer's window (history_window collectives per rank) fills in
  // under three minutes, so a long collector lifetime shows its plateau.
  double steps_per_second = 30;
  int collector_kills = 3;
  int agent_kills = -1;         // -1: one per 20 s of soak
  double sample_every_s = 5;    // collector RSS
  // The collector's RSS may grow at most this much over the second half of its longest
  // lifetime (judged when that lifetime lasts at least min_judged_lifetime_s).
  double max_rss_growth_mib = 16;
  double min_judged_lifetime_s = 120;
  double stuck_after_s = 30;    // the store not growing this long after the job: nothing ships
  std::string dir;              // empty: a temporary folder, removed afterwards
};

struct ChaosEvent {
  double at_s = 0;
  bool collector = false;  // else an agent
  int node = 0;
  double down_s = 0;       // how long it stays dead before the restart
};

struct RssSample {
  double uptime_s = 0;
  double job_s = 0;
  long rss_kib = 0;
};

struct Lifetime {
  double started_s = 0, ended_s = 0;
  std::vector<RssSample> samples;
};

double Now() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}
void Sleep(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// VmRSS of `pid` in KiB (0 when it is gone).
long RssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

// Kill moments drawn from the seed: the collector's in the first 45 % of the soak, so
// its last lifetime spans more than half of it (the one whose RSS must stay flat);
// the agents' anywhere but the very start and end.
std::vector<ChaosEvent> PlanChaos(const Options& options) {
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<ChaosEvent> events;
  for (int i = 0; i < options.collector_kills; ++i) {
    events.push_back({options.seconds * (0.1 + 0.35 * unit(random)), true, 0, 0.5 + 2.5 * unit(random)});
  }
  const int agent_kills = options.agent_kills >= 0 ? options.agent_kills : static_cast<int>(options.seconds / 20);
  for (int i = 0; i < agent_kills; ++i) {
    const int node = static_cast<int>(random() % static_cast<uint64_t>(options.nodes));
    events.push_back({options.seconds * (0.05 + 0.9 * unit(random)), false, node, 0.2 + 1.8 * unit(random)});
  }
  std::sort(events.begin(), events.end(), [](const ChaosEvent& a, const ChaosEvent& b) { return a.at_s < b.at_s; });
  return events;
}

class Soak {
 public:
  explicit Soak(Options options)
      : options_(std::move(options)), address_("127.0.0.1:" + std::to_string(testing::FreeLoopbackPort())) {
    if (options_.dir.empty()) {
      temp_ = std::make_unique<testing::TempDir>();
      options_.dir = temp_->path();
    }
  }

  int Run() {
    const std::vector<ChaosEvent> plan = PlanChaos(options_);
    const auto steps = static_cast<uint64_t>(options_.seconds * options_.steps_per_second);
    // Rings large enough that nothing is overwritten, whatever the agents' downtime.
    uint64_t ring_records = 1024;
    while (ring_records < 2 * (steps * kRingSlotsPerStep + 64)) ring_records *= 2;
    std::printf("soak: %d ranks on %d agents, %.0f s, %.0f steps/s per rank (%d ring slots each), seed %llu\n",
                options_.ranks, options_.nodes, options_.seconds, options_.steps_per_second, kRingSlotsPerStep,
                static_cast<unsigned long long>(options_.seed));
    std::printf("soak: folder %s, collector %s, ring %llu records per lane\n", options_.dir.c_str(), address_.c_str(),
                static_cast<unsigned long long>(ring_records));
    std::fflush(stdout);

    t0_ = Now();
    StartCollector();
    for (int node = 0; node < options_.nodes; ++node) agents_.push_back(StartAgent(node));
    const int64_t start_ns = static_cast<int64_t>(RealtimeNs()) + 1'000'000'000;  // every rank spawned before the first step
    for (int rank = 0; rank < options_.ranks; ++rank) {
      const int node = rank % options_.nodes;
      ranks_.push_back(std::make_unique<Subprocess>(
          std::vector<std::string>{COLLWATCH_SOAK_RANK_PATH, std::to_string(rank), std::to_string(options_.ranks),
                                   absl::StrCat(options_.seconds), absl::StrCat(options_.steps_per_second),
                                   std::to_string(start_ns)},
          std::map<std::string, std::string>{{"LD_PRELOAD", COLLWATCH_PRELOAD_PATH},
                                             {"COLLWATCH_RING_DIR", RingDir(node)},
                                             {"COLLWATCH_RING_RECORDS", std::to_string(ring_records)},
                                             {"COLLWATCH_RING_LANES", "2"},
                                             {"COLLWATCH_JOB_ID", kJob},
                                             {"RANK", std::to_string(rank)},
                                             {"WORLD_SIZE", std::to_string(options_.ranks)}},
          "", Log(absl::StrCat("rank-", rank, ".err"))));
    }

    int kills = 0, agent_kills = 0;
    for (const ChaosEvent& event : plan) {
      SampleUntil(event.at_s);
      if (event.collector) {
        const double up = Elapsed() - lifetimes_.back().started_s;
        std::printf("t=%7.1f s  SIGKILL collector (pid %d, up %.1f s), restart in %.1f s\n", Elapsed(),
                    collector_->pid(), up, event.down_s);
        collector_->KillGroup();
        lifetimes_.back().ended_s = Elapsed();
        ++kills;
        SampleUntil(Elapsed() + event.down_s);
        StartCollector();
      } else {
        std::printf("t=%7.1f s  SIGKILL agent of node %d (pid %d), restart in %.1f s\n", Elapsed(), event.node,
                    agents_[static_cast<size_t>(event.node)]->pid(), event.down_s);
        agents_[static_cast<size_t>(event.node)]->KillGroup();
        ++agent_kills;
        SampleUntil(Elapsed() + event.down_s);
        agents_[static_cast<size_t>(event.node)] = StartAgent(event.node);
      }
      std::fflush(stdout);
    }
    SampleUntil(options_.seconds + 1);

    int failed_ranks = 0;
    for (auto& rank : ranks_) failed_ranks += rank->Wait(60) != 0;
    const double job_end = Elapsed();

    // The agents ship the rings' tails; the store catches up.
    testing::TraceComparison comparison;
    bool same = false;
    SampleUntil(Elapsed() + 3);  // the agents' last reads and batches (a poll reads the whole store)
    // Wait while the store grows; when it stops short of the rings, something no longer
    // ships (a refused stream, an agent that cannot start): fail and say so.
    uint64_t stored_before = 0;
    double grew_at = Elapsed();
    bool stuck = false;
    while (true) {
      comparison = CompareAll();
      same = comparison.mismatch.empty() && comparison.rings == options_.ranks && comparison.traces == options_.ranks &&
             comparison.stored_records == comparison.ring_records;
      if (same) break;
      if (comparison.stored_records != stored_before) {
        stored_before = comparison.stored_records;
        grew_at = Elapsed();
      } else if (Elapsed() - grew_at > options_.stuck_after_s) {
        stuck = true;
        break;
      }
      SampleUntil(Elapsed() + 2);
    }
    const double caught_up = Elapsed() - job_end;
    Sample();
    lifetimes_.back().ended_s = Elapsed();

    std::printf("\nchaos: %d collector SIGKILLs + restarts, %d agent SIGKILLs + restarts (seed %llu)\n", kills,
                agent_kills, static_cast<unsigned long long>(options_.seed));
    std::printf("ranks: %d exited cleanly, %d failed\n", options_.ranks - failed_ranks, failed_ranks);
    std::printf("records: rings %llu, store %llu, lost in the rings %llu; %d rings, %d traces\n",
                static_cast<unsigned long long>(comparison.ring_records),
                static_cast<unsigned long long>(comparison.stored_records),
                static_cast<unsigned long long>(comparison.ring_lost), comparison.rings, comparison.traces);
    std::printf("store == rings (every record once, in order, byte for byte): %s (%.1f s after the job ended)%s%s\n",
                same ? "yes" : "NO", caught_up, comparison.mismatch.empty() ? "" : "\n  first mismatch: ",
                comparison.mismatch.c_str());
    if (stuck) {
      std::printf("the store stopped growing at %llu of %llu records for %.0f s: nothing ships (%s)\n",
                  static_cast<unsigned long long>(comparison.stored_records),
                  static_cast<unsigned long long>(comparison.ring_records), options_.stuck_after_s,
                  temp_ != nullptr ? "run with --dir DIR to keep the agents' and collectors' logs"
                                   : absl::StrCat("see ", options_.dir, "/agent-*.log and collector-*.log").c_str());
    }
    const bool flat = ReportRss();
    return same && flat && failed_ranks == 0 && comparison.ring_lost == 0 ? 0 : 1;
  }

 private:
  double Elapsed() const { return Now() - t0_; }
  std::string RingDir(int node) const { return absl::StrCat(options_.dir, "/rings/node-", node); }
  std::string Out() const { return options_.dir + "/out"; }
  std::string Log(const std::string& name) const { return options_.dir + "/" + name; }

  void StartCollector() {
    const std::string log = Log(absl::StrCat("collector-", lifetimes_.size(), ".log"));
    collector_ = std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "collector", "--listen", address_, "--out", Out(), "--job", kJob},
        std::map<std::string, std::string>{}, log, log);
    lifetimes_.push_back(Lifetime{Elapsed(), 0, {}});
  }
  std::unique_ptr<Subprocess> StartAgent(int node) {
    const std::string log = Log(absl::StrCat("agent-", node, ".log"));
    std::filesystem::create_directories(RingDir(node));
    // The agent ships only from a private ring folder, as the preload makes them.
    std::filesystem::permissions(RingDir(node), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace);
    // Appended to across restarts: the file tells the whole story of the node.
    return std::make_unique<Subprocess>(
        std::vector<std::string>{"/bin/sh", "-c",
                                 absl::StrCat("exec '", COLLWATCH_CLI_PATH, "' agent --collector ", address_,
                                              " --ring-dir '", RingDir(node), "' --job ", kJob,
                                              // The rings stay to be compared with the store.
                                              " --keep-rings >> '", log, "' 2>&1")},
        std::map<std::string, std::string>{});
  }

  void Sample() {
    const long rss = RssKib(collector_->pid());
    if (rss > 0) {
      Lifetime& life = lifetimes_.back();
      life.samples.push_back({Elapsed() - life.started_s, Elapsed(), rss});
    }
    next_sample_s_ = Elapsed() + options_.sample_every_s;
  }
  // Samples the collector's RSS on its period until the soak's clock reaches `at_s`.
  void SampleUntil(double at_s) {
    while (Elapsed() < at_s) {
      if (Elapsed() >= next_sample_s_) Sample();
      Sleep(std::min(at_s, next_sample_s_) - Elapsed());
    }
  }

  testing::TraceComparison CompareAll() const {
    std::vector<std::string> ring_dirs;
    for (int node = 0; node < options_.nodes; ++node) ring_dirs.push_back(RingDir(node));
    return testing::CompareTracesWithRings(ring_dirs, Out(), kJob);
  }

  // Prints the collector's RSS per lifetime; false when the longest one grew by more than
  // max_rss_growth_mib over its second half.
  bool ReportRss() const {
    std::printf("\ncollector RSS per lifetime (sampled every %.0f s):\n", options_.sample_every_s);
    size_t longest = 0;
    for (size_t i = 0; i < lifetimes_.size(); ++i) {
      const Lifetime& life = lifetimes_[i];
      if (life.ended_s - life.started_s > lifetimes_[longest].ended_s - lifetimes_[longest].started_s) longest = i;
      if (life.samples.empty()) {
        std::printf("  #%zu  t=%6.1f..%6.1f s (%5.1f s up): killed before its first sample\n", i, life.started_s,
                    life.ended_s, life.ended_s - life.started_s);
        continue;
      }
      long lowest = life.samples.front().rss_kib, highest = lowest;
      for (const RssSample& sample : life.samples) {
        lowest = std::min(lowest, sample.rss_kib);
        highest = std::max(highest, sample.rss_kib);
      }
      std::printf("  #%zu  t=%6.1f..%6.1f s (%5.1f s up): RSS first %.1f MiB, min %.1f, max %.1f, last %.1f\n", i,
                  life.started_s, life.ended_s, life.ended_s - life.started_s, life.samples.front().rss_kib / 1024.0,
                  lowest / 1024.0, highest / 1024.0, life.samples.back().rss_kib / 1024.0);
    }
    const Lifetime& life = lifetimes_[longest];
    if (life.samples.empty()) return true;
    std::printf("longest lifetime #%zu, RSS by uptime:\n", longest);
    double next_print = 0;
    for (const RssSample& sample : life.samples) {
      if (sample.uptime_s + 1e-9 < next_print && &sample != &life.samples.back()) continue;
      std::printf("  %6.0f s  %7.1f MiB\n", sample.uptime_s, sample.rss_kib / 1024.0);
      next_print = sample.uptime_s + std::max(30.0, options_.sample_every_s);
    }
    // Flat means: what it holds once the analyzer's window is full (it fills in the
    // first minutes) is what it holds at its end: compare the second half.
    auto at = [&](double uptime_s) {
      const RssSample* best = &life.samples.front();
      for (const RssSample& sample : life.samples) {
        if (std::abs(sample.uptime_s - uptime_s) < std::abs(best->uptime_s - uptime_s)) best = &sample;
      }
      return *best;
    };
    const RssSample late = life.samples.back();
    for (const double fraction : {0.25, 0.5, 0.75}) {
      const RssSample early = at(late.uptime_s * fraction);
      std::printf("RSS at %.0f s up: %.1f MiB; at %.0f s up: %.1f MiB (%+.1f MiB)\n", early.uptime_s,
                  early.rss_kib / 1024.0, late.uptime_s, late.rss_kib / 1024.0,
                  (late.rss_kib - early.rss_kib) / 1024.0);
    }
    if (late.uptime_s < options_.min_judged_lifetime_s) {
      std::printf("collector memory: not judged (longest lifetime %.0f s < %.0f s)\n", late.uptime_s,
                  options_.min_judged_lifetime_s);
      return true;
    }
    const double growth_mib = (late.rss_kib - at(late.uptime_s / 2).rss_kib) / 1024.0;
    const bool flat = growth_mib <= options_.max_rss_growth_mib;
    std::printf("collector memory flat over the second half of its longest lifetime: %s (%+.1f MiB, at most %+.1f)\n",
                flat ? "yes" : "NO", growth_mib, options_.max_rss_growth_mib);
    return flat;
  }

  Options options_;
  std::unique_ptr<testing::TempDir> temp_;
  std::string address_;
  double t0_ = 0;
  double next_sample_s_ = 0;
  std::unique_ptr<Subprocess> collector_;
  std::vector<std::unique_ptr<Subprocess>> agents_;
  std::vector<std::unique_ptr<Subprocess>> ranks_;
  std::vector<Lifetime> lifetimes_;
};

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--ranks") options.ranks = std::atoi(value);
    else if (flag == "--seconds") options.seconds = std::atof(value);
    else if (flag == "--seed") options.seed = std::strtoull(value, nullptr, 10);
    else if (flag == "--nodes") options.nodes = std::atoi(value);
    else if (flag == "--steps-per-second") options.steps_per_second = std::atof(value);
    else if (flag == "--collector-kills") options.collector_kills = std::atoi(value);
    else if (flag == "--agent-kills") options.agent_kills = std::atoi(value);
    else if (flag == "--sample-every") options.sample_every_s = std::atof(value);
    else if (flag == "--max-rss-growth-mib") options.max_rss_growth_mib = std::atof(value);
    else if (flag == "--stuck-after") options.stuck_after_s = std::atof(value);
    else if (flag == "--dir") options.dir = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0 || options.ranks < 2 || options.nodes < 1 || options.nodes > options.ranks ||
      options.seconds <= 0 || options.steps_per_second <= 0) {
    std::fprintf(stderr,
                 "usage: %s [--ranks 64] [--seconds 600] [--seed 1] [--nodes 4] [--steps-per-second 30] "
                 "[--collector-kills 3] [--agent-kills SECONDS/20] [--sample-every 5] [--max-rss-growth-mib 16] "
                 "[--stuck-after 30] [--dir DIR]\n",
                 argv[0]);
    return 2;
  }
  return Soak(options).Run();
}

}  // namespace
}  // namespace collwatch

int main(int argc, char** argv) { return collwatch::Main(argc, argv); }
