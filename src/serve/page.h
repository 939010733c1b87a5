// serve/page.h - the chat page served at /: src/serve/page/index.html, embedded byte for byte at build time
// (cmake/embed_file.cmake), so the binary needs no file beside it.
#pragma once

#include <string_view>

extern const unsigned char seedling_chat_page[];
extern const unsigned long seedling_chat_page_size;

namespace seedling::serve {

inline std::string_view chat_page() {
  return {reinterpret_cast<const char*>(seedling_chat_page), seedling_chat_page_size};
}

}  // namespace seedling::serve
