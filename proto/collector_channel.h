// The client side of the wire: a channel to a collector and the metadata that carries
// the shared secret, for every client (node agents, dashboards) and the service that
// checks it. Threading: pure functions.
#ifndef COLLWATCH_PROTO_COLLECTOR_CHANNEL_H_
#define COLLWATCH_PROTO_COLLECTOR_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace collwatch {

// Call metadata that carries the shared secret.
inline constexpr char kTokenMetadataKey[] = "x-collwatch-token";

// A client channel to a collector (agents, dashboards): TLS when `tls_ca_pem` holds root
// certificates, and gRPC's reconnect backoff kept short on top of `arguments`, since
// callers pace their own retries and a restarted collector should be seen soon.
std::shared_ptr<grpc::Channel> CollectorChannel(const std::string& address, const std::string& tls_ca_pem,
                                                grpc::ChannelArguments arguments = {});

}  // namespace collwatch

#endif  // COLLWATCH_PROTO_COLLECTOR_CHANNEL_H_
