// "ADDRESS:PORT" as the profile and the command line spell a listen address.
#include "dataplane/config/listen_address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

namespace qs {

bool parse_listen_address(const std::string& text, ListenAddress& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) return false;
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const unsigned long number = std::stoul(port);
  if (number > 65535) return false;
  bool ipv6 = false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
    ipv6 = true;
  }
  unsigned char buffer[16];
  if (inet_pton(ipv6 ? AF_INET6 : AF_INET, host.c_str(), buffer) != 1) return false;
  out.ipv6 = ipv6;
  out.host = host;
  out.port = static_cast<std::uint16_t>(number);
  return true;
}

}  // namespace qs
