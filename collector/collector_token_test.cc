// The collector's token and address rules over real connections (docs/security.md): a
// collector listening beyond loopback takes no StreamEvents or Watch call without its
// token, over plaintext or TLS; which addresses count as loopback; exact token comparison.
// (TLS itself: collector_service_test, TlsServesTlsClientsOnly.)
// Threading: single-threaded test code; the server runs on gRPC's threads.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "collector/collector_service.h"
#include "collector/security_test_support.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "store/trace_store.h"

namespace collwatch::collector_token_test {
namespace {

constexpr char kToken[] = "7f3a9c1e-collwatch-test-token";

// An IPv4 address of this machine that is not loopback, or "" when it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* item = list; item != nullptr && found.empty(); item = item->ifa_next) {
    if (item->ifa_addr == nullptr || item->ifa_addr->sa_family != AF_INET) continue;
    if ((item->ifa_flags & IFF_UP) == 0 || (item->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(item->ifa_addr);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

std::string ReadTlsFile(const std::string& name) {
  std::ifstream file(std::string(COLLWATCH_TEST_DATA_DIR) + "/tls/" + name);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// ---------------------------------------------------------------------------------------
// Token and address rules

// A collector on every interface (0.0.0.0), reached through this machine's own
// non-loopback address where it has one: without the token, or with a wrong one (a
// prefix, one byte off, one byte longer), neither StreamEvents nor Watch gets anywhere
// and nothing is stored.
TEST(CollectorTokenTest, WildcardListenerRefusesCallsWithoutTheRightToken) {
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "0.0.0.0:0";
  ASSERT_FALSE(CollectorServer::Start(options).ok()) << "no token: must refuse to listen";
  options.token = kToken;
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = (*server)->address().substr((*server)->address().rfind(':') + 1);
  const std::string host = NonLoopbackAddress();
  Client client((host.empty() ? "127.0.0.1" : host) + ":" + port, grpc::InsecureChannelCredentials());

  const std::string token = kToken;
  std::string one_byte_off = token;
  one_byte_off.back() ^= 1;
  const std::vector<std::string> wrong = {"", token.substr(0, token.size() - 1), one_byte_off, token + "x"};
  for (const std::string& attempt : wrong) {
    const grpc::Status stream = client.Stream({Hello(Identity("job1")), Batch(1, {0, 1})}, attempt);
    EXPECT_EQ(stream.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << attempt << "'";
    EXPECT_NE(stream.error_message().find("token"), std::string::npos) << stream.error_message();
    v1::WatchResponse state;
    const grpc::Status watch = client.WatchOnce(attempt, &state);
    EXPECT_EQ(watch.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << attempt << "'";
    EXPECT_NE(watch.error_message().find("token"), std::string::npos) << watch.error_message();
  }
  EXPECT_TRUE(ListRankTraces(options.out_dir, "job1").empty()) << "an unauthenticated stream was stored";

  const grpc::Status accepted = client.Stream({Hello(Identity("job1")), Batch(1, {0, 1})}, token);
  EXPECT_TRUE(accepted.ok()) << accepted.error_message();
  EXPECT_EQ(ListRankTraces(options.out_dir, "job1").size(), 1u);
  v1::WatchResponse state;
  ASSERT_TRUE(client.WatchOnce(token, &state).ok());
  EXPECT_EQ(state.state().job(), "job1");
  (*server)->Shutdown();
}

// TLS hides the token on the wire; it does not replace it: a client that trusts the
// certificate still needs the token for both calls.
TEST(CollectorTokenTest, TlsDoesNotStandInForTheToken) {
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "0.0.0.0:0";
  options.token = kToken;
  options.tls_cert_pem = ReadTlsFile("test-cert.pem");
  options.tls_key_pem = ReadTlsFile("test-key.pem");
  ASSERT_FALSE(options.tls_cert_pem.empty()) << "test certificate missing";
  auto server = CollectorServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = (*server)->address().substr((*server)->address().rfind(':') + 1);
  const std::string host = NonLoopbackAddress();
  grpc::SslCredentialsOptions trusted;
  trusted.pem_root_certs = options.tls_cert_pem;
  grpc::ChannelArguments arguments;
  arguments.SetSslTargetNameOverride("localhost");  // the test certificate's name
  Client client((host.empty() ? "127.0.0.1" : host) + ":" + port, grpc::SslCredentials(trusted), arguments);

  for (const std::string& attempt : {std::string(), std::string("wrong")}) {
    EXPECT_EQ(client.Stream({Hello(Identity("job1"))}, attempt).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::WatchResponse state;
    EXPECT_EQ(client.WatchOnce(attempt, &state).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(client.Stream({Hello(Identity("job1")), Batch(1, {0})}, kToken).ok());
  v1::WatchResponse state;
  EXPECT_TRUE(client.WatchOnce(kToken, &state).ok());
  (*server)->Shutdown();
}

// Loopback is decided from IP literals: a host name that merely starts with "127." could
// resolve to any address, so it needs a token like any other.
TEST(CollectorTokenTest, OnlyLoopbackLiteralsCountAsLoopback) {
  for (const char* address : {"127.0.0.1:7777", "127.8.9.10:1", "localhost:7777", "[::1]:7777", "ipv4:127.0.0.1:1",
                              "ipv6:[::1]:1", "unix:/tmp/collwatch.sock", "unix-abstract:collwatch"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"127.example.com:7777", "127.0.0.1.nip.io:7777", "localhost.example.com:1", "0.0.0.0:7777",
                              "[::]:7777", "10.0.0.1:7777", "[::ffff:10.0.0.1]:1", "ipv4:10.0.0.1:1", "128.0.0.1:1",
                              "example.com:7777", "127.0.0.1", ":7777"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
  ScratchDir dir;
  CollectorOptions options = QuietOptions(dir.path() + "/out");
  options.listen = "127.attacker.example:0";
  auto server = CollectorServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
  EXPECT_NE(server.status().message().find("without a token"), std::string::npos) << server.status();
}

TEST(CollectorTokenTest, TokenComparisonIsExact) {
  EXPECT_TRUE(ConstantTimeEquals(kToken, kToken));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("", kToken));
  EXPECT_FALSE(ConstantTimeEquals(kToken, ""));
  const std::string token = kToken;
  EXPECT_FALSE(ConstantTimeEquals(token.substr(0, 5), token));
  EXPECT_FALSE(ConstantTimeEquals(token + '\0', token));  // a NUL does not end the comparison
  EXPECT_FALSE(ConstantTimeEquals(token, token + '\0'));
  std::string first_off = token;
  first_off.front() ^= 0x20;
  EXPECT_FALSE(ConstantTimeEquals(first_off, token));
}

}  // namespace
}  // namespace collwatch::collector_token_test
