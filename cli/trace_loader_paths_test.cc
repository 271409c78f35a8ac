// Paths the loader cannot look into are said as what they are (issue #38 item 11): a
// folder this user may not list is "permission denied", never "no collwatch traces here";
// a path longer than PATH_MAX is "path too long", never "no such file or folder".
// Threading: single-threaded; the permission cases run in a forked child that drops root.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/trace_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::trace_loader_paths_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kNobody = 65534;

// Removes `name` under the folder `parent` a level at a time through descriptors: a tree
// deeper than PATH_MAX cannot be removed by its paths.
void RemoveTree(int parent, const char* name) {
  const int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    unlinkat(parent, name, 0);
    return;
  }
  DIR* dir = fdopendir(fd);
  while (const dirent* entry = readdir(dir)) {
    const std::string child = entry->d_name;
    if (child != "." && child != "..") RemoveTree(dirfd(dir), child.c_str());
  }
  closedir(dir);
  unlinkat(parent, name, AT_REMOVEDIR);
}

class TraceLoaderPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-paths-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    // Others may pass through it: the child that drops root must reach what lies inside.
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  }
  void TearDown() override { RemoveTree(AT_FDCWD, dir_.c_str()); }

  // FindTraces(path)'s code and message as seen by uid `kNobody`: a child drops root for
  // good (the permissions root is exempt from apply there) and writes them to a file.
  struct Seen {
    bool ran = false;
    std::string text;  // "<code>\t<message>"
  };
  Seen AsNobody(const std::string& path) {
    const std::string out = dir_ + "/seen.txt";
    const pid_t child = fork();
    if (child == 0) {
      if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
          setresuid(kNobody, kNobody, kNobody) != 0) {
        _exit(3);
      }
      const absl::StatusOr<TraceSources> found = FindTraces(path);
      const std::string text = absl::StrCat(static_cast<int>(found.status().code()), "\t", found.status().message());
      // The file is made by the parent, open to all: the child may not create in dir_.
      FILE* file = std::fopen(out.c_str(), "w");
      if (file == nullptr) _exit(4);
      std::fputs(text.c_str(), file);
      std::fclose(file);
      _exit(0);
    }
    Seen seen;
    std::ofstream(out).flush();
    chmod(out.c_str(), 0666);
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return seen;
    seen.ran = WEXITSTATUS(status) == 0;
    std::ifstream in(out);
    std::getline(in, seen.text, '\0');
    return seen;
  }

  std::string dir_;
};

TEST_F(TraceLoaderPathsTest, AFolderThisUserMayNotListIsPermissionDenied) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a folder another user cannot read";
  const std::string locked = dir_ + "/locked";
  ASSERT_EQ(mkdir(locked.c_str(), 0700), 0);
  std::ofstream(locked + "/job.0.ring") << "x";
  const Seen seen = AsNobody(locked);
  if (!seen.ran) GTEST_SKIP() << "could not drop root to uid " << kNobody << " in a child";
  EXPECT_THAT(seen.text, HasSubstr(absl::StrCat(static_cast<int>(absl::StatusCode::kPermissionDenied), "\t")));
  EXPECT_THAT(seen.text, HasSubstr(locked + ": permission denied (this user may not list the folder)"));
  EXPECT_THAT(seen.text, Not(HasSubstr("no collwatch traces here")));
}

TEST_F(TraceLoaderPathsTest, APathUnderAFolderThisUserMayNotSearchIsPermissionDenied) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a folder another user cannot search";
  const std::string locked = dir_ + "/locked";
  ASSERT_EQ(mkdir(locked.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((locked + "/run").c_str(), 0755), 0);
  const Seen seen = AsNobody(locked + "/run");
  if (!seen.ran) GTEST_SKIP() << "could not drop root to uid " << kNobody << " in a child";
  EXPECT_THAT(seen.text, HasSubstr(locked + "/run: permission denied (a folder on its way may not be searched"));
  EXPECT_THAT(seen.text, Not(HasSubstr("no such file")));
}

TEST_F(TraceLoaderPathsTest, JobFoldersThisUserMayNotListAreNamedNotNoTraces) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a folder another user cannot read";
  ASSERT_EQ(mkdir((dir_ + "/out").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir_ + "/out/job1").c_str(), 0700), 0);
  const Seen seen = AsNobody(dir_ + "/out");
  if (!seen.ran) GTEST_SKIP() << "could not drop root to uid " << kNobody << " in a child";
  EXPECT_THAT(seen.text, HasSubstr(dir_ + "/out: permission denied: this user may not list the folder job1 in it"));
  // Root may list it: there, an empty folder is what it is.
  EXPECT_THAT(std::string(FindTraces(dir_ + "/out").status().message()), HasSubstr("no collwatch traces here"));
}

TEST_F(TraceLoaderPathsTest, APathLongerThanPathMaxSaysSoWithItsLength) {
  // Made a piece at a time from inside: no call takes the whole path.
  const int start = open(".", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(start, 0);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  const std::string piece(200, 'd');
  std::string path = dir_;
  while (path.size() <= PATH_MAX + 100) {
    ASSERT_EQ(mkdir(piece.c_str(), 0755), 0);
    ASSERT_EQ(chdir(piece.c_str()), 0);
    path += "/" + piece;
  }
  std::ofstream("job.0.ring") << "x";
  ASSERT_EQ(fchdir(start), 0);
  close(start);
  const absl::Status status = FindTraces(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("path too long (", path.size(), " bytes, the limit is ", PATH_MAX, ")")));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("no such file")));
  // One name past NAME_MAX is told apart from a long path.
  const absl::Status long_name = FindTraces(dir_ + "/" + std::string(NAME_MAX + 1, 'n')).status();
  EXPECT_THAT(std::string(long_name.message()), HasSubstr("a name in the path is longer than 255 bytes"));
  // A missing path is still just missing.
  EXPECT_THAT(std::string(FindTraces(dir_ + "/absent").status().message()), HasSubstr(": no such file or folder"));
}

}  // namespace
}  // namespace collwatch::trace_loader_paths_test
