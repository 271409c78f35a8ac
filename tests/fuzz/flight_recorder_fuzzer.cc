// libFuzzer entry point for the Flight Recorder dump reader (pickle and JSON) and the
// import's conversion: any input must decode or fail with a message, never crash, hang or
// allocate without bound; a dump that decodes must convert into records a trace store
// takes (indexes increasing, every return and completion naming an enter before it).
// Build: the fuzz preset (cmake/CollwatchFuzzing.cmake).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "flight_recorder/dump.h"
#include "flight_recorder/trace_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace collwatch::flight_recorder;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<FlightRecorderDump> dump = ParseDump(bytes);
  if (!dump.ok()) {
    if (dump.status().message().empty()) std::abort();
    return 0;
  }
  const Conversion conversion = ConvertDumps({RankDump{"fuzz/nccl_trace_rank_0", 0, *std::move(dump)}}, "fuzz");
  for (const auto& batch : conversion.ranks) {
    uint64_t next = 0;
    for (const auto& event : batch.events()) {
      if (event.index() < next) std::abort();
      if (event.kind() != collwatch::v1::EVENT_KIND_ENTER && event.ref_index() >= event.index()) std::abort();
      next = event.index() + 1;
    }
  }
  return 0;
}
