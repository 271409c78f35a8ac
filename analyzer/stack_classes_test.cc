// Stacks merged into classes: the thread of interest, the short form of where it is, and
// ranks merged by it.
#include "analyzer/stack_classes.h"

#include "gtest/gtest.h"

namespace collwatch::analyzer::stack_classes_test {
namespace {

using stacks::NativeFrame;
using stacks::ProcessStacks;
using stacks::ThreadStack;

const CallFrame kTorchGather{"/venv/site-packages/torch/distributed/distributed_c10d.py", "all_gather", 3000};

// A Python rank: its main thread in `native` (innermost first) under `python`.
ProcessStacks PythonRank(int32_t pid, char state, std::vector<NativeFrame> native, std::vector<CallFrame> python) {
  ProcessStacks process;
  process.pid = pid;
  process.state = state;
  process.program = "python3.12";
  ThreadStack main_thread;
  main_thread.tid = pid;
  main_thread.name = "python3";
  main_thread.state = state;
  main_thread.unwound = !native.empty();
  main_thread.native = std::move(native);
  main_thread.python.frames = std::move(python);
  process.threads.push_back(std::move(main_thread));
  ThreadStack helper;
  helper.tid = pid + 1;
  helper.name = "pt_autograd_0";
  helper.state = 'S';
  helper.native = {{0x10, "pthread_cond_wait", "libc.so.6", "", 0}};
  process.threads.push_back(std::move(helper));
  return process;
}

std::vector<NativeFrame> InAllGather() {
  return {{0x1, "poll", "libc.so.6", "", 0},
          {0x2, "ncclProxyProgress", "libnccl.so.2", "", 0},
          {0x3, "ncclAllGather", "libnccl.so.2", "", 0},
          {0x4, "ncclAllGather", "libcollwatch.so", "", 0},
          {0x5, "_PyEval_EvalFrameDefault", "libpython3.12.so.1.0", "", 0}};
}

TEST(StackClassesTest, FourRanksMergeByWhereTheyAre) {
  std::vector<RankStacks> ranks;
  for (int32_t rank = 0; rank < 3; ++rank) {
    ranks.push_back({{rank}, PythonRank(100 + 10 * rank, 'S', InAllGather(),
                                        {kTorchGather, {"/job/model.py", "CLIPEncoder.forward", 123},
                                         {"/job/train.py", "train", 88}})});
  }
  ranks.push_back({{3}, PythonRank(200, 'S', {{0x9, "clock_nanosleep", "libc.so.6", "", 0}},
                                   {{"/usr/lib/python3.12/site-packages/torch/utils/data/dataloader.py",
                                     "DataLoader.__next__", 630},
                                    {"/job/train.py", "train", 80}})});
  const std::vector<StackClass> classes = MergeStacks(ranks);
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(classes[0].pids, (std::vector<int32_t>{100, 110, 120}));
  EXPECT_EQ(classes[0].thread, "python3 (main thread)");
  // The NCCL function the program called (NCCL's, not collwatch's hook), torch's frames skipped.
  EXPECT_EQ(classes[0].where,
            "sleeping in poll (libc.so.6) \u2190 ncclAllGather (libnccl.so.2) \u2190 CLIPEncoder.forward "
            "(model.py:123) \u2190 train (train.py:88)");
  EXPECT_EQ(classes[1].ranks, (std::vector<int32_t>{3}));
  EXPECT_EQ(classes[1].where, "sleeping in clock_nanosleep (libc.so.6) \u2190 train (train.py:80)");
  EXPECT_EQ(StackClassesText(classes),
            "  ranks 0-2   python3 (main thread) " + classes[0].where + "\n  rank 3      python3 (main thread) " +
                classes[1].where + "\n");
}

TEST(StackClassesTest, TheThreadInNcclIsTheOneOfInterestEvenWhenNotTheMainThread) {
  ProcessStacks process = PythonRank(300, 'S', {{0x9, "pthread_cond_wait", "libc.so.6", "", 0}}, {});
  process.threads[1].native = InAllGather();
  ASSERT_EQ(ThreadOfInterest(process), &process.threads[1]);
  EXPECT_EQ(MergeStacks({{{}, process}})[0].thread, "pt_autograd_0 (301)");
}

// Measured on 2 x H100: the late rank's NCCL proxy thread waits in ncclProxyService all
// along; the late rank is its main thread, sleeping in Python.
TEST(StackClassesTest, NcclsOwnThreadsAreNotWhereTheRankIs) {
  ProcessStacks process = PythonRank(700, 'S', {{0x9, "clock_nanosleep", "libc.so.6", "", 0}},
                                     {{"/job/train.py", "late_start", 20}});
  process.threads[1].native = {{0x1, "__poll", "libc.so.6", "", 0},
                               {0x2, "ncclProxyService", "libnccl.so.2", "", 0},
                               {0x3, "start_thread", "libc.so.6", "", 0},
                               {0x4, "__clone3", "libc.so.6", "", 0}};
  EXPECT_EQ(ThreadOfInterest(process), &process.threads[0]);
}

TEST(StackClassesTest, CxxFunctionsAreNamedWithoutTheirParameters) {
  ProcessStacks process = PythonRank(600, 'S', {{0x1, "read", "libc.so.6", "", 0},
                                                {0x2, "ns::Reader::Wait(int, std::function<void ()>) const", "trainer",
                                                 "/src/reader.cc", 12},
                                                {0x3, "ns::(anonymous namespace)::Run()", "trainer", "/src/run.cc", 5}},
                                     {});
  process.program = "trainer";
  EXPECT_EQ(WhereText(process, process.threads[0]),
            "sleeping in read (libc.so.6) \u2190 ns::Reader::Wait (reader.cc:12) \u2190 ns::(anonymous namespace)::Run "
            "(run.cc:5)");
}

// Measured on this machine: a rank in communicator creation is inside NCCL's internal
// functions only; the NCCL function it called shows through collwatch's hook.
TEST(StackClassesTest, TheNcclCallShowsThroughCollwatchsHookWhereNcclNamesNone) {
  ProcessStacks process = PythonRank(800, 'S', {{0x1, "syscall", "libc.so.6", "", 0},
                                                {0x2, "", "libnccl.so.2", "", 0},
                                                {0x3, "ncclCommInitRank", "libcollwatch.so", "", 0},
                                                {0x4, "ffi_call", "libffi.so.8", "", 0}},
                                     {{"/job/ranks.py", "run_rank", 82}});
  EXPECT_EQ(WhereText(process, process.threads[0]),
            "sleeping in syscall (libc.so.6) \u2190 ncclCommInitRank \u2190 run_rank (ranks.py:82)");
}

TEST(StackClassesTest, AProcessWithNoStackSaysWhy) {
  ProcessStacks gone;
  gone.pid = 400;
  gone.problems = {"no process 400"};
  ProcessStacks unreadable = PythonRank(500, 'T', {}, {});
  unreadable.threads.resize(1);
  unreadable.problems = {"native stacks: cannot trace it (Operation not permitted)"};
  const std::vector<StackClass> classes = MergeStacks({{{4}, gone}, {{5}, unreadable}});
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].where, "no process 400");
  EXPECT_EQ(classes[1].where, "stopped, no stack; native stacks: cannot trace it (Operation not permitted)");
}

}  // namespace
}  // namespace collwatch::analyzer::stack_classes_test
