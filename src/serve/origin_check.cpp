#include "serve/origin_check.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace seedling::serve {

std::string host_name(std::string_view h) {
  std::string_view name = h;
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    name = close == std::string_view::npos ? h.substr(1) : h.substr(1, close - 1);
  } else if (const size_t colon = h.find(':'); colon != std::string_view::npos && h.find(':', colon + 1) == h.npos) {
    name = h.substr(0, colon);
  }
  std::string out(name);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (!out.empty() && out.back() == '.') out.pop_back();  // "localhost." is localhost
  return out;
}

bool host_allowed(std::string_view host_header, const std::vector<std::string>& names) {
  const std::string name = host_name(host_header);
  if (name.empty()) return false;
  unsigned char addr[16];
  if (inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1) return true;
  if (name == "localhost") return true;
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return host_name(n) == name; });
}

bool origin_allowed(std::string_view origin, std::string_view host_header, const std::vector<std::string>& cors) {
  if (origin == "http://" + std::string(host_header)) return true;
  return std::any_of(cors.begin(), cors.end(), [&](const std::string& c) { return c == "*" || c == origin; });
}

}  // namespace seedling::serve
