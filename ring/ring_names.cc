// The name table of ring enumerations. Values follow ring_format.h and nccl.h.
// Threading: constant tables and pure functions.
#include "ring/ring_names.h"

#include <charconv>
#include <iterator>
#include <limits>

namespace collwatch {
namespace {

using ring::ApiFn;

struct OpEntry {
  ApiFn fn;
  std::string_view name;
};
constexpr OpEntry kOps[] = {
    {ApiFn::kNone, "none"},
    {ApiFn::kAllReduce, "all-reduce"},
    {ApiFn::kBroadcast, "broadcast"},
    {ApiFn::kBcast, "bcast"},
    {ApiFn::kReduce, "reduce"},
    {ApiFn::kAllGather, "all-gather"},
    {ApiFn::kReduceScatter, "reduce-scatter"},
    {ApiFn::kAlltoAll, "all-to-all"},
    {ApiFn::kGather, "gather"},
    {ApiFn::kScatter, "scatter"},
    {ApiFn::kSend, "send"},
    {ApiFn::kRecv, "recv"},
    {ApiFn::kGroupStart, "group-start"},
    {ApiFn::kGroupEnd, "group-end"},
    {ApiFn::kGroupSimulateEnd, "group-simulate-end"},
    {ApiFn::kCommInitRank, "comm-init-rank"},
    {ApiFn::kCommInitRankConfig, "comm-init-rank-config"},
    {ApiFn::kCommInitAll, "comm-init-all"},
    {ApiFn::kCommInitRankScalable, "comm-init-rank-scalable"},
    {ApiFn::kCommSplit, "comm-split"},
    {ApiFn::kCommShrink, "comm-shrink"},
    {ApiFn::kCommFinalize, "comm-finalize"},
    {ApiFn::kCommDestroy, "comm-destroy"},
    {ApiFn::kCommAbort, "comm-abort"},
    {ApiFn::kCommRevoke, "comm-revoke"},
    {ApiFn::kCommGetAsyncError, "comm-get-async-error"},
    {ApiFn::kGetVersion, "get-version"},
    {ApiFn::kGetUniqueId, "get-unique-id"},
    {ApiFn::kGetErrorString, "get-error-string"},
};

struct DtypeEntry {
  std::string_view name;
  int bytes;
};
// Indexed by ncclDataType_t.
constexpr DtypeEntry kDtypes[] = {
    {"int8", 1},    {"uint8", 1},    {"int32", 4},      {"uint32", 4},
    {"int64", 8},   {"uint64", 8},   {"float16", 2},    {"float32", 4},
    {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1},
};
constexpr std::string_view kNoValueName = "none";
constexpr std::string_view kDtypePrefix = "dtype=";
constexpr std::string_view kRedOpPrefix = "redop=";

// Indexed by ncclRedOp_t.
constexpr std::string_view kBuiltinRedOps[] = {"sum", "prod", "max", "min", "avg"};

// A non-negative decimal number no larger than `max`, the whole of `text`.
std::optional<int64_t> ParseCount(std::string_view text, int64_t max) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

const char* RecordKindName(ring::RecordKind kind) {
  switch (kind) {
    case ring::RecordKind::kEmpty: return "empty";
    case ring::RecordKind::kEnter: return "enter";
    case ring::RecordKind::kReturn: return "return";
    case ring::RecordKind::kComplete: return "complete";
    case ring::RecordKind::kAsyncError: return "async_error";
  }
  return "unknown";
}

std::string_view OpName(ApiFn fn) {
  for (const OpEntry& entry : kOps) {
    if (entry.fn == fn) return entry.name;
  }
  return "unknown";
}

std::optional<ApiFn> OpByName(std::string_view name) {
  for (const OpEntry& entry : kOps) {
    if (entry.name == name) return entry.fn;
  }
  return std::nullopt;
}

std::string DtypeName(uint8_t dtype) {
  if (dtype == ring::kNoDtype) return std::string(kNoValueName);
  if (dtype < std::size(kDtypes)) return std::string(kDtypes[dtype].name);
  return std::string(kDtypePrefix) + std::to_string(dtype);
}

std::optional<uint8_t> DtypeByName(std::string_view name) {
  if (name == kNoValueName) return ring::kNoDtype;
  for (size_t i = 0; i < std::size(kDtypes); ++i) {
    if (kDtypes[i].name == name) return static_cast<uint8_t>(i);
  }
  if (!name.starts_with(kDtypePrefix)) return std::nullopt;
  // Only values without a name of their own, so that each value has one spelling.
  const std::optional<int64_t> value = ParseCount(name.substr(kDtypePrefix.size()), ring::kNoDtype - 1);
  if (!value || *value < static_cast<int64_t>(std::size(kDtypes))) return std::nullopt;
  return static_cast<uint8_t>(*value);
}

int DtypeBytes(uint8_t dtype) { return dtype < std::size(kDtypes) ? kDtypes[dtype].bytes : 0; }

std::string RedOpName(int32_t redop) {
  if (redop == ring::kUnset) return std::string(kNoValueName);
  if (redop >= 0 && static_cast<size_t>(redop) < std::size(kBuiltinRedOps)) return std::string(kBuiltinRedOps[redop]);
  return std::string(kRedOpPrefix) + std::to_string(redop);
}

std::optional<int32_t> RedOpByName(std::string_view name) {
  if (name == kNoValueName) return ring::kUnset;
  for (size_t i = 0; i < std::size(kBuiltinRedOps); ++i) {
    if (kBuiltinRedOps[i] == name) return static_cast<int32_t>(i);
  }
  if (!name.starts_with(kRedOpPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kRedOpPrefix.size());
  int32_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  // Values with a name of their own have only that spelling.
  if (value == ring::kUnset || (value >= 0 && static_cast<size_t>(value) < std::size(kBuiltinRedOps))) {
    return std::nullopt;
  }
  return value;
}

std::string FlagNames(uint8_t flags) {
  static constexpr struct {
    uint8_t bit;
    const char* name;
  } kFlags[] = {{ring::kFlagCaptured, "captured"},
                {ring::kFlagCompletesAtReturn, "completes_at_return"},
                {ring::kFlagUnknownComm, "unknown_comm"},
                {ring::kFlagNoCompletion, "no_completion"},
                {ring::kFlagReturnedWithinTick, "returned_within_tick"},
                {ring::kFlagReplay, "replay"}};
  std::string names;
  for (const auto& flag : kFlags) {
    if ((flags & flag.bit) == 0) continue;
    if (!names.empty()) names += '|';
    names += flag.name;
  }
  return names;
}

}  // namespace collwatch
