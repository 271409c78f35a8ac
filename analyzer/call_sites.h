// Where in the code: a call path's innermost frame of the user's code, the name a call
// path gives a call that has no NVTX region, and the branch point between rank classes
// (the deepest frame their call paths share, and each class's line in it).
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_CALL_SITES_H_
#define COLLWATCH_ANALYZER_CALL_SITES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ring/call_path.h"

namespace collwatch::analyzer {

// A frame of the libraries between the user's code and NCCL (torch's own packages, the
// interpreter's helpers), which a finding skips when it names the code: its file's path
// holds one of kLibraryPathParts. Torch is told by its packages, not by "/torch/" alone,
// which a virtual environment's folder may be called (and then holds everyone's code).
bool IsLibraryFrame(const CallFrame& frame);
inline constexpr const char* kLibraryPathParts[] = {
    "/torch/nn/", "/torch/distributed/", "/torch/autograd/", "/torch/utils/", "/torch/_", "/torch/cuda/",
    "/torch/amp/", "/torch/optim/", "/torch/fx/", "/torch/overrides.py", "/torch/functional.py",
    "<frozen ", "/contextlib.py", "/functools.py", "/threading.py"};

// The innermost frame of the user's code (nullptr: every frame is a library's, or none).
const CallFrame* InnermostUserFrame(const CallPath& path);

// The region a call path stands for where the call has no NVTX range: its innermost user
// frame and that frame's user caller, "CLIPVisionTransformer.forward/CLIPEncoder.forward()"
// ("" when there is none). Lines are left out so that a schedule does not change when code
// moves, unless asked for: "CLIPVisionTransformer.forward:245/CLIPEncoder.forward():123".
enum class CodeLines { kLeftOut, kShown };
std::string CodeRegionName(const CallPath& path, CodeLines lines = CodeLines::kLeftOut);

// A rank class's call path at a finding (report.json `call_paths`).
struct ClassCallPath {
  std::vector<int32_t> ranks;
  CallPath path;
  bool inferred = false;  // attributed through its unit, not read from the calling thread
};

// One class's way out of the branch point.
struct BranchArm {
  std::vector<int32_t> ranks;
  int32_t line = 0;     // its line in the branch point's function
  std::string callee;   // the user function that line led to ("" when none: the NCCL call
                        // was made there, or only library frames follow, e.g. a module
                        // call whose all-gather FSDP issued before the module ran)
  std::string source;   // the line's text, where the file could be read (WithSourceLines)
};

// The deepest frame every class's call path shares (report.json `branch_point`).
struct BranchPoint {
  std::string function;
  std::string file;
  std::vector<BranchArm> arms;  // one per class, in the order of the classes
};

// The branch point of two or more classes' call paths, on their user frames: the deepest
// function that every class runs at the same depth and runs from different lines (in a
// VLM: `LlavaModel.forward`, line 237 on to the vision tower, line 250 on to the
// language model); where no shared function differs in its line, the deepest shared
// one, whose one line called different functions. nullopt when fewer than two paths are
// known, when they share no frame, or when they are the same path (the same code issued
// different calls).
std::optional<BranchPoint> BranchPointOf(const std::vector<ClassCallPath>& paths);
// Where the classes' lines first differ, outermost, when that is above the branch point
// (the training step called the model differently for image and text batches, and the
// model then took its two paths): nullopt otherwise.
std::optional<BranchPoint> FirstPartingOf(const std::vector<ClassCallPath>& paths);

// Where the paths part inside a library, below the user's code (every frame counted):
// the deepest shared function whose lines differ, when it is a library's (a pipeline
// schedule that posted one side's transfer from its stage set-up, the other's from its
// microbatch loop). nullopt otherwise: the user's branch point tells it.
std::optional<BranchPoint> LibraryPartingOf(const std::vector<ClassCallPath>& paths);

// Which files the report may open for the source lines call paths name. The paths are
// the trace's words: whoever hands over a trace (imported Flight Recorder dumps) would
// choose which local file's lines land in the report.
struct SourceAccess {
  bool read = true;  // false: file:line only
  // Not empty: only a file whose real path (links resolved) lies under this folder's; a
  // relative path is taken from it.
  std::string root;
};

// The text of each arm's line, read from the branch point's file where it can be read
// here (the analysis runs on the job's machine under `collwatch run`) and `access` allows
// it; unchanged elsewhere.
void WithSourceLines(BranchPoint* point, const SourceAccess& access = {});

// "`LlavaModel.forward` (modeling_llava.py): rank 0 at line 237 → get_image_features,
// rank 1 at line 250 → LlamaModel.forward" (docs/findings.md's short form).
std::string BranchPointText(const BranchPoint& point);
// "CLIPEncoder.forward (modeling_clip.py:123)": a frame's short form (the file's last
// component).
std::string FrameText(const CallFrame& frame);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_CALL_SITES_H_
