// A loopback TCP port nobody listens on now, for a server that binds it a moment later:
// the bundled trainer's rendezvous store, the tests' collectors and metrics servers.
// Ports are taken below Linux's ephemeral range (32768-60999), which the kernel hands out
// to every bind to port 0 and every outgoing connection: a port it had just given us could
// go to another process before our server bound it (seen twice: EADDRINUSE beside other
// tests' servers and clients). Each candidate is checked by binding it. Dependency-free.
// Threading: a pure function of the process and the clock; no shared state.
#ifndef COLLWATCH_RING_LOOPBACK_PORT_H_
#define COLLWATCH_RING_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace collwatch {

inline constexpr int kFirstPickedPort = 20000;
inline constexpr int kPickedPortCount = 32768 - kFirstPickedPort;  // [20000, 32768)
inline constexpr int kLastPickedPort = kFirstPickedPort + kPickedPortCount - 1;
inline constexpr int kPickAttempts = 200;

// A port in [kFirstPickedPort, kLastPickedPort] that could be bound on 127.0.0.1 just now; -1 when
// none of `attempts` candidates could (or no socket could be made). Candidates are spread
// by the pid and the clock, so that processes picking at once rarely try the same ones.
inline int PickLoopbackPort(int attempts = kPickAttempts) noexcept {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const auto seed = static_cast<unsigned>(getpid()) * 2654435761u +
                    static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int port =
        kFirstPickedPort + static_cast<int>((seed + static_cast<unsigned>(attempt) * 7919u) % kPickedPortCount);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      close(fd);
      return port;
    }
  }
  close(fd);
  return -1;
}

}  // namespace collwatch

#endif  // COLLWATCH_RING_LOOPBACK_PORT_H_
