// What a Flight Recorder dump holds once decoded, pickle or JSON alike: a tree of plain
// values (none, bools, integers, floats, strings, lists, tuples, dicts) in one arena,
// children by index: a value shared through the pickle's memo is stored once, and a
// pickle that makes a list hold itself leaks nothing. Readers walk a fixed schema from
// the root, never the whole tree (it may have cycles). Threading: none.
#ifndef COLLWATCH_FLIGHT_RECORDER_PLAIN_VALUE_H_
#define COLLWATCH_FLIGHT_RECORDER_PLAIN_VALUE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace collwatch::flight_recorder {

using ValueId = uint32_t;

struct PlainValue {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;                               // kString (UTF-8 or raw bytes)
  std::vector<ValueId> items;                     // kList, kTuple
  std::vector<std::pair<ValueId, ValueId>> pairs;  // kDict, in insertion order
};

// The values of one decoded document; `root` is the document.
class PlainTree {
 public:
  ValueId Add(PlainValue value) {
    values_.push_back(std::move(value));
    return static_cast<ValueId>(values_.size() - 1);
  }
  PlainValue& at(ValueId id) { return values_[id]; }
  const PlainValue& at(ValueId id) const { return values_[id]; }
  size_t size() const { return values_.size(); }
  ValueId root = 0;

  // The value of `dict`'s string key `key` (nullptr: `dict` is no dict, or has no such key).
  const PlainValue* Find(const PlainValue& dict, std::string_view key) const {
    if (dict.kind != PlainValue::Kind::kDict) return nullptr;
    for (const auto& [k, v] : dict.pairs) {
      const PlainValue& name = values_[k];
      if (name.kind == PlainValue::Kind::kString && name.text == key) return &values_[v];
    }
    return nullptr;
  }

 private:
  std::vector<PlainValue> values_;
};

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_PLAIN_VALUE_H_
