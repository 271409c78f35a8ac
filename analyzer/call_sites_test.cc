// Where in the code: user frames past the libraries, the code region, the branch point.
// Threading: single-threaded.
#include "analyzer/call_sites.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace collwatch::analyzer::call_sites_test {
namespace {

const CallFrame kGather{"/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py", "all_gather", 3000};
CallFrame User(const char* function, int32_t line) { return {"/home/me/model.py", function, line}; }

TEST(CallSitesTest, LibraryFramesAreSkippedForTheUsersCode) {
  const CallPath path{{kGather, User("VisionTower.forward", 40), User("Model.forward", 20), User("<module>", 3)}};
  EXPECT_TRUE(IsLibraryFrame(kGather));
  EXPECT_FALSE(IsLibraryFrame({"/opt/torch/lib/python3.12/site-packages/transformers/models/llava/modeling_llava.py",
                               "LlavaModel.forward", 237}))
      << "a virtual environment called torch holds everyone's code";
  ASSERT_NE(InnermostUserFrame(path), nullptr);
  EXPECT_EQ(InnermostUserFrame(path)->function, "VisionTower.forward");
  EXPECT_EQ(CodeRegionName(path), "Model.forward/VisionTower.forward()");
  EXPECT_EQ(CodeRegionName(path, CodeLines::kShown), "Model.forward:20/VisionTower.forward():40");
  EXPECT_EQ(CodeRegionName(CallPath{{kGather}}), "") << "no user frame";
  EXPECT_EQ(CodeRegionName(CallPath{{User("main", 9)}}), "main()") << "no user caller";
  EXPECT_EQ(CodeRegionName(CallPath{{User("main", 9)}}, CodeLines::kShown), "main():9");
  EXPECT_EQ(FrameText(path.frames[1]), "VisionTower.forward (model.py:40)");
}

TEST(CallSitesTest, ClassesPartingOnDifferentLinesOfOneFunction) {
  const std::vector<ClassCallPath> paths = {
      {{0, 2}, {{kGather, User("vision", 5), User("forward", 44), User("train", 50)}}},
      {{1, 3}, {{kGather, User("text", 9), User("forward", 45), User("train", 50)}}}};
  const std::optional<BranchPoint> point = BranchPointOf(paths);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->function, "forward");
  ASSERT_EQ(point->arms.size(), 2u);
  EXPECT_EQ(point->arms[0].line, 44);
  EXPECT_EQ(point->arms[0].callee, "vision");
  EXPECT_EQ(point->arms[1].line, 45);
  EXPECT_EQ(point->arms[1].callee, "text");
  EXPECT_EQ(BranchPointText(*point),
            "`forward` (model.py): ranks 0,2 at line 44 \u2192 vision, ranks 1,3 at line 45 \u2192 text");
}

// One line calling other functions (a dispatch through a table, a conditional expression).
TEST(CallSitesTest, ClassesCallingDifferentFunctionsFromOneLine) {
  const std::vector<ClassCallPath> paths = {{{0}, {{kGather, User("expert0", 5), User("moe", 30)}}},
                                            {{1}, {{kGather, User("expert1", 7), User("moe", 30)}}}};
  const std::optional<BranchPoint> point = BranchPointOf(paths);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->function, "moe");
  EXPECT_EQ(point->arms[0].line, 30);
  EXPECT_EQ(point->arms[0].callee, "expert0");
  EXPECT_EQ(point->arms[1].callee, "expert1");
}

TEST(CallSitesTest, NoBranchPointForOnePathOrPathsSharingNothing) {
  const CallPath same{{kGather, User("forward", 44)}};
  EXPECT_FALSE(BranchPointOf({{{0}, same}, {{1}, same}}).has_value()) << "the same code";
  EXPECT_FALSE(BranchPointOf({{{0}, same}}).has_value()) << "one class";
  EXPECT_FALSE(BranchPointOf({{{0}, same}, {{1}, CallPath{{User("other", 1)}}}}).has_value()) << "nothing shared";
  EXPECT_FALSE(BranchPointOf({{{0}, same}, {{1}, CallPath{}}}).has_value()) << "a path unknown";
}

// The path of one class goes deeper in the shared function: the line of the shallower is
// the NCCL call itself.
TEST(CallSitesTest, AClassCallingNcclFromTheBranchPointItself) {
  const std::vector<ClassCallPath> paths = {{{0}, {{User("forward", 44), User("train", 50)}}},
                                            {{1}, {{User("helper", 3), User("forward", 47), User("train", 50)}}}};
  const std::optional<BranchPoint> point = BranchPointOf(paths);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->arms[0].callee, "");
  EXPECT_EQ(point->arms[1].callee, "helper");
  EXPECT_NE(BranchPointText(*point).find("rank 0 at line 44, rank 1 at line 47 \u2192 helper"), std::string::npos)
      << BranchPointText(*point);
}

// A module call under FSDP: the all-gather is issued by torch's hooks before the module's
// own forward runs, so no user frame follows the branch point's line; the line's text
// says what it called.
TEST(CallSitesTest, OnlyLibraryFramesPastTheLineNameNoCalleeTheSourceDoes) {
  const std::string file = ::testing::TempDir() + "/call_sites_model.py";
  {
    std::ofstream out(file);
    out << "class Model:\n    def forward(self, x):\n        x = self.vision(x)\n        x = self.block(x)\n";
  }
  const CallFrame hook{"/venv/torch/nn/modules/module.py", "Module._call_impl", 1750};
  const std::vector<ClassCallPath> paths = {{{0}, {{kGather, hook, {file, "Model.forward", 3}}}},
                                            {{1}, {{kGather, hook, {file, "Model.forward", 4}}}}};
  std::optional<BranchPoint> point = BranchPointOf(paths);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->arms[0].callee, "");
  WithSourceLines(&*point);
  EXPECT_EQ(point->arms[0].source, "x = self.vision(x)");
  EXPECT_EQ(point->arms[1].source, "x = self.block(x)");
  EXPECT_EQ(BranchPointText(*point),
            "`Model.forward` (call_sites_model.py): rank 0 at line 3 `x = self.vision(x)`, rank 1 at line 4 "
            "`x = self.block(x)`");
}

// A transformers VLM: the step calls the model with or without pixels (the lines first
// differ there), the model then runs the vision tower or the language model from two
// lines of LlavaModel.forward: that is the branch point; decorator wrappers in between
// are shared functions on one line and do not count.
TEST(CallSitesTest, TheDeepestSharedFunctionWhoseLinesDifferIsTheBranchPoint) {
  const CallFrame wrapper{"/venv/site-packages/transformers/utils/generic.py", "can_return_tuple.<locals>.wrapper", 939};
  const std::vector<ClassCallPath> paths = {
      {{0}, {{kGather, User("CLIPEncoder.forward", 469), User("LlavaModel.get_image_features", 154), wrapper,
              User("LlavaModel.forward", 237), wrapper, User("forward_loss", 432), User("train", 104)}}},
      {{1}, {{kGather, User("LlamaModel.forward", 403), User("LlavaModel.forward", 250), wrapper,
              User("forward_loss", 427), User("train", 104)}}}};
  const std::optional<BranchPoint> point = BranchPointOf(paths);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->function, "LlavaModel.forward");
  EXPECT_EQ(point->arms[0].line, 237);
  EXPECT_EQ(point->arms[0].callee, "LlavaModel.get_image_features");
  EXPECT_EQ(point->arms[1].line, 250);
  EXPECT_EQ(point->arms[1].callee, "LlamaModel.forward");
  const std::optional<BranchPoint> first = FirstPartingOf(paths);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->function, "forward_loss");
  EXPECT_EQ(first->arms[0].line, 432);
  EXPECT_EQ(first->arms[1].line, 427);
  EXPECT_FALSE(FirstPartingOf({paths[0], {{1}, {{kGather, User("LlamaModel.forward", 403),
                                                User("LlavaModel.forward", 250), wrapper,
                                                User("forward_loss", 432), User("train", 104)}}}})
                   .has_value())
      << "one line difference: the branch point says it all";
}

}  // namespace
}  // namespace collwatch::analyzer::call_sites_test
