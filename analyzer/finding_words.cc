// Phrases shared by every finding's words.
#include "analyzer/finding_words.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding.h"

namespace collwatch::analyzer {

double CallBytes(const Call& call) { return static_cast<double>(call.count) * DtypeBytes(call.dtype); }

std::string RanksText(const std::vector<int32_t>& ranks, int32_t nranks) {
  const std::string list = RankListText(ranks, 8, nranks);
  if (list.rfind("all but ", 0) == 0) return absl::StrCat("all ranks but ", list.substr(8));
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", list);
}

std::string RanksVerb(const std::vector<int32_t>& ranks, std::string_view verb) {
  return ranks.size() == 1 ? absl::StrCat(std::string(verb), "s") : std::string(verb);
}

std::vector<std::string> RegionsOf(const JobModel& model, std::span<const Call* const> calls) {
  std::vector<std::string> regions;
  for (const Call* call : calls) {
    if (call->region == 0) continue;
    std::string name(model.RegionName(call->region));
    if (std::find(regions.begin(), regions.end(), name) == regions.end()) regions.push_back(std::move(name));
  }
  return regions;
}

std::string InRegionText(const JobModel& model, const Call& call) {
  return call.region == 0 ? "" : absl::StrCat(" in ", std::string(model.RegionName(call.region)));
}

std::string RegionListText(const std::vector<std::string>& regions, size_t max_names) {
  std::vector<std::string> shown(regions.begin(), regions.begin() + static_cast<ptrdiff_t>(std::min(max_names, regions.size())));
  std::string text = absl::StrJoin(shown, ", ");
  if (regions.size() > max_names) absl::StrAppend(&text, " and ", regions.size() - max_names, " more");
  return text;
}

std::string RunText(std::span<const Call* const> calls) {
  // Per op, in order of first appearance: how many, and the sizes with their repeats.
  struct OpSizes {
    std::string op;
    size_t calls = 0;
    std::vector<std::pair<std::string, size_t>> sizes;
  };
  std::vector<OpSizes> ops;
  for (const Call* call : calls) {
    const std::string op(OpName(call->fn));
    auto entry = std::find_if(ops.begin(), ops.end(), [&](const OpSizes& o) { return o.op == op; });
    if (entry == ops.end()) entry = ops.insert(ops.end(), OpSizes{op, 0, {}});
    ++entry->calls;
    const std::string size = HumanBytes(CallBytes(*call));
    auto same = std::find_if(entry->sizes.begin(), entry->sizes.end(), [&](const auto& s) { return s.first == size; });
    if (same == entry->sizes.end()) {
      entry->sizes.emplace_back(size, 1);
    } else {
      ++same->second;
    }
  }
  std::vector<std::string> parts;
  for (const OpSizes& op : ops) {
    std::string text = absl::StrCat(op.calls, " ", op.op, op.calls == 1 ? "" : "s");
    if (op.sizes.size() == 1) {
      absl::StrAppend(&text, " of ", op.sizes[0].first);
    } else {
      std::vector<std::string> sizes;
      for (const auto& [size, repeats] : op.sizes) {
        sizes.push_back(repeats == 1 ? size : absl::StrCat(size, " x", repeats));
      }
      absl::StrAppend(&text, " (", absl::StrJoin(sizes.size() > 4 ? std::vector<std::string>(sizes.begin(), sizes.begin() + 4) : sizes, ", "),
                      sizes.size() > 4 ? ", ..." : "", ")");
    }
    parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, ", ");
}

std::string ContextLine(const JobModel& model, char mark, const Call& call) {
  return absl::StrFormat("%c seq %-6d %s", mark, call.seq, DescribeCall(model, call));
}

}  // namespace collwatch::analyzer
