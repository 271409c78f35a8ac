// libFuzzer target: what the collector does with the messages agents send, without the
// network: each message parsed from arbitrary bytes as gRPC would, then the service's
// own EventIngest (hello, validation, store append, live state, online analysis), the
// analysis ticks, the Watch snapshot and the report. Never a crash; whatever the
// collector stored reads back.
// Input: messages, each [u8 stream (low 2 bits: one of 4 concurrent streams)][u16 length,
// little endian][that many bytes, a serialized StreamEventsRequest]; the last one takes
// what is left. A stream that ended with an error is replaced by a new one (the agent
// reconnects).
// Build and run: the fuzz preset, scripts/fuzz.sh, docs/fuzzing.md.
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "cli/analyze_command.h"
#include "collector/collector_service.h"
#include "collector/event_ingest.h"
#include "ring/clocks.h"
#include "store/trace_store.h"
#include "tests/fuzz/fuzz_support.h"

namespace collwatch {
namespace {

// A fresh, empty collector folder for each input.
class ScratchOut {
 public:
  std::string Fresh() const {
    const std::string out = scratch_.root() + "/out";
    std::error_code error;
    std::filesystem::remove_all(out, error);
    return out;
  }

 private:
  fuzz::ScratchDir scratch_{"ingest"};
};

void IngestAll(CollectorService* service, const uint8_t* data, size_t size) {
  std::array<std::unique_ptr<EventIngest>, 4> streams;
  size_t offset = 0;
  while (offset < size) {
    const size_t stream = data[offset] & 3;
    size_t length = size - offset - 1;
    if (length >= 2) {
      length = std::min<size_t>(length - 2, static_cast<size_t>(data[offset + 1]) | (data[offset + 2] << 8));
      offset += 3;
    } else {
      offset += 1;
    }
    v1::StreamEventsRequest request;
    const bool parsed = request.ParseFromArray(data + offset, static_cast<int>(length));
    offset += length;
    if (streams[stream] == nullptr) streams[stream] = std::make_unique<EventIngest>(service);
    // gRPC ends a call whose message does not parse, as the service ends one it refuses.
    if (!parsed || !streams[stream]->Accept(request).ok()) {
      streams[stream]->Close();
      streams[stream] = nullptr;
    }
  }
  for (auto& stream : streams) {
    if (stream != nullptr) stream->Close();
  }
}

}  // namespace
}  // namespace collwatch

// Protobuf logs each string that is not UTF-8; the fuzzer makes thousands a second.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace collwatch;
  static ScratchOut scratch;
  const std::string out = scratch.Fresh();
  CollectorOptions options;
  options.out_dir = out;
  options.log = false;
  options.analyze = true;
  // The service's analysis thread sleeps through the input; the ticks below analyse,
  // in this thread, so that a run depends on its input only.
  options.analyze_interval_s = 1e6;
  options.analyzer.stall_after_s = 1;
  std::string job;
  {
    CollectorService service(options);
    IngestAll(&service, data, size);
    const int64_t now = static_cast<int64_t>(RealtimeNs());
    (void)service.online_analyzer().Tick(now);
    (void)service.online_analyzer().Tick(now + 3'600'000'000'000, /*final_pass=*/true);
    job = service.job();
    (void)service.live_state().Snapshot(job);
    (void)service.live_state().Summary();
    (void)service.WriteReport(out);
    service.StopAnalysis();
  }
  if (job.empty()) return 0;
  // Every trace the collector wrote reads back whole.
  for (const std::string& trace : ListRankTraces(out, job)) {
    auto reader = RankTraceReader::Open(trace);
    if (!reader.ok() || !(*reader)->ReadAll().ok()) std::abort();
  }
  std::ostringstream report;
  AnalyzeOptions analyze;
  analyze.path = out;
  (void)RunAnalyzeCommand(analyze, report, report);
  return 0;
}
