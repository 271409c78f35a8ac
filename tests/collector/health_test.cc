// The collector's grpc.health.v1 service as a Kubernetes probe sees it: asked with the
// standard health stub (compiled from tests/support/grpc_health_v1.proto) and no token,
// it says SERVING for the whole server and for collwatch.v1.Collector, and NOT_FOUND for
// a service it does not serve; the Collector service itself still refuses the tokenless.
// Threading: single-threaded test code over an in-process collector server.
#include <chrono>
#include <memory>
#include <string>

#include "collector/collector_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/grpc_health_v1.grpc.pb.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CollectorOptions options;
    options.listen = "127.0.0.1:0";
    options.out_dir = dir_.path() + "/store";
    options.token = "a-token-the-probe-does-not-have";
    options.log = false;
    absl::StatusOr<std::unique_ptr<CollectorServer>> started = CollectorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }

  // The health service's answer for `service`, asked without a token.
  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    HealthCheckRequest request;
    request.set_service(service);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return Health::NewStub(channel_)->Check(&context, request, response);
  }

  testing::TempDir dir_;
  std::unique_ptr<CollectorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(HealthTest, ServingForTheServerAndTheCollectorServiceWithoutAToken) {
  for (const std::string service : {"", kCollectorServiceName}) {
    HealthCheckResponse response;
    const grpc::Status status = Check(service, &response);
    ASSERT_TRUE(status.ok()) << "'" << service << "': " << status.error_message();
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << "'" << service << "'";
  }
}

TEST_F(HealthTest, AServiceItDoesNotServeIsNotFound) {
  HealthCheckResponse response;
  EXPECT_EQ(Check("collwatch.v1.NoSuchService", &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HealthTest, TheCollectorServiceStillWantsItsToken) {
  // The probe's way in opens no other: a tokenless TakeStacks is refused as before.
  v1::TakeStacksRequest request;
  v1::TakeStacksResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(v1::Collector::NewStub(channel_)->TakeStacks(&context, request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(HealthTest, NotServingOnceShuttingDown) {
  // Shutdown first turns the health service to NOT_SERVING; a Watch sees that last word
  // before the port closes.
  HealthCheckRequest request;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch = Health::NewStub(channel_)->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  server_->Shutdown();
  ASSERT_TRUE(watch->Read(&response)) << "the watch ended without a word";
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
}

}  // namespace
}  // namespace collwatch
