// serve/origin_check.h - which Host and Origin headers a request may carry: against DNS rebinding and against other
// sites' pages driving a server that has no API key.
//
// A page on evil.example can make the browser send requests to 127.0.0.1 (an <img>, a form, a fetch in no-cors
// mode), and with DNS rebinding read the answers too, its own name then pointing at 127.0.0.1. Rebinding needs a
// name: so a keyless server answers only Host headers that are IP literals, localhost, its --host, or an
// --allowed-host name. A browser names the page that sent a request in Origin: the server's own page (same origin as
// the Host) and the --cors origins are let through, any other is refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace seedling::serve {

// The name or address of a Host header value, without its port or IPv6 brackets, lowercased.
std::string host_name(std::string_view host_header);

// Whether a keyless server answers a request with this Host header: an IP literal, "localhost", or one of `names`.
bool host_allowed(std::string_view host_header, const std::vector<std::string>& names);

// Whether a page of `origin` may call the server reached as `host_header`: its own origin, or one of `cors` ("*":
// any).
bool origin_allowed(std::string_view origin, std::string_view host_header, const std::vector<std::string>& cors);

}  // namespace seedling::serve
