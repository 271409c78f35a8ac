// Where in the code. Threading: see call_sites.h.
#include "analyzer/call_sites.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "process/rank_membership.h"

namespace collwatch::analyzer {
namespace {

std::string BaseName(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

bool SameFunction(const CallFrame& a, const CallFrame& b) { return a.file == b.file && a.function == b.function; }

}  // namespace

bool IsLibraryFrame(const CallFrame& frame) {
  return std::any_of(std::begin(kLibraryPathParts), std::end(kLibraryPathParts),
                     [&](const char* part) { return absl::StrContains(frame.file, part); });
}

const CallFrame* InnermostUserFrame(const CallPath& path) {
  for (const CallFrame& frame : path.frames) {
    if (!IsLibraryFrame(frame)) return &frame;
  }
  return nullptr;
}

std::string CodeRegionName(const CallPath& path) {
  const CallFrame* frame = InnermostUserFrame(path);
  if (frame == nullptr) return "";
  // Its caller too, as NVTX ranges nest: a helper that every branch calls (a wrapper
  // around the collective) would otherwise name every call alike.
  const CallFrame* caller = nullptr;
  for (const CallFrame* next = frame + 1; next < path.frames.data() + path.frames.size(); ++next) {
    if (!IsLibraryFrame(*next)) {
      caller = next;
      break;
    }
  }
  return caller == nullptr ? absl::StrCat(frame->function, "()")
                           : absl::StrCat(caller->function, "/", frame->function, "()");
}

std::optional<BranchPoint> BranchPointOf(const std::vector<ClassCallPath>& paths) {
  if (paths.size() < 2) return std::nullopt;
  // Outermost first: the frames they share come first.
  std::vector<std::vector<CallFrame>> outer_first;
  for (const ClassCallPath& path : paths) {
    if (path.path.frames.empty()) return std::nullopt;
    outer_first.emplace_back(path.path.frames.rbegin(), path.path.frames.rend());
  }
  size_t shortest = outer_first[0].size();
  for (const auto& frames : outer_first) shortest = std::min(shortest, frames.size());
  // The deepest depth at which every class runs the same function.
  size_t depth = 0;
  bool same_everywhere = true;
  while (depth < shortest) {
    const CallFrame& first = outer_first[0][depth];
    const bool same_function = std::all_of(outer_first.begin(), outer_first.end(),
                                           [&](const auto& frames) { return SameFunction(frames[depth], first); });
    if (!same_function) break;
    const bool same_line = std::all_of(outer_first.begin(), outer_first.end(),
                                       [&](const auto& frames) { return frames[depth].line == first.line; });
    if (!same_line) {
      same_everywhere = false;
      ++depth;  // the classes part inside this function
      break;
    }
    ++depth;
  }
  if (depth == 0) return std::nullopt;  // not even the outermost function is shared
  if (same_everywhere && std::all_of(outer_first.begin(), outer_first.end(),
                                     [&](const auto& frames) { return frames.size() == depth; })) {
    return std::nullopt;  // one path: the same code
  }
  const size_t at = depth - 1;
  BranchPoint point;
  point.function = outer_first[0][at].function;
  point.file = outer_first[0][at].file;
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto& frames = outer_first[i];
    BranchArm arm;
    arm.ranks = paths[i].ranks;
    arm.line = frames[at].line;
    for (size_t deeper = at + 1; deeper < frames.size() && arm.callee.empty(); ++deeper) {
      if (!IsLibraryFrame(frames[deeper])) arm.callee = frames[deeper].function;
    }
    point.arms.push_back(std::move(arm));
  }
  return point;
}

std::string FrameText(const CallFrame& frame) {
  return absl::StrCat(frame.function, " (", BaseName(frame.file), ":", frame.line, ")");
}

void WithSourceLines(BranchPoint* point) {
  std::ifstream file(point->file);
  if (!file) return;
  std::map<int32_t, std::string> wanted;
  for (const BranchArm& arm : point->arms) wanted[arm.line];
  std::string line;
  for (int32_t number = 1; std::getline(file, line) && number <= wanted.rbegin()->first; ++number) {
    auto found = wanted.find(number);
    if (found == wanted.end()) continue;
    std::string text(absl::StripAsciiWhitespace(line));
    constexpr size_t kMaxSource = 100;
    if (text.size() > kMaxSource) text = text.substr(0, kMaxSource - 3) + "...";
    found->second = std::move(text);
  }
  for (BranchArm& arm : point->arms) arm.source = wanted[arm.line];
}

std::string BranchPointText(const BranchPoint& point) {
  std::string text = absl::StrCat("`", point.function, "` (", BaseName(point.file), "):");
  for (size_t i = 0; i < point.arms.size(); ++i) {
    const BranchArm& arm = point.arms[i];
    absl::StrAppend(&text, i == 0 ? " " : ", ", arm.ranks.size() == 1 ? "rank " : "ranks ", RankListText(arm.ranks),
                    " at line ", arm.line);
    if (!arm.source.empty()) absl::StrAppend(&text, " `", arm.source, "`");
    if (!arm.callee.empty()) absl::StrAppend(&text, " → ", arm.callee);
  }
  return text;
}

}  // namespace collwatch::analyzer
