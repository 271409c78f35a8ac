// Secret files: read without their line end, refused when missing or empty; the run's
// token fresh each time, written for its owner alone, replacing an old file and never
// following a link planted where it goes.
#include "cli/secrets.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("secrets-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  static void Write(const std::string& path, const std::string& contents) { std::ofstream(path) << contents; }
  static std::string Read(const std::string& path) {
    std::ifstream file(path);
    std::stringstream contents;
    contents << file.rdbuf();
    return contents.str();
  }

  std::filesystem::path dir_;
};

TEST_F(SecretsTest, ReadDropsTrailingLineEnds) {
  Write(Path("token"), "s3cret\r\n\n");
  const absl::StatusOr<std::string> read = ReadSecretFile(Path("token"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "s3cret");
  // A PEM keeps its inner lines.
  Write(Path("pem"), "-----BEGIN-----\nabc\n-----END-----\n");
  EXPECT_EQ(ReadSecretFile(Path("pem")).value(), "-----BEGIN-----\nabc\n-----END-----");
}

TEST_F(SecretsTest, MissingOrEmptyFileIsAnErrorNamingIt) {
  const absl::StatusOr<std::string> missing = ReadSecretFile(Path("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), Path("missing") + ": no such file or directory");
  // A folder, a FIFO or /dev/zero given as a token file: said so at once, not "empty", no
  // wait for a writer, no read without end.
  std::filesystem::create_directory(Path("folder"));
  EXPECT_EQ(ReadSecretFile(Path("folder")).status().message(), Path("folder") + ": is a folder, not a regular file");
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadSecretFile(Path("fifo")).status().message(), Path("fifo") + ": is a FIFO, not a regular file");
  EXPECT_EQ(ReadSecretFile("/dev/zero").status().message(), "/dev/zero: is a character device, not a regular file");
  Write(Path("empty"), "\n");
  const absl::StatusOr<std::string> empty = ReadSecretFile(Path("empty"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), Path("empty") + ": is empty");
}

// A token is one gRPC metadata value: one trailing line end is the file's; a line break
// inside, whitespace, a control byte or nothing at all is refused, naming the file.
TEST_F(SecretsTest, ATokenMustBeOneLineOfPrintableAscii) {
  Write(Path("token"), "s3cret-0f\n");
  EXPECT_EQ(ReadTokenFile(Path("token")).value(), "s3cret-0f");
  Write(Path("crlf"), "s3cret\r\n");
  EXPECT_EQ(ReadTokenFile(Path("crlf")).value(), "s3cret");
  const struct {
    std::string contents, problem;
  } bad[] = {
      {"abc\ndef\n", "holds a line break (byte 4)"}, {"  \n", "is only whitespace"},
      {"abc\n\n", "holds a line break (byte 4)"},  {"a b", "holds whitespace (byte 2)"},
      {"\n", "is empty"},                          {"ab\x1b", "holds byte 0x1b (byte 3), not printable ASCII"},
  };
  for (const auto& [contents, problem] : bad) {
    Write(Path("bad"), contents);
    EXPECT_EQ(ReadTokenFile(Path("bad")).status().message(),
              Path("bad") + ": the token " + problem + ": give one line of printable ASCII without spaces");
  }
  std::string token = "unset";
  EXPECT_FALSE(ReadSecretFiles({{Path("bad"), &token, SecretKind::kToken}}).ok());
  EXPECT_EQ(token, "unset");
}

TEST_F(SecretsTest, ReadSecretFilesSkipsThoseNotGivenAndStopsAtTheFirstError) {
  Write(Path("token"), "t\n");
  Write(Path("ca"), "c\n");
  std::string token = "unset", ca = "unset", key = "unset", cert = "unset";
  const std::string not_given;
  ASSERT_TRUE(ReadSecretFiles({{Path("token"), &token}, {not_given, &key}, {Path("ca"), &ca}}).ok());
  EXPECT_EQ(token, "t");
  EXPECT_EQ(key, "unset");
  EXPECT_EQ(ca, "c");
  token = ca = "unset";
  const absl::Status failed = ReadSecretFiles({{Path("token"), &token}, {Path("missing"), &key}, {Path("ca"), &ca}});
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("missing"), std::string::npos);
  EXPECT_EQ(token, "t");
  EXPECT_EQ(ca, "unset");  // not read after the error
  EXPECT_TRUE(ReadSecretFiles({{not_given, &cert}}).ok());
}

TEST(RandomToken, FortyEightHexDigitsFreshEachTime) {
  const std::string first = RandomToken();
  const std::string second = RandomToken();
  ASSERT_EQ(first.size(), 48u);
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  EXPECT_NE(first, second);
}

TEST_F(SecretsTest, WrittenFileHoldsTheSecretAndALineEndForItsOwnerAlone) {
  ASSERT_TRUE(WriteSecretFile(Path("token"), "abc123").ok());
  EXPECT_EQ(Read(Path("token")), "abc123\n");
  struct stat info {};
  ASSERT_EQ(lstat(Path("token").c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(info.st_uid, getuid());
  // What was written reads back.
  EXPECT_EQ(ReadSecretFile(Path("token")).value(), "abc123");
}

TEST_F(SecretsTest, WriteReplacesAnOldFileAndItsLooserMode) {
  Write(Path("token"), "old old old\n");
  ASSERT_EQ(chmod(Path("token").c_str(), 0644), 0);
  ASSERT_TRUE(WriteSecretFile(Path("token"), "new").ok());
  EXPECT_EQ(Read(Path("token")), "new\n");
  struct stat info {};
  ASSERT_EQ(stat(Path("token").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(SecretsTest, WriteNeverFollowsALinkPlantedWhereTheSecretGoes) {
  Write(Path("victim"), "precious\n");
  std::filesystem::create_symlink(Path("victim"), Path("token"));
  ASSERT_TRUE(WriteSecretFile(Path("token"), "abc").ok());
  EXPECT_EQ(Read(Path("victim")), "precious\n");
  EXPECT_FALSE(std::filesystem::is_symlink(Path("token")));
  EXPECT_EQ(Read(Path("token")), "abc\n");
}

TEST_F(SecretsTest, WriteInAFolderThatIsNotThereSaysWhere) {
  const absl::Status status = WriteSecretFile(Path("no-such-folder/token"), "abc");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cannot create " + Path("no-such-folder/token")), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace collwatch
