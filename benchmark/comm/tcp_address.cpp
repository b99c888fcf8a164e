#include "benchmark/comm/tcp_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mrcnn::comm::tcp {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Resolves HOST to its first IPv4 address ("" when it does not resolve).
std::string resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof text);
  freeaddrinfo(res);
  return text;
}

// This host's address on the route to `peer` (what the other ranks can reach when they reach
// the store's host): a UDP socket connected there sends nothing but learns its source address.
std::string local_address_towards(const std::string& peer_ip) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return "";
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  inet_pton(AF_INET, peer_ip.c_str(), &to.sin_addr);
  sockaddr_in me{};
  socklen_t len = sizeof me;
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &me.sin_addr, text, sizeof text);
    out = text;
  }
  close(fd);
  return out;
}

// The address the other ranks dial: this host's address on the route to the store's host, or,
// where that route is loopback (rank 0's host, whose name Debian maps to 127.0.1.1), the first
// non-loopback IPv4 address of an interface that is up; loopback only where there is none.
std::string reachable_address(const std::string& route_ip) {
  if (route_ip.rfind("127.", 0) != 0) return route_ip;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return route_ip;
  std::string out = route_ip;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_RUNNING) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    out = text;
    break;
  }
  freeifaddrs(list);
  return out;
}

}  // namespace mrcnn::comm::tcp
