// A client channel to a collector. Threading: pure functions (see collector_channel.h).
#include "proto/collector_channel.h"

namespace collwatch {

std::shared_ptr<grpc::Channel> CollectorChannel(const std::string& address, const std::string& tls_ca_pem,
                                                grpc::ChannelArguments arguments) {
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the least time a
  // connection attempt gets (default 20 s). At 100 ms a TLS handshake on a loaded node or a
  // slow link never finished and the agent could never connect.
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

}  // namespace collwatch
