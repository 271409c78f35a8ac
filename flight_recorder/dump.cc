// Dump decoding: bytes -> PlainTree (pickle_reader.h, or nlohmann's JSON parser) -> the
// fields of dump.h, read by name with the types each version writes.
#include "flight_recorder/dump.h"

#include <cctype>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "flight_recorder/pickle_reader.h"
#include "nlohmann/json.hpp"

namespace collwatch::flight_recorder {
namespace {

using Kind = PlainValue::Kind;

// Dumps nest five deep; anything far deeper is not one (and must not exhaust the stack).
constexpr int kMaxJsonDepth = 32;

// JSON as a PlainTree, so that both forms are read by one schema reader. Values deeper
// than kMaxJsonDepth set `too_deep` and become none.
ValueId FromJson(const nlohmann::json& json, PlainTree* tree, int depth, bool* too_deep) {
  PlainValue value;
  if (depth > kMaxJsonDepth) {
    *too_deep = true;
    return tree->Add(std::move(value));
  }
  switch (json.type()) {
    case nlohmann::json::value_t::boolean:
      value.kind = Kind::kBool;
      value.boolean = json.get<bool>();
      break;
    case nlohmann::json::value_t::number_integer:
      value.kind = Kind::kInt;
      value.integer = json.get<int64_t>();
      break;
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      value.kind = Kind::kInt;
      value.integer = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(u);
      break;
    }
    case nlohmann::json::value_t::number_float:
      value.kind = Kind::kFloat;
      value.number = json.get<double>();
      break;
    case nlohmann::json::value_t::string:
      value.kind = Kind::kString;
      value.text = json.get<std::string>();
      break;
    case nlohmann::json::value_t::array: {
      value.kind = Kind::kList;
      for (const nlohmann::json& item : json) value.items.push_back(FromJson(item, tree, depth + 1, too_deep));
      break;
    }
    case nlohmann::json::value_t::object: {
      value.kind = Kind::kDict;
      for (const auto& [key, item] : json.items()) {
        PlainValue name;
        name.kind = Kind::kString;
        name.text = key;
        const ValueId key_id = tree->Add(std::move(name));
        value.pairs.emplace_back(key_id, FromJson(item, tree, depth + 1, too_deep));
      }
      break;
    }
    default:
      break;  // null, binary, discarded: none
  }
  return tree->Add(std::move(value));
}

absl::StatusOr<PlainTree> Decode(std::string_view bytes) {
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0x80) return ReadPickle(bytes);
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return absl::InvalidArgumentError("the file is empty");
  if (bytes[first] != '{') {
    return absl::InvalidArgumentError(
        "neither a pickle (PyTorch's dump format: first byte 0x80) nor a JSON object: not a Flight Recorder dump");
  }
  const nlohmann::json json = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("JSON that does not parse (truncated?)");
  PlainTree tree;
  bool too_deep = false;
  tree.root = FromJson(json, &tree, 0, &too_deep);
  if (too_deep) return absl::InvalidArgumentError("JSON nested far deeper than any dump");
  return tree;
}

// Reads the fields of one dict, remembering the first one of a wrong type.
class Fields {
 public:
  Fields(const PlainTree& tree, const PlainValue& dict, std::string where, absl::Status* error)
      : tree_(tree), dict_(dict), where_(std::move(where)), error_(error) {}

  const PlainValue* Get(std::string_view key) const { return tree_.Find(dict_, key); }

  int64_t Int(std::string_view key, int64_t fallback = 0) {
    const PlainValue* value = Get(key);
    if (value == nullptr || value->kind == Kind::kNone) return fallback;
    if (value->kind == Kind::kInt) return value->integer;
    if (value->kind == Kind::kBool) return value->boolean ? 1 : 0;
    if (value->kind == Kind::kString) {  // pg_status in JSON; thread ids
      int64_t parsed = 0;
      if (absl::SimpleAtoi(value->text, &parsed)) return parsed;
    }
    Wrong(key, "an integer");
    return fallback;
  }
  bool Bool(std::string_view key) {
    const PlainValue* value = Get(key);
    if (value == nullptr || value->kind == Kind::kNone) return false;
    if (value->kind == Kind::kBool) return value->boolean;
    if (value->kind == Kind::kInt) return value->integer != 0;
    Wrong(key, "a bool");
    return false;
  }
  std::string String(std::string_view key) {
    const PlainValue* value = Get(key);
    if (value == nullptr || value->kind == Kind::kNone) return "";
    if (value->kind == Kind::kString) return value->text;
    Wrong(key, "a string");
    return "";
  }
  // A list or tuple (nullptr: absent or none).
  const PlainValue* Sequence(std::string_view key) {
    const PlainValue* value = Get(key);
    if (value == nullptr || value->kind == Kind::kNone) return nullptr;
    if (value->kind == Kind::kList || value->kind == Kind::kTuple) return value;
    Wrong(key, "a list");
    return nullptr;
  }
  std::vector<std::string> Strings(std::string_view key) {
    std::vector<std::string> out;
    if (const PlainValue* list = Sequence(key)) {
      for (ValueId id : list->items) {
        const PlainValue& item = tree_.at(id);
        if (item.kind != Kind::kString) return Wrong(key, "a list of strings"), std::vector<std::string>{};
        out.push_back(item.text);
      }
    }
    return out;
  }
  std::vector<std::vector<int64_t>> Shapes(std::string_view key) {
    std::vector<std::vector<int64_t>> out;
    if (const PlainValue* list = Sequence(key)) {
      for (ValueId id : list->items) {
        const PlainValue& shape = tree_.at(id);
        if (shape.kind != Kind::kList && shape.kind != Kind::kTuple) {
          return Wrong(key, "a list of shapes"), std::vector<std::vector<int64_t>>{};
        }
        std::vector<int64_t>& dims = out.emplace_back();
        for (ValueId dim : shape.items) {
          const PlainValue& size = tree_.at(dim);
          if (size.kind != Kind::kInt) return Wrong(key, "a list of shapes"), std::vector<std::vector<int64_t>>{};
          dims.push_back(size.integer);
        }
      }
    }
    return out;
  }

  void Wrong(std::string_view key, std::string_view expected) {
    if (error_->ok()) {
      *error_ = absl::InvalidArgumentError(absl::StrCat(where_, ": `", std::string(key), "` is not ", std::string(expected)));
    }
  }

 private:
  const PlainTree& tree_;
  const PlainValue& dict_;
  std::string where_;
  absl::Status* error_;
};

// pg_config's ranks: "[0, 1, 2]" (2.x) or a list of integers (1.x).
bool ParseRanks(const PlainTree& tree, const PlainValue& value, std::vector<int32_t>* ranks) {
  if (value.kind == Kind::kString) {
    std::string text(absl::StripAsciiWhitespace(value.text));
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') return false;
    text = std::string(absl::StripAsciiWhitespace(text.substr(1, text.size() - 2)));
    if (text.empty()) return true;
    for (const std::string& part : std::vector<std::string>(absl::StrSplit(text, ','))) {
      int32_t rank = 0;
      if (!absl::SimpleAtoi(part, &rank) || rank < 0) return false;
      ranks->push_back(rank);
    }
    return true;
  }
  if (value.kind == Kind::kList || value.kind == Kind::kTuple) {
    for (ValueId id : value.items) {
      const PlainValue& rank = tree.at(id);
      if (rank.kind != Kind::kInt || rank.integer < 0 || rank.integer > std::numeric_limits<int32_t>::max()) {
        return false;
      }
      ranks->push_back(static_cast<int32_t>(rank.integer));
    }
    return true;
  }
  return false;
}

absl::Status ReadGroups(const PlainTree& tree, const PlainValue& config, FlightRecorderDump* dump) {
  if (config.kind != Kind::kDict) return absl::InvalidArgumentError("`pg_config` is not a dict");
  for (const auto& [key_id, value_id] : config.pairs) {
    const PlainValue& key = tree.at(key_id);
    const PlainValue& value = tree.at(value_id);
    DumpGroup group;
    group.name = key.kind == Kind::kString ? key.text : key.kind == Kind::kInt ? absl::StrCat(key.integer) : "";
    if (group.name.empty()) return absl::InvalidArgumentError("`pg_config` names a group by neither text nor number");
    bool ranks_ok = false;
    if (value.kind == Kind::kDict) {
      absl::Status error;
      Fields fields(tree, value, absl::StrCat("pg_config[", group.name, "]"), &error);
      if (std::string name = fields.String("name"); !name.empty()) group.name = name;
      group.desc = fields.String("desc");
      if (!error.ok()) return error;
      const PlainValue* ranks = fields.Get("ranks");
      ranks_ok = ranks != nullptr && ParseRanks(tree, *ranks, &group.ranks);
    } else {
      ranks_ok = ParseRanks(tree, value, &group.ranks);
    }
    if (!ranks_ok) return absl::InvalidArgumentError(absl::StrCat("pg_config[", group.name, "]: ranks unreadable"));
    dump->groups[group.name] = std::move(group);
  }
  return absl::OkStatus();
}

absl::Status ReadEntry(const PlainTree& tree, const PlainValue& value, size_t index, DumpEntry* entry) {
  const std::string where = absl::StrCat("entries[", index, "]");
  if (value.kind != Kind::kDict) return absl::InvalidArgumentError(absl::StrCat(where, " is not a dict"));
  absl::Status error;
  Fields fields(tree, value, where, &error);
  entry->record_id = fields.Int("record_id");
  if (const PlainValue* group = fields.Sequence("process_group")) {
    if (group->items.size() >= 1) entry->group_name = tree.at(group->items[0]).text;
    if (group->items.size() >= 2) entry->group_desc = tree.at(group->items[1]).text;
  } else if (fields.Get("process_group") == nullptr) {
    entry->group_name = absl::StrCat(fields.Int("pg_id"));  // 1.x: groups by id
  }
  entry->collective_seq_id = fields.Int("collective_seq_id", fields.Int("seq_id"));
  entry->p2p_seq_id = fields.Int("p2p_seq_id");
  entry->profiling_name = fields.String("profiling_name");
  entry->is_p2p = fields.Bool("is_p2p");
  entry->input_sizes = fields.Shapes("input_sizes");
  entry->output_sizes = fields.Shapes("output_sizes");
  entry->input_dtypes = fields.Strings("input_dtypes");
  entry->output_dtypes = fields.Strings("output_dtypes");
  entry->state = fields.String("state");
  entry->time_created_ns = fields.Int("time_created_ns");
  entry->time_started_ns = fields.Int("time_discovered_started_ns");
  entry->time_completed_ns = fields.Int("time_discovered_completed_ns");
  entry->retired = fields.Bool("retired");
  entry->timeout_ms = fields.Int("timeout_ms");
  entry->thread_name = fields.String("thread_name");
  if (const PlainValue* frames = fields.Sequence("frames")) {
    for (ValueId id : frames->items) {
      const PlainValue& frame = tree.at(id);
      if (frame.kind != Kind::kDict) return absl::InvalidArgumentError(absl::StrCat(where, ": a frame is not a dict"));
      Fields frame_fields(tree, frame, absl::StrCat(where, ".frames"), &error);
      DumpFrame& out = entry->frames.emplace_back();
      out.function = frame_fields.String("name");
      out.file = frame_fields.String("filename");
      const int64_t line = frame_fields.Int("line");
      out.line = line < 0 || line > std::numeric_limits<int32_t>::max() ? 0 : static_cast<int32_t>(line);
    }
  }
  if (!error.ok()) return error;
  if (entry->profiling_name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no profiling_name"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FlightRecorderDump> ParseDump(std::string_view bytes) {
  absl::StatusOr<PlainTree> tree = Decode(bytes);
  if (!tree.ok()) return tree.status();
  const PlainValue& root = tree->at(tree->root);
  if (root.kind != Kind::kDict) {
    return absl::InvalidArgumentError("its top level is not a dict: not a Flight Recorder dump");
  }
  FlightRecorderDump dump;
  absl::Status error;
  Fields fields(*tree, root, "dump", &error);
  const PlainValue* version = fields.Get("version");
  if (version == nullptr || version->kind != Kind::kString) {
    return absl::InvalidArgumentError("no `version` string: not a Flight Recorder dump");
  }
  dump.version = version->text;
  dump.comm_lib_version = fields.String("comm_lib_version");
  if (dump.comm_lib_version.empty()) dump.comm_lib_version = fields.String("nccl_version");
  if (!error.ok()) return error;
  if (const PlainValue* config = fields.Get("pg_config")) {
    if (absl::Status status = ReadGroups(*tree, *config, &dump); !status.ok()) return status;
  }
  if (const PlainValue* entries = fields.Sequence("entries")) {
    dump.entries.reserve(entries->items.size());
    for (size_t i = 0; i < entries->items.size(); ++i) {
      DumpEntry entry;
      if (absl::Status status = ReadEntry(*tree, tree->at(entries->items[i]), i, &entry); !status.ok()) return status;
      dump.entries.push_back(std::move(entry));
    }
  }
  if (!error.ok()) return error;
  return dump;
}

std::optional<int32_t> RankFromFileName(std::string_view file_name) {
  // An extension after the rank ("nccl_trace_rank_3.json"): the digits end before it.
  if (const size_t dot = file_name.rfind('.'); dot != std::string_view::npos && dot > 0 &&
                                               !std::isdigit(static_cast<unsigned char>(file_name.back()))) {
    file_name = file_name.substr(0, dot);
  }
  size_t start = file_name.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(file_name[start - 1]))) --start;
  if (start == file_name.size() || file_name.size() - start > 9) return std::nullopt;
  int32_t rank = 0;
  if (!absl::SimpleAtoi(std::string(file_name.substr(start)), &rank)) return std::nullopt;
  return rank;
}

}  // namespace collwatch::flight_recorder
