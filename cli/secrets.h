// The shared secrets of collector connections: read from the files a user names (tokens,
// TLS certificates and keys), and made fresh for `collwatch run`'s embedded collector,
// kept in a file its owner alone can read. Threading: any thread.
#ifndef COLLWATCH_CLI_SECRETS_H_
#define COLLWATCH_CLI_SECRETS_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace collwatch {

// The file's contents without trailing line ends; an error naming the file when it cannot
// be read or holds nothing.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// The token in `path`: its one line (a single trailing line end dropped), which must be a
// valid gRPC metadata value of printable ASCII without whitespace. Every command that takes
// --token-file reads it here, so each refuses a bad one alike, at load, with the same words
// ("PATH: the token holds a line break (byte 4): ..."), before gRPC ever sees it.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// What a secret file holds: a token (checked as above) or PEM text (certificates, keys).
enum class SecretKind { kPem, kToken };

// One secret file a command was given and where its contents go.
struct SecretFileToRead {
  const std::string& path;  // empty: not given, nothing to read
  std::string* contents;
  SecretKind kind = SecretKind::kPem;
};

// Reads each given file in order; the first error stops the reading.
absl::Status ReadSecretFiles(std::initializer_list<SecretFileToRead> files);

// 24 random bytes as 48 hex digits, so that other users of the node can neither watch the
// job nor feed it forged records through the embedded collector's loopback port. Empty
// when the kernel gives no randomness.
std::string RandomToken();

// Writes `secret` and a newline to `path`, readable by its owner alone. An old file there
// is replaced, never followed if it is a link.
absl::Status WriteSecretFile(const std::string& path, const std::string& secret);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_SECRETS_H_
