// Where in the code. Threading: see call_sites.h.
#include "analyzer/call_sites.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "files/safe_files.h"
#include "process/rank_membership.h"

namespace collwatch::analyzer {
namespace {

std::string BaseName(const std::string& file) { return std::filesystem::path(file).filename().string(); }

bool SameFunction(const CallFrame& a, const CallFrame& b) { return a.file == b.file && a.function == b.function; }

// A decorator's inner function ("can_return_tuple.<locals>.wrapper"): it passes the call
// on, so the function it leads to names the branch better.
bool IsDecoratorClosure(const std::string& function) {
  const size_t locals = function.rfind("<locals>.");
  if (locals == std::string::npos) return false;
  const std::string_view name = std::string_view(function).substr(locals + 9);
  return name == "wrapper" || name == "wrapped" || name == "inner" || name == "_fn" || name == "decorate_context" ||
         name == "wrapped_fn";
}

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

std::string CodeRegionName(const CallPath& path, CodeLines lines) {
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
  const auto line_of = [lines](const CallFrame& of) {
    return lines == CodeLines::kShown ? absl::StrCat(":", of.line) : std::string();
  };
  return caller == nullptr
             ? absl::StrCat(frame->function, "()", line_of(*frame))
             : absl::StrCat(caller->function, line_of(*caller), "/", frame->function, "()", line_of(*frame));
}

namespace {

// The frames of each path (its user frames only, or every frame), outermost first; empty
// when a path has none.
enum class FramesKept { kUser, kAll };
std::vector<std::vector<CallFrame>> FramesOuterFirst(const std::vector<ClassCallPath>& paths, FramesKept kept) {
  std::vector<std::vector<CallFrame>> result;
  for (const ClassCallPath& path : paths) {
    std::vector<CallFrame> frames;
    for (auto frame = path.path.frames.rbegin(); frame != path.path.frames.rend(); ++frame) {
      if (kept == FramesKept::kAll || !IsLibraryFrame(*frame)) frames.push_back(*frame);
    }
    if (frames.empty()) return {};
    result.push_back(std::move(frames));
  }
  return result;
}

// Depths (outermost first) at which every class runs the same function, and among them
// those where their lines differ.
struct SharedDepths {
  size_t shared = 0;
  std::vector<size_t> lines_differ;
};

SharedDepths SharedDepthsOf(const std::vector<std::vector<CallFrame>>& frames) {
  SharedDepths depths;
  size_t shortest = frames[0].size();
  for (const auto& path : frames) shortest = std::min(shortest, path.size());
  for (size_t depth = 0; depth < shortest; ++depth) {
    const CallFrame& first = frames[0][depth];
    if (!std::all_of(frames.begin(), frames.end(), [&](const auto& path) { return SameFunction(path[depth], first); })) {
      break;
    }
    if (!std::all_of(frames.begin(), frames.end(), [&](const auto& path) { return path[depth].line == first.line; })) {
      depths.lines_differ.push_back(depth);
    }
    depths.shared = depth + 1;
  }
  return depths;
}

BranchPoint PointAt(const std::vector<ClassCallPath>& paths, const std::vector<std::vector<CallFrame>>& frames,
                    size_t at) {
  BranchPoint point;
  point.function = frames[0][at].function;
  point.file = frames[0][at].file;
  for (size_t i = 0; i < paths.size(); ++i) {
    BranchArm arm;
    arm.ranks = paths[i].ranks;
    arm.line = frames[i][at].line;
    for (size_t deeper = at + 1; deeper < frames[i].size() && arm.callee.empty(); ++deeper) {
      if (!IsDecoratorClosure(frames[i][deeper].function)) arm.callee = frames[i][deeper].function;
    }
    point.arms.push_back(std::move(arm));
  }
  return point;
}

}  // namespace

std::optional<BranchPoint> BranchPointOf(const std::vector<ClassCallPath>& paths) {
  if (paths.size() < 2) return std::nullopt;
  const std::vector<std::vector<CallFrame>> frames = FramesOuterFirst(paths, FramesKept::kUser);
  if (frames.empty()) return std::nullopt;
  const SharedDepths depths = SharedDepthsOf(frames);
  if (depths.shared == 0) return std::nullopt;  // not even the outermost function is shared
  if (!depths.lines_differ.empty()) return PointAt(paths, frames, depths.lines_differ.back());
  const bool one_path = std::all_of(frames.begin(), frames.end(),
                                    [&](const auto& path) { return path.size() == depths.shared; });
  if (one_path) return std::nullopt;  // the same code
  return PointAt(paths, frames, depths.shared - 1);  // one line, other functions called
}

std::optional<BranchPoint> FirstPartingOf(const std::vector<ClassCallPath>& paths) {
  if (paths.size() < 2) return std::nullopt;
  const std::vector<std::vector<CallFrame>> frames = FramesOuterFirst(paths, FramesKept::kUser);
  if (frames.empty()) return std::nullopt;
  const SharedDepths depths = SharedDepthsOf(frames);
  if (depths.lines_differ.size() < 2) return std::nullopt;  // the branch point is the only one
  return PointAt(paths, frames, depths.lines_differ.front());
}

std::optional<BranchPoint> LibraryPartingOf(const std::vector<ClassCallPath>& paths) {
  if (paths.size() < 2) return std::nullopt;
  const std::vector<std::vector<CallFrame>> frames = FramesOuterFirst(paths, FramesKept::kAll);
  if (frames.empty()) return std::nullopt;
  const SharedDepths depths = SharedDepthsOf(frames);
  if (depths.lines_differ.empty() || !IsLibraryFrame(frames[0][depths.lines_differ.back()])) return std::nullopt;
  return PointAt(paths, frames, depths.lines_differ.back());
}

std::string FrameText(const CallFrame& frame) {
  return absl::StrCat(frame.function, " (", BaseName(frame.file), ":", frame.line, ")");
}

void WithSourceLines(BranchPoint* point, const SourceAccess& access) {
  if (!access.read) return;
  std::string path = point->file;
  if (!access.root.empty()) {
    // Resolved first, then compared: neither "../" nor a link leads out of the root.
    namespace fs = std::filesystem;
    const fs::path named = fs::path(path).is_relative() ? fs::path(access.root) / path : fs::path(path);
    char real_root[PATH_MAX], real_file[PATH_MAX];
    if (realpath(access.root.c_str(), real_root) == nullptr || realpath(named.c_str(), real_file) == nullptr) return;
    const std::string inside = std::string_view(real_root) == "/" ? "/" : absl::StrCat(real_root, "/");
    if (!absl::StartsWith(real_file, inside)) return;
    path = real_file;
  }
  // The path comes from a trace: only a regular file of a source's size is read.
  constexpr uint64_t kMaxSourceBytes = 64 << 20;
  absl::StatusOr<std::string> source = ReadRegularFile(path, kMaxSourceBytes);
  if (!source.ok()) return;
  std::istringstream file(*source);
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
