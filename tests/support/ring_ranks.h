// Test-only: the rings of a multi-process test program's ranks read back, keyed by the
// RANK each ring's header recorded, with helpers to pick records. Header-only (the tests
// that include it link collwatch::ring).
#ifndef COLLWATCH_TESTS_SUPPORT_RING_RANKS_H_
#define COLLWATCH_TESTS_SUPPORT_RING_RANKS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "ring/ring_names.h"
#include "ring/ring_reader.h"

namespace collwatch::testing {

struct RankTrace {
  RingIdentity identity;
  std::vector<IndexedRecord> records;
  std::unique_ptr<RingReader> reader;

  std::vector<ring::Record> OfKind(ring::RecordKind kind) const {
    std::vector<ring::Record> out;
    for (const IndexedRecord& item : records) {
      if (item.record.kind == static_cast<uint16_t>(kind)) out.push_back(item.record);
    }
    return out;
  }
};

// Reads every ring of `dir`, keyed by the RANK recorded in its header.
inline std::map<int, RankTrace> ReadRanks(const std::string& dir, bool writers_gone) {
  std::map<int, RankTrace> ranks;
  auto paths = ListRingFiles(dir);
  if (!paths.ok()) return ranks;
  for (const std::string& path : *paths) {
    auto reader = RingReader::Open(path);
    // A live rank may still be creating its ring; a finished one must have it complete.
    if (!writers_gone && absl::IsUnavailable(reader.status())) continue;
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) continue;
    RankTrace trace;
    trace.identity = (*reader)->identity();
    trace.records = (*reader)->ReadAll(writers_gone).records;
    trace.reader = *std::move(reader);
    ranks[trace.identity.rank] = std::move(trace);
  }
  return ranks;
}

// The ops of a rank's enter records, in ring order ("all-reduce", ...).
inline std::vector<std::string> EnterNames(const RankTrace& trace) {
  std::vector<std::string> names;
  for (const ring::Record& record : trace.OfKind(ring::RecordKind::kEnter)) {
    names.emplace_back(OpName(static_cast<ring::ApiFn>(record.fn)));
  }
  return names;
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_RING_RANKS_H_
