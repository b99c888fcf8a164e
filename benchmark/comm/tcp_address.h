// The TCP communicator's addresses (internal to benchmark/comm): this host's name, a name
// resolved, and the address on this host that the other ranks can dial. No LibTorch.
#pragma once

#include <string>

namespace mrcnn::comm::tcp {

std::string host_name();  // "?" when it cannot be read

// Resolves HOST to its first IPv4 address ("" when it does not resolve).
std::string resolve(const std::string& host);

// This host's address on the route to `peer_ip` ("" when there is none).
std::string local_address_towards(const std::string& peer_ip);

// The address the other ranks dial: `route_ip`, or, where that route is loopback (rank 0's host,
// whose name Debian maps to 127.0.1.1), the first non-loopback IPv4 address of an interface that
// is up; loopback only where there is none.
std::string reachable_address(const std::string& route_ip);

}  // namespace mrcnn::comm::tcp
