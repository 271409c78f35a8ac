// libFuzzer entry point for the baseline parser: any input must parse or fail with a
// message, never crash or allocate without bound; what parses must format and parse back
// to the same text, and checking a small run against it must not crash.
// Build: -DCOLLWATCH_BUILD_FUZZERS=ON with clang (see analyzer/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "analyzer/baseline.h"
#include "analyzer/schedule.h"
#include "analyzer/schedule_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace collwatch::analyzer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  OpTable table;
  absl::StatusOr<Baseline> baseline = ParseBaseline(text, &table);
  if (!baseline.ok()) {
    if (baseline.status().message().empty()) std::abort();
    return 0;
  }
  const std::string formatted = FormatBaseline(*baseline, table);
  OpTable again_table;
  absl::StatusOr<Baseline> again = ParseBaseline(formatted, &again_table);
  if (!again.ok() || FormatBaseline(*again, again_table) != formatted) std::abort();

  // A small run: one communicator of each size the baseline names (capped), each rank
  // issuing the first section's first lines.
  JobSchedule run;
  for (const BaselineComm& comm : baseline->comms) {
    CommSchedule actual;
    actual.index = comm.index;
    actual.parent = comm.parent;
    actual.size = comm.size;
    ClassSchedule everyone;
    for (int32_t rank = 0; rank < comm.size && rank < 64; ++rank) everyone.ranks.push_back(rank);
    for (const Segment& segment : comm.sections.front().segments) {
      for (size_t i = 0; i < segment.ops.size() && everyone.ops.size() < 256; ++i) everyone.ops.push_back(segment.ops[i]);
    }
    actual.classes.push_back(std::move(everyone));
    run.comms.push_back(std::move(actual));
  }
  const CheckResult result = CheckSchedule(*baseline, run, table);
  (void)CheckJunitXml(result, {"fuzz", 0, ""});
  return 0;
}
