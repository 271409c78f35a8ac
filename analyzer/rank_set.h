// A set of ranks, compressed (CRoaring): the members of a rank class of a 131,072-rank job
// take kilobytes, not a vector of every member, and two sets merge in one pass. What the
// tree's digests (comm_digest.h) carry for each class and each step of progress.
// Threading: a plain value.
#ifndef COLLWATCH_ANALYZER_RANK_SET_H_
#define COLLWATCH_ANALYZER_RANK_SET_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "roaring/roaring.hh"

namespace collwatch::analyzer {

class RankSet {
 public:
  RankSet() = default;
  RankSet(std::initializer_list<int32_t> ranks);
  static RankSet Range(int32_t first, int32_t end);  // [first, end)

  void Add(int32_t rank) { bits_.add(static_cast<uint32_t>(rank)); }
  void AddRange(int32_t first, int32_t end);  // [first, end)
  void Merge(const RankSet& other) { bits_ |= other.bits_; }  // union
  void Remove(const RankSet& other) { bits_ -= other.bits_; }  // difference
  RankSet Common(const RankSet& other) const;  // intersection

  bool Contains(int32_t rank) const { return bits_.contains(static_cast<uint32_t>(rank)); }
  bool empty() const { return bits_.isEmpty(); }
  uint64_t size() const { return bits_.cardinality(); }
  int32_t lowest() const { return static_cast<int32_t>(bits_.minimum()); }  // not for an empty set
  int32_t highest() const { return static_cast<int32_t>(bits_.maximum()); }
  std::vector<int32_t> ToVector() const;
  bool operator==(const RankSet& other) const { return bits_ == other.bits_; }

  // CRoaring's portable format, runs compressed: what travels up the tree.
  std::string Serialize() const;
  // nullopt: not a rank set in that format, or one holding a rank at or past `nranks`.
  static std::optional<RankSet> Parse(std::string_view bytes, int32_t nranks);

 private:
  Roaring bits_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_RANK_SET_H_
