// Secret files are opened with O_NOFOLLOW | O_EXCL after an unlink: a link planted in the
// output folder cannot redirect the secret into another file. Threading: see secrets.h.
#include "cli/secrets.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "files/safe_files.h"
#include "files/safe_text.h"

namespace collwatch {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  constexpr uint64_t kMaxSecretBytes = 1 << 20;  // a token, or a PEM chain of certificates
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxSecretBytes);
  if (!read.ok()) return read.status();
  std::string contents = *std::move(read);
  while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r')) contents.pop_back();
  if (contents.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": is empty"));
  return contents;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  constexpr uint64_t kMaxTokenBytes = 64 << 10;
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxTokenBytes);
  if (!read.ok()) return read.status();
  std::string token = *std::move(read);
  // `echo` and editors end the line; one line end is the file's, not the token's.
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (!token.empty() && token.back() == '\r') token.pop_back();
  // gRPC aborts the process on a metadata value with a control character in it.
  if (const std::string problem = MetadataValueProblem(token); !problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the token ", problem, ": give one line of printable ASCII without spaces"));
  }
  return token;
}

absl::Status ReadSecretFiles(std::initializer_list<SecretFileToRead> files) {
  for (const SecretFileToRead& file : files) {
    if (file.path.empty()) continue;
    absl::StatusOr<std::string> contents =
        file.kind == SecretKind::kToken ? ReadTokenFile(file.path) : ReadSecretFile(file.path);
    if (!contents.ok()) return contents.status();
    *file.contents = *std::move(contents);
  }
  return absl::OkStatus();
}

std::string RandomToken() {
  unsigned char bytes[24];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t got = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return "";
    filled += static_cast<size_t>(got);
  }
  std::string token;
  for (const unsigned char byte : bytes) absl::StrAppend(&token, absl::Hex(byte, absl::kZeroPad2));
  return token;
}

absl::Status WriteSecretFile(const std::string& path, const std::string& secret) {
  unlink(path.c_str());
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (file < 0) return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  const std::string line = secret + "\n";
  const bool written = write(file, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(file);
  if (!written) return absl::DataLossError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace collwatch
