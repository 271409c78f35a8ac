// A SyntheticJob's processes written as a trace store, as the collector writes one
// (store/trace_store.h: OUT/<job>/<rank trace>/trace.cwlog), in batches: the input of the
// export's end-to-end tests and of bench/export_memory.cc, which needs stores of millions
// of calls and so never holds them. Threading: single-threaded.
#ifndef COLLWATCH_TESTS_SUPPORT_SYNTHETIC_STORE_H_
#define COLLWATCH_TESTS_SUPPORT_SYNTHETIC_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "analyzer/synthetic_job.h"
#include "proto/collwatch.pb.h"
#include "store/trace_store.h"

namespace collwatch::testing {

class SyntheticStore final : public analyzer::SyntheticSink {
 public:
  // Traces of job `job` under the output folder `out_dir`. Each process's writer clock is
  // CLOCK_REALTIME (SyntheticJob's), so its identity pairs the two clocks at one value.
  SyntheticStore(std::string out_dir, std::string job) : out_dir_(std::move(out_dir)), job_(std::move(job)) {}

  analyzer::ProcessId AddProcess(const ProcessInfo& info) override;
  void AddRegionName(analyzer::ProcessId process, uint32_t writer_id, std::string_view name) override;
  void AddCallPath(analyzer::ProcessId process, uint32_t writer_id, const CallPath& path) override;
  void AddRecord(analyzer::ProcessId process, uint32_t lane, uint64_t index, const ring::Record& record) override;

  // Writes what is buffered, with `status` as every process's last word. The first error
  // of any write so far, else OK.
  absl::Status Finish(v1::WriterStatus status = v1::WRITER_STATUS_EXITED);
  uint64_t events_written() const { return events_written_; }

 private:
  struct Rank {
    std::unique_ptr<RankTraceWriter> writer;
    v1::StreamEventsRequest batch;
  };
  void Flush(Rank& rank);

  std::string out_dir_;
  std::string job_;
  std::vector<Rank> ranks_;
  absl::Status error_;
  uint64_t events_written_ = 0;
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_SYNTHETIC_STORE_H_
