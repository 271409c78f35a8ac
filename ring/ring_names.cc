// Names of ring enumerations. Values follow ring_format.h and nccl.h.
#include "ring/ring_names.h"

namespace collwatch {

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

const char* ApiFnName(ring::ApiFn fn) {
  using ring::ApiFn;
  switch (fn) {
    case ApiFn::kNone: return "None";
    case ApiFn::kAllReduce: return "AllReduce";
    case ApiFn::kBroadcast: return "Broadcast";
    case ApiFn::kBcast: return "Bcast";
    case ApiFn::kReduce: return "Reduce";
    case ApiFn::kAllGather: return "AllGather";
    case ApiFn::kReduceScatter: return "ReduceScatter";
    case ApiFn::kAlltoAll: return "AlltoAll";
    case ApiFn::kGather: return "Gather";
    case ApiFn::kScatter: return "Scatter";
    case ApiFn::kSend: return "Send";
    case ApiFn::kRecv: return "Recv";
    case ApiFn::kGroupStart: return "GroupStart";
    case ApiFn::kGroupEnd: return "GroupEnd";
    case ApiFn::kGroupSimulateEnd: return "GroupSimulateEnd";
    case ApiFn::kCommInitRank: return "CommInitRank";
    case ApiFn::kCommInitRankConfig: return "CommInitRankConfig";
    case ApiFn::kCommInitAll: return "CommInitAll";
    case ApiFn::kCommInitRankScalable: return "CommInitRankScalable";
    case ApiFn::kCommSplit: return "CommSplit";
    case ApiFn::kCommShrink: return "CommShrink";
    case ApiFn::kCommFinalize: return "CommFinalize";
    case ApiFn::kCommDestroy: return "CommDestroy";
    case ApiFn::kCommAbort: return "CommAbort";
    case ApiFn::kCommRevoke: return "CommRevoke";
    case ApiFn::kCommGetAsyncError: return "CommGetAsyncError";
    case ApiFn::kGetVersion: return "GetVersion";
    case ApiFn::kGetUniqueId: return "GetUniqueId";
    case ApiFn::kGetErrorString: return "GetErrorString";
  }
  return "Unknown";
}

namespace {
struct DtypeInfo {
  const char* name;
  int bytes;
};
// Indexed by ncclDataType_t.
constexpr DtypeInfo kDtypes[] = {
    {"int8", 1},    {"uint8", 1},   {"int32", 4},    {"uint32", 4},
    {"int64", 8},   {"uint64", 8},  {"float16", 2},  {"float32", 4},
    {"float64", 8}, {"bfloat16", 2}, {"float8e4m3", 1}, {"float8e5m2", 1},
};
constexpr int kDtypeCount = sizeof kDtypes / sizeof kDtypes[0];
}  // namespace

const char* DtypeName(uint8_t dtype) {
  if (dtype == ring::kNoDtype) return "";
  return dtype < kDtypeCount ? kDtypes[dtype].name : "unknown";
}

int DtypeBytes(uint8_t dtype) { return dtype < kDtypeCount ? kDtypes[dtype].bytes : 0; }

std::string RedOpName(int32_t redop) {
  static constexpr const char* kBuiltin[] = {"sum", "prod", "max", "min", "avg"};
  if (redop == ring::kUnset) return "";
  if (redop >= 0 && redop < 5) return kBuiltin[redop];
  return "premulsum#" + std::to_string(redop);  // ops created by ncclRedOpCreatePreMulSum
}

std::string FlagNames(uint8_t flags) {
  static constexpr struct {
    uint8_t bit;
    const char* name;
  } kFlags[] = {{ring::kFlagCaptured, "captured"},
                {ring::kFlagCompletesAtReturn, "completes_at_return"},
                {ring::kFlagUnknownComm, "unknown_comm"},
                {ring::kFlagNoCompletion, "no_completion"},
                {ring::kFlagReturnedWithinTick, "returned_within_tick"}};
  std::string names;
  for (const auto& flag : kFlags) {
    if ((flags & flag.bit) == 0) continue;
    if (!names.empty()) names += '|';
    names += flag.name;
  }
  return names;
}

}  // namespace collwatch
