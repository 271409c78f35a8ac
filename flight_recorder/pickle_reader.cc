// The pickle machine: opcodes as pickletools documents them, values into a PlainTree.
#include "flight_recorder/pickle_reader.h"

#include <cstring>
#include <optional>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch::flight_recorder {
namespace {

using Kind = PlainValue::Kind;

// What a stack slot holds: a value, a MARK, or one of the few callables a FR pickle may
// name (torch.jit._pickle's list builders return their list; restore_type_tag its value).
struct Slot {
  enum class Type : uint8_t { kValue, kMark, kListBuilder, kTypeTag };
  Type type = Type::kValue;
  ValueId id = 0;
};

class Machine {
 public:
  explicit Machine(std::string_view bytes) : in_(bytes) {}

  absl::StatusOr<PlainTree> Run() {
    while (true) {
      if (pos_ >= in_.size()) return Fail("the pickle ends before its STOP opcode (truncated)");
      const size_t at = pos_;
      const auto op = static_cast<uint8_t>(in_[pos_++]);
      absl::Status status = Step(op, at);
      if (!status.ok()) return status;
      if (stopped_) break;
    }
    if (stack_.size() != 1 || stack_[0].type != Slot::Type::kValue) {
      return Fail("the pickle's STOP leaves no single value");
    }
    tree_.root = stack_[0].id;
    return std::move(tree_);
  }

 private:
  absl::Status Fail(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("pickle: ", std::string(what), " (byte ", op_at_, ")"));
  }

  bool Take(size_t n, std::string_view* out) {
    if (in_.size() - pos_ < n) return false;
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool TakeLittle(T* out) {  // unsigned little-endian
    std::string_view raw;
    if (!Take(sizeof(T), &raw)) return false;
    T value = 0;
    for (size_t i = sizeof(T); i-- > 0;) value = static_cast<T>((value << 8) | static_cast<uint8_t>(raw[i]));
    *out = value;
    return true;
  }
  bool TakeLine(std::string_view* out) {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return false;
    *out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }

  ValueId Push(PlainValue value) {
    const ValueId id = tree_.Add(std::move(value));
    stack_.push_back(Slot{Slot::Type::kValue, id});
    return id;
  }
  absl::Status PushInt(int64_t v) {
    PlainValue value;
    value.kind = Kind::kInt;
    value.integer = v;
    Push(std::move(value));
    return absl::OkStatus();
  }
  absl::Status PushString(std::string_view text) {
    PlainValue value;
    value.kind = Kind::kString;
    value.text = std::string(text);
    Push(std::move(value));
    return absl::OkStatus();
  }
  absl::Status PushSized(int length_bytes) {  // a string or bytes whose length comes first
    uint64_t length = 0;
    bool ok = false;
    if (length_bytes == 1) {
      uint8_t n = 0;
      ok = TakeLittle(&n);
      length = n;
    } else if (length_bytes == 4) {
      uint32_t n = 0;
      ok = TakeLittle(&n);
      length = n;
    } else {
      ok = TakeLittle(&length);
    }
    std::string_view text;
    if (!ok || length > in_.size() - pos_ || !Take(static_cast<size_t>(length), &text)) {
      return Fail("a string runs past the end (truncated)");
    }
    return PushString(text);
  }
  absl::Status PushEmpty(Kind kind) {
    PlainValue value;
    value.kind = kind;
    Push(std::move(value));
    return absl::OkStatus();
  }

  // The values above the topmost MARK, which is removed.
  absl::StatusOr<std::vector<ValueId>> PopToMark() {
    size_t mark = stack_.size();
    while (mark > 0 && stack_[mark - 1].type != Slot::Type::kMark) --mark;
    if (mark == 0) return Fail("no MARK to pop to");
    std::vector<ValueId> items;
    for (size_t i = mark; i < stack_.size(); ++i) {
      if (stack_[i].type != Slot::Type::kValue) return Fail("a callable where a value belongs");
      items.push_back(stack_[i].id);
    }
    stack_.resize(mark - 1);
    return items;
  }
  absl::StatusOr<ValueId> PopValue() {
    if (stack_.empty() || stack_.back().type != Slot::Type::kValue) return Fail("a value was expected on the stack");
    const ValueId id = stack_.back().id;
    stack_.pop_back();
    return id;
  }
  // The value `depth` below the top, which must be of `kind`.
  absl::StatusOr<ValueId> Container(size_t depth, Kind kind) {
    if (stack_.size() <= depth) return Fail("the stack is too short");
    const Slot& slot = stack_[stack_.size() - 1 - depth];
    if (slot.type != Slot::Type::kValue || tree_.at(slot.id).kind != kind) {
      return Fail(kind == Kind::kList ? "items appended to something not a list" : "items set on something not a dict");
    }
    return slot.id;
  }
  absl::Status Extend(ValueId list, const std::vector<ValueId>& items) {
    std::vector<ValueId>& into = tree_.at(list).items;
    into.insert(into.end(), items.begin(), items.end());
    return absl::OkStatus();
  }
  absl::Status SetPairs(ValueId dict, const std::vector<ValueId>& items) {
    if (items.size() % 2 != 0) return Fail("a dict is given an odd number of keys and values");
    auto& pairs = tree_.at(dict).pairs;
    for (size_t i = 0; i < items.size(); i += 2) pairs.emplace_back(items[i], items[i + 1]);
    return absl::OkStatus();
  }
  absl::Status MakeTuple(std::vector<ValueId> items) {
    PlainValue value;
    value.kind = Kind::kTuple;
    value.items = std::move(items);
    Push(std::move(value));
    return absl::OkStatus();
  }
  absl::Status Memo(uint64_t index) {
    if (stack_.empty() || stack_.back().type != Slot::Type::kValue) return Fail("memo put of no value");
    memo_[index] = stack_.back().id;
    return absl::OkStatus();
  }
  absl::Status Recall(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Fail(absl::StrCat("memo get of entry ", index, ", never put"));
    stack_.push_back(Slot{Slot::Type::kValue, it->second});
    return absl::OkStatus();
  }
  absl::Status Global(std::string_view module, std::string_view name) {
    if (module == "torch.jit._pickle" && (name == "build_intlist" || name == "build_doublelist" ||
                                          name == "build_boollist" || name == "build_strlist")) {
      stack_.push_back(Slot{Slot::Type::kListBuilder, 0});
      return absl::OkStatus();
    }
    if (module == "torch.jit._pickle" && name == "restore_type_tag") {
      stack_.push_back(Slot{Slot::Type::kTypeTag, 0});
      return absl::OkStatus();
    }
    return Fail(absl::StrCat("it refers to the Python object ", std::string(module.substr(0, 80)), ".",
                             std::string(name.substr(0, 80)),
                             ": not a Flight Recorder dump (which holds plain values only)"));
  }
  absl::Status Reduce() {
    absl::StatusOr<ValueId> args = PopValue();
    if (!args.ok()) return args.status();
    if (stack_.empty() || stack_.back().type == Slot::Type::kValue || stack_.back().type == Slot::Type::kMark) {
      return Fail("REDUCE of something not callable");
    }
    stack_.pop_back();
    const PlainValue& tuple = tree_.at(*args);
    if (tuple.kind != Kind::kTuple || tuple.items.empty()) return Fail("REDUCE without an argument tuple");
    // Either callable's result is its first argument: the list built, or the value tagged.
    stack_.push_back(Slot{Slot::Type::kValue, tuple.items[0]});
    return absl::OkStatus();
  }
  absl::Status IntFromText(std::string_view line, bool is_long) {
    if (is_long && !line.empty() && line.back() == 'L') line.remove_suffix(1);
    if (!is_long && line == "01") return PushBool(true);
    if (!is_long && line == "00") return PushBool(false);
    int64_t v = 0;
    if (!absl::SimpleAtoi(std::string(line), &v)) return Fail("an integer that is not a 64-bit decimal");
    return PushInt(v);
  }
  absl::Status PushBool(bool b) {
    PlainValue value;
    value.kind = Kind::kBool;
    value.boolean = b;
    Push(std::move(value));
    return absl::OkStatus();
  }
  absl::Status PushLong(int length_bytes) {  // LONG1 / LONG4: little-endian two's complement
    uint32_t length = 0;
    if (length_bytes == 1) {
      uint8_t n = 0;
      if (!TakeLittle(&n)) return Fail("truncated integer");
      length = n;
    } else if (!TakeLittle(&length)) {
      return Fail("truncated integer");
    }
    if (length > 8) return Fail("an integer wider than 64 bits");
    std::string_view raw;
    if (!Take(length, &raw)) return Fail("truncated integer");
    uint64_t bits = 0;
    for (size_t i = raw.size(); i-- > 0;) bits = (bits << 8) | static_cast<uint8_t>(raw[i]);
    if (length > 0 && length < 8 && (static_cast<uint8_t>(raw.back()) & 0x80) != 0) {
      bits |= ~uint64_t{0} << (8 * length);  // sign-extend
    }
    return PushInt(static_cast<int64_t>(bits));
  }

  absl::Status Step(uint8_t op, size_t at) {
    op_at_ = at;
    std::string_view line, raw;
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t version = 0;
        if (!TakeLittle(&version)) return Fail("truncated PROTO");
        if (version > 5) return Fail(absl::StrCat("pickle protocol ", version, " is newer than 5"));
        return absl::OkStatus();
      }
      case 0x95: {  // FRAME: a length hint only
        uint64_t length = 0;
        if (!TakeLittle(&length)) return Fail("truncated FRAME");
        return absl::OkStatus();
      }
      case '.':
        stopped_ = true;
        return absl::OkStatus();
      case '(':
        stack_.push_back(Slot{Slot::Type::kMark, 0});
        return absl::OkStatus();
      case '0':
        if (stack_.empty()) return Fail("POP of an empty stack");
        stack_.pop_back();
        return absl::OkStatus();
      case '1': {
        absl::StatusOr<std::vector<ValueId>> dropped = PopToMark();
        return dropped.status();
      }
      case '2':
        if (stack_.empty()) return Fail("DUP of an empty stack");
        stack_.push_back(stack_.back());
        return absl::OkStatus();
      case 'N':
        return PushEmpty(Kind::kNone);
      case 0x88:
        return PushBool(true);
      case 0x89:
        return PushBool(false);
      case 'I':
        if (!TakeLine(&line)) return Fail("truncated INT");
        return IntFromText(line, false);
      case 'L':
        if (!TakeLine(&line)) return Fail("truncated LONG");
        return IntFromText(line, true);
      case 'J': {
        uint32_t v = 0;
        if (!TakeLittle(&v)) return Fail("truncated BININT");
        return PushInt(static_cast<int32_t>(v));
      }
      case 'K': {
        uint8_t v = 0;
        if (!TakeLittle(&v)) return Fail("truncated BININT1");
        return PushInt(v);
      }
      case 'M': {
        uint16_t v = 0;
        if (!TakeLittle(&v)) return Fail("truncated BININT2");
        return PushInt(v);
      }
      case 0x8a:
        return PushLong(1);
      case 0x8b:
        return PushLong(4);
      case 'F': {
        if (!TakeLine(&line)) return Fail("truncated FLOAT");
        PlainValue value;
        value.kind = Kind::kFloat;
        if (!absl::SimpleAtod(std::string(line), &value.number)) return Fail("a FLOAT that is not a number");
        Push(std::move(value));
        return absl::OkStatus();
      }
      case 'G': {
        uint64_t bits = 0;
        if (!Take(8, &raw)) return Fail("truncated BINFLOAT");
        for (char c : raw) bits = (bits << 8) | static_cast<uint8_t>(c);  // big-endian
        PlainValue value;
        value.kind = Kind::kFloat;
        std::memcpy(&value.number, &bits, sizeof bits);
        Push(std::move(value));
        return absl::OkStatus();
      }
      case 'S':  // STRING: a quoted repr; its escapes are kept as written
      case 'V':  // UNICODE: raw-unicode-escape text
        if (!TakeLine(&line)) return Fail("truncated STRING");
        if (op == 'S' && line.size() >= 2 && (line.front() == '\'' || line.front() == '"') &&
            line.back() == line.front()) {
          line = line.substr(1, line.size() - 2);
        }
        return PushString(line);
      case 'T':
      case 'X':
      case 'B':
        return PushSized(4);
      case 'U':
      case 0x8c:
      case 'C':
        return PushSized(1);
      case 0x8d:
      case 0x8e:
      case 0x96:
        return PushSized(8);
      case ']':
        return PushEmpty(Kind::kList);
      case ')':
        return PushEmpty(Kind::kTuple);
      case '}':
        return PushEmpty(Kind::kDict);
      case 'l': {
        absl::StatusOr<std::vector<ValueId>> items = PopToMark();
        if (!items.ok()) return items.status();
        PlainValue value;
        value.kind = Kind::kList;
        value.items = *std::move(items);
        Push(std::move(value));
        return absl::OkStatus();
      }
      case 't': {
        absl::StatusOr<std::vector<ValueId>> items = PopToMark();
        if (!items.ok()) return items.status();
        return MakeTuple(*std::move(items));
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        if (stack_.size() < n) return Fail("a tuple of more values than the stack holds");
        std::vector<ValueId> items;
        for (size_t i = stack_.size() - n; i < stack_.size(); ++i) {
          if (stack_[i].type != Slot::Type::kValue) return Fail("a tuple of something not a value");
          items.push_back(stack_[i].id);
        }
        stack_.resize(stack_.size() - n);
        return MakeTuple(std::move(items));
      }
      case 'd': {
        absl::StatusOr<std::vector<ValueId>> items = PopToMark();
        if (!items.ok()) return items.status();
        const ValueId dict = Push(PlainValue{.kind = Kind::kDict});
        return SetPairs(dict, *items);
      }
      case 'a': {
        absl::StatusOr<ValueId> item = PopValue();
        if (!item.ok()) return item.status();
        absl::StatusOr<ValueId> list = Container(0, Kind::kList);
        if (!list.ok()) return list.status();
        return Extend(*list, {*item});
      }
      case 'e': {
        absl::StatusOr<std::vector<ValueId>> items = PopToMark();
        if (!items.ok()) return items.status();
        absl::StatusOr<ValueId> list = Container(0, Kind::kList);
        if (!list.ok()) return list.status();
        return Extend(*list, *items);
      }
      case 's': {
        absl::StatusOr<ValueId> value = PopValue();
        if (!value.ok()) return value.status();
        absl::StatusOr<ValueId> key = PopValue();
        if (!key.ok()) return key.status();
        absl::StatusOr<ValueId> dict = Container(0, Kind::kDict);
        if (!dict.ok()) return dict.status();
        return SetPairs(*dict, {*key, *value});
      }
      case 'u': {
        absl::StatusOr<std::vector<ValueId>> items = PopToMark();
        if (!items.ok()) return items.status();
        absl::StatusOr<ValueId> dict = Container(0, Kind::kDict);
        if (!dict.ok()) return dict.status();
        return SetPairs(*dict, *items);
      }
      case 'p': {
        uint64_t index = 0;
        if (!TakeLine(&line) || !absl::SimpleAtoi(std::string(line), &index)) return Fail("a PUT without its index");
        return Memo(index);
      }
      case 'q': {
        uint8_t index = 0;
        if (!TakeLittle(&index)) return Fail("truncated BINPUT");
        return Memo(index);
      }
      case 'r': {
        uint32_t index = 0;
        if (!TakeLittle(&index)) return Fail("truncated LONG_BINPUT");
        return Memo(index);
      }
      case 0x94:  // MEMOIZE: the next index
        return Memo(memo_.size());
      case 'g': {
        uint64_t index = 0;
        if (!TakeLine(&line) || !absl::SimpleAtoi(std::string(line), &index)) return Fail("a GET without its index");
        return Recall(index);
      }
      case 'h': {
        uint8_t index = 0;
        if (!TakeLittle(&index)) return Fail("truncated BINGET");
        return Recall(index);
      }
      case 'j': {
        uint32_t index = 0;
        if (!TakeLittle(&index)) return Fail("truncated LONG_BINGET");
        return Recall(index);
      }
      case 'c': {
        std::string_view module;
        if (!TakeLine(&module) || !TakeLine(&line)) return Fail("truncated GLOBAL");
        return Global(module, line);
      }
      case 0x93: {  // STACK_GLOBAL: module and name from the stack
        absl::StatusOr<ValueId> name = PopValue();
        if (!name.ok()) return name.status();
        absl::StatusOr<ValueId> module = PopValue();
        if (!module.ok()) return module.status();
        return Global(tree_.at(*module).text, tree_.at(*name).text);
      }
      case 'R':
        return Reduce();
      default:
        return Fail(absl::StrFormat("opcode 0x%02x builds Python objects beyond plain values, or is no pickle "
                                    "opcode: not a Flight Recorder dump",
                                    op));
    }
  }

  std::string_view in_;
  size_t pos_ = 0;
  size_t op_at_ = 0;
  bool stopped_ = false;
  PlainTree tree_;
  std::vector<Slot> stack_;
  std::unordered_map<uint64_t, ValueId> memo_;
};

}  // namespace

absl::StatusOr<PlainTree> ReadPickle(std::string_view bytes) { return Machine(bytes).Run(); }

}  // namespace collwatch::flight_recorder
