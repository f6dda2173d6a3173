#include "dataplane/control/telemetry_guard.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace qs {
namespace {

constexpr std::string_view kCutMark = "...";
constexpr std::string_view kNotShown = "'[not shown]'";

bool printable(unsigned char c) { return c >= 0x20 && c < 0x7f; }

// What one byte becomes, and how many bytes DPDK writes for that.
std::string_view escape(unsigned char c, Newlines newlines, char (&buffer)[4]) {
  if (c == '\\') return "\\\\";
  if (printable(c) || (c == '\n' && newlines == Newlines::kKeep)) {
    buffer[0] = char(c);
    return {buffer, 1};
  }
  constexpr char kHex[] = "0123456789abcdef";
  buffer[0] = '\\';
  buffer[1] = 'x';
  buffer[2] = kHex[c >> 4];
  buffer[3] = kHex[c & 0xf];
  return {buffer, 4};
}

std::size_t json_length(char c) { return c == '"' || c == '\\' || c == '\n' ? 2 : 1; }

bool ascii_digit(char c) { return c >= '0' && c <= '9'; }

// Where the first ":LINE:COL: " ends in `text`, or npos.
std::size_t after_location(std::string_view text) {
  for (std::size_t at = text.find(':'); at != std::string_view::npos; at = text.find(':', at + 1)) {
    std::size_t i = at + 1;
    const std::size_t line = i;
    while (i < text.size() && ascii_digit(text[i])) ++i;
    if (i == line || i >= text.size() || text[i] != ':') continue;
    const std::size_t column = ++i;
    while (i < text.size() && ascii_digit(text[i])) ++i;
    if (i == column || i + 1 >= text.size() || text[i] != ':' || text[i + 1] != ' ') continue;
    return i + 2;
  }
  return std::string_view::npos;
}

ReloadPath refused(std::string why) {
  ReloadPath r;
  r.refusal = std::move(why);
  return r;
}

bool is_under(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const std::string p = path.string(), d = dir.string();
  if (d == "/") return p.size() > 1 && p[0] == '/';
  return p.size() > d.size() + 1 && p.compare(0, d.size(), d) == 0 && p[d.size()] == '/';
}

std::string resolved(const std::filesystem::path& path, int& error) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    error = errno;
    return {};
  }
  error = 0;
  return buffer;
}

}  // namespace

std::string telemetry_text(std::string_view text, std::size_t limit, Newlines newlines) {
  std::string out;
  std::size_t json = 0;
  // Where the text may be cut so that the mark still fits.
  std::size_t fits_with_mark = 0;
  const std::size_t mark_json = kCutMark.size();
  for (const char c : text) {
    char buffer[4];
    const std::string_view piece = escape(static_cast<unsigned char>(c), newlines, buffer);
    std::size_t piece_json = 0;
    for (const char e : piece) piece_json += json_length(e);
    if (json + piece_json > limit) {
      out.resize(fits_with_mark);
      if (limit >= mark_json) out += kCutMark;
      return out;
    }
    out += piece;
    json += piece_json;
    if (json + mark_json <= limit) fits_with_mark = out.size();
  }
  return out;
}

std::size_t telemetry_json_length(std::string_view safe_text) {
  std::size_t n = 0;
  for (const char c : safe_text) n += json_length(c);
  return n;
}

std::string telemetry_name(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || ascii_digit(c) || c == '_' || c == '/';
    if (!allowed) c = '_';
  }
  return out;
}

std::string without_file_content(std::string_view answer) {
  const std::size_t located = after_location(answer);
  if (located == std::string_view::npos) return std::string(answer);
  std::string out(answer.substr(0, located));
  std::string_view rest = answer.substr(located);
  // "KEY: unknown key (allowed here: ...)": KEY ends in the file's own name.
  // Searched for, not split at the first ": ", since a quoted key may hold one.
  if (const std::size_t unknown = rest.find(": unknown key ("); unknown != std::string_view::npos) {
    rest = rest.substr(unknown + 2);
  } else if (rest.substr(0, 14) == "syntax error: ") {
    // yaml-cpp appends the offending character to some of its messages.
    return out + "syntax error (the details are in quicsteer's log)";
  }
  // The profile loader quotes what it read ('...', "the quoted string
  // '...'"), and the value may hold quotes itself: from the first quote to
  // the last, whatever pairs them.
  const std::size_t first = rest.find_first_of("'\"");
  if (first == std::string_view::npos) return out + std::string(rest);
  const std::size_t last = rest.find_last_of("'\"");
  out += rest.substr(0, first);
  out += kNotShown;
  out += rest.substr(last + 1);
  return out;
}

// Why a telemetry reload may name a file at all, and only one beside the
// running profile: with no path, switching to a prepared profile (blue/green,
// a rollback to the previous file) would mean rewriting the live file in
// place, which a SIGHUP or a restart then reads half-written. Whoever may put
// files in the profile's directory configures quicsteer anyway; everywhere
// else (keys, /etc, other services) stays out of reach. Relative paths are
// taken from that directory, so a client needs no knowledge of quicsteer's
// working directory. A path that does not resolve is refused as outside
// unless its own spelling stays inside, so that the refusal never tells
// whether a file elsewhere exists; one that stays inside is refused as the
// loader refuses any missing profile. A refusal here
// never reaches the control loop: the telemetry command answers it, logs it
// and counts it in reloads_refused (LiveView::count_reload).
ReloadPath confine_reload_path(const std::string& requested, const std::string& profile_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir_given = fs::absolute(fs::path(profile_path), ec).parent_path();
  int error = 0;
  const std::string dir = resolved(dir_given, error);
  if (dir.empty()) {
    return refused("the running profile's directory cannot be resolved (" + std::string(std::strerror(error)) + ")");
  }
  const fs::path asked = fs::path(requested).is_absolute() ? fs::path(requested) : fs::path(dir) / requested;
  const std::string outside = requested + ": not under " + dir +
                              ", the running profile's directory (a reload over telemetry reads only files there)";
  const std::string real = resolved(asked, error);
  if (real.empty()) {
    const fs::path spelled = asked.lexically_normal();
    if (!is_under(spelled, dir_given.lexically_normal()) && !is_under(spelled, dir)) return refused(outside);
    // Inside as spelled: refused as the loader refuses a missing profile.
    return refused(spelled.string() + ": cannot open: " + std::strerror(error));
  }
  if (!is_under(real, dir)) return refused(outside);
  // `real` has no symlink and no '..' in it: opened beneath the directory, a
  // symlink that took the file's (or a directory's) place since realpath
  // cannot lead out, and what the reload reads is what is open now.
  FileDescriptor file = open_beneath(dir, real.substr(dir == "/" ? 1 : dir.size() + 1), error);
  if (!file) {
    if (error == EXDEV || error == ELOOP || error == ENOTDIR) return refused(outside);
    return refused(real + ": cannot open: " + std::strerror(error));
  }
  return {real, {}, std::move(file)};
}

FileDescriptor open_beneath(const std::string& dir, const std::string& relative, int& error) {
  // O_NONBLOCK: a FIFO put there does not wait for a writer (the loader then
  // refuses it as not a regular file); O_NOCTTY: a terminal does not become
  // quicsteer's.
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  const FileDescriptor base(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!base) {
    error = errno;
    return {};
  }
  open_how how{};
  how.flags = kFlags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = -1;
  // EAGAIN: a rename raced the walk, and the kernel could not tell that a
  // '..' stayed beneath; trying again is what openat2(2) advises.
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, base.get(), relative.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) break;
  }
  if (fd >= 0) {
    error = 0;
    return FileDescriptor(int(fd));
  }
  if (errno != ENOSYS) {
    error = errno;
    return {};
  }
  // No openat2 (Linux before 5.6): one component at a time, following no
  // symlink at all.
  FileDescriptor at;
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = relative.find('/', from);
    const std::string name = relative.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    if (name.empty() || name == "." || name == "..") {
      error = EXDEV;
      return {};
    }
    const int parent = at ? at.get() : base.get();
    const bool last = slash == std::string::npos;
    FileDescriptor next(::openat(parent, name.c_str(), last ? kFlags | O_NOFOLLOW
                                                            : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      error = errno;
      return {};
    }
    if (last) {
      error = 0;
      return next;
    }
    at = std::move(next);
    from = slash + 1;
  }
}

}  // namespace qs
