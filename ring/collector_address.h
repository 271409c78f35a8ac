// The one check of a collector's address, for every side that takes one: the preload's
// COLLWATCH_COLLECTOR (before it spawns an agent), the CLI's --collector options (agent,
// run, top) and the collector's --listen. gRPC takes a port of 99999 as 34463 (modulo
// 65536) and dials it without a word. Dependency-free, like the rest of what the preload
// shares. Threading: pure functions; no allocation, noexcept.
#ifndef COLLWATCH_RING_COLLECTOR_ADDRESS_H_
#define COLLWATCH_RING_COLLECTOR_ADDRESS_H_

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace collwatch {

// What may name a collector:
//   unix:PATH            a unix socket (PATH not empty)
//   unix-abstract:NAME   an abstract unix socket (Linux)
//   HOST:PORT            an IPv4 address or a host name; [V6]:PORT for IPv6; gRPC's
//                        ipv4:, ipv6: and dns: prefixes before them are allowed
// PORT is decimal, from `min_port` to 65535: 1 for a collector to dial, 0 to listen (0:
// any free port). True when `address` is one; else false and `why` (`size` bytes) says
// what is wrong and what to give, naming the address.
inline bool CheckCollectorAddress(const char* address, int min_port, char* why, size_t size) noexcept {
  auto starts = [address](const char* prefix) { return std::strncmp(address, prefix, std::strlen(prefix)) == 0; };
  const char* give = min_port == 0 ? "give HOST:PORT with a port from 0 to 65535 (0: any free one), or unix:PATH"
                                   : "give HOST:PORT with a port from 1 to 65535, or unix:PATH";
  for (const char* socket_prefix : {"unix:", "unix-abstract:"}) {
    if (!starts(socket_prefix)) continue;
    if (address[std::strlen(socket_prefix)] != '\0') return true;
    std::snprintf(why, size, "'%s' names no socket: give %sPATH", address, socket_prefix);
    return false;
  }
  const char* rest = address;
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (starts(scheme)) {
      rest = address + std::strlen(scheme);
      break;
    }
  }
  const char* colon = std::strrchr(rest, ':');
  if (colon == nullptr || colon == rest) {
    std::snprintf(why, size, "'%s' has %s: %s", address, colon == nullptr ? "no port" : "no host", give);
    return false;
  }
  // A colon in the host is IPv6, which needs its brackets ("[::1]:7777"): "::1:7777"
  // would take the address's last group for the port.
  const bool bracketed = rest[0] == '[' && colon[-1] == ']';
  for (const char* c = rest; c < colon; ++c) {
    if (*c == ':' && !bracketed) {
      std::snprintf(why, size, "'%s': an IPv6 address goes in brackets, as [::1]:7777; %s", address, give);
      return false;
    }
  }
  const char* port = colon + 1;
  long value = 0;
  size_t digits = 0;
  for (; port[digits] >= '0' && port[digits] <= '9' && digits < 6; ++digits) value = value * 10 + (port[digits] - '0');
  if (digits == 0 || port[digits] != '\0') {
    std::snprintf(why, size, "'%s': port '%s' is not a number; %s", address, port, give);
    return false;
  }
  if (value < min_port || value > 65535) {
    std::snprintf(why, size, "'%s': port %s is out of range; %s", address, port, give);
    return false;
  }
  return true;
}

}  // namespace collwatch

#endif  // COLLWATCH_RING_COLLECTOR_ADDRESS_H_
