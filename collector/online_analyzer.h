// The analyzer run online inside the collector: fed every accepted batch (duplicates
// already stored are skipped by lane position, as the store does), ticked a few times a
// second, its findings published to the live state (Watch) and to `collwatch run`.
// Threading: thread-safe (one mutex); Feed runs on gRPC threads, Tick on the collector's
// analysis thread.
#ifndef COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_
#define COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

class OnlineAnalyzer {
 public:
  explicit OnlineAnalyzer(const analyzer::AnalyzerOptions& options) : analyzer_(options) {}

  void StreamOpened(const std::string& key, const v1::RankIdentity& identity);
  // An accepted batch of the stream `key`.
  void Feed(const std::string& key, const v1::StreamEventsRequest& batch);
  // Analyses up to `now_ns` (CLOCK_REALTIME); returns the findings that are new.
  std::vector<analyzer::Finding> Tick(int64_t now_ns, bool final_pass = false);
  // Stops analysing: what happens next (e.g. `collwatch run` killing a hung job) is
  // not the job's doing and must not become findings.
  void Freeze();

  std::vector<analyzer::Finding> Findings();
  analyzer::ReportInfo Info(const std::string& job);

 private:
  struct Stream {
    analyzer::ProcessId process = 0;
    int64_t realtime_offset_ns = 0;
    std::map<uint32_t, uint64_t> next_position;  // lane -> first position not fed
  };
  std::mutex mutex_;
  analyzer::Analyzer analyzer_;
  std::map<std::string, Stream> streams_;
  bool frozen_ = false;
};

void FindingToProto(const analyzer::Finding& finding, v1::Finding* out);

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_
