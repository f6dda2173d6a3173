// A listening address (telemetry.prometheus_listen), apart from the profile
// so that the metrics endpoint includes this and not the profile loader.
#pragma once

#include <cstdint>
#include <string>

namespace qs {

// telemetry.prometheus_listen, decoded: "127.0.0.1:9464" or "[::1]:9464".
struct ListenAddress {
  bool ipv6 = false;
  std::string host;  // the address without brackets
  std::uint16_t port = 0;
};
// False unless `text` is an IPv4 dotted quad or a bracketed IPv6 address,
// a colon and a decimal port 0..65535 (0: any free port, chosen when the
// endpoint starts and printed then).
bool parse_listen_address(const std::string& text, ListenAddress& out);

}  // namespace qs
