// RankSet over CRoaring, whose C++ wrapper throws where it cannot allocate or parse: parsing
// goes through the C call, which says so with a null instead.
#include "analyzer/rank_set.h"

#include <algorithm>

namespace collwatch::analyzer {

RankSet::RankSet(std::initializer_list<int32_t> ranks) {
  for (const int32_t rank : ranks) Add(rank);
}

RankSet RankSet::Range(int32_t first, int32_t end) {
  RankSet set;
  set.AddRange(first, end);
  return set;
}

void RankSet::AddRange(int32_t first, int32_t end) {
  if (end > first) bits_.addRange(static_cast<uint64_t>(first), static_cast<uint64_t>(end));
}

RankSet RankSet::Common(const RankSet& other) const {
  RankSet common;
  common.bits_ = bits_ & other.bits_;
  return common;
}

std::vector<int32_t> RankSet::ToVector() const {
  std::vector<uint32_t> members(bits_.cardinality());
  bits_.toUint32Array(members.data());
  return std::vector<int32_t>(members.begin(), members.end());
}

std::string RankSet::Serialize() const {
  Roaring compact = bits_;
  compact.runOptimize();
  std::string bytes(compact.getSizeInBytes(/*portable=*/true), '\0');
  bytes.resize(compact.write(bytes.data(), /*portable=*/true));
  return bytes;
}

std::optional<RankSet> RankSet::Parse(std::string_view bytes, int32_t nranks) {
  if (bytes.empty()) return std::nullopt;
  roaring_bitmap_t* parsed = roaring_bitmap_portable_deserialize_safe(bytes.data(), bytes.size());
  if (parsed == nullptr) return std::nullopt;
  // The format does not say how long it is: bytes past its end are not ours to drop silently.
  const bool whole = roaring_bitmap_portable_size_in_bytes(parsed) == bytes.size();
  RankSet set;
  set.bits_ = Roaring(parsed);  // takes it over
  if (!whole || (!set.empty() && (nranks <= 0 || set.highest() >= nranks))) return std::nullopt;
  return set;
}

}  // namespace collwatch::analyzer
