// What a printing function writes to a FILE*, as a string: the tests of the
// summary, the live table and the counter list read their text from it.
#pragma once

#include <cstdio>
#include <string>

namespace qs {

template <typename F>
std::string capture(F print) {
  std::FILE* f = std::tmpfile();
  print(f);
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace qs
