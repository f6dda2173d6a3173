// What the /quicsteer/* telemetry commands let out and take in (issue 29):
// text made printable ASCII before DPDK sees it, a reload's answer without
// the content of the file it refused, and reload paths kept to the running
// profile's own directory. No DPDK here: the rules are tested without EAL.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dataplane/config/file_descriptor.h"

namespace qs {

enum class Newlines { kEscape, kKeep };

// `text` as printable ASCII, for any string handed to DPDK telemetry.
// DPDK 22.11's JSON escaper (lib/telemetry/telemetry_json.h) escapes '"',
// '\\', '\n', '\r' and '\t', silently drops every other control character
// and indexes its table with a negative value for a byte >= 0x80, which reads
// outside the table and can make every later answer invalid JSON. So every
// byte below 0x20 (but '\n' when `newlines` is kKeep), 0x7f and every byte
// >= 0x80 is written as \xNN (two lower-case hex digits), and '\\' as "\\\\",
// so that the text shown still tells each original byte apart. '"' is left
// to DPDK, which escapes it.
//
// The result takes at most `limit` bytes once DPDK has escaped it ('"',
// '\\' and a kept '\n' take two), so that it fits DPDK's string limits even
// as JSON; a longer text is cut between escapes and ends in "...".
std::string telemetry_text(std::string_view text, std::size_t limit, Newlines newlines = Newlines::kEscape);
// How many bytes DPDK writes for a text telemetry_text() returned.
std::size_t telemetry_json_length(std::string_view safe_text);

// A dict key for DPDK telemetry, which takes only ASCII letters, digits, '_'
// and '/' in names: every other byte becomes '_'.
std::string telemetry_name(std::string_view text);

// A reload's answer or the last reload's outcome, as telemetry may show it.
// A profile that fails to load is refused with "FILE:LINE:COL: KEY: what is
// wrong", and "what is wrong" quotes the file ("got '...'"): a file that is
// one YAML scalar, such as a PEM key, would come back whole. From the first
// ":LINE:COL: " on, everything quoted is replaced by '[not shown]', an
// unknown key (a name from the file) is left out and a YAML syntax error
// keeps only its kind. Text without such a location (applied, a change the
// data path cannot take, a file that cannot be opened) comes from a valid
// profile or from quicsteer itself and is kept. quicsteer's own log keeps
// the full message.
std::string without_file_content(std::string_view answer);

// A path given to /quicsteer/reload, checked against the running profile's
// path, and the file opened. Relative paths are read from the profile's
// directory; the path must resolve (realpath: '..' and symlinks followed) to
// a file under that directory, resolved the same way, and that file is then
// opened beneath the directory (open_beneath), so that a symlink put in its
// place after the check leads nowhere outside. `path` is the resolved path
// and `file` the open file, which the reload reads (never the path again);
// otherwise `refusal` says why, naming only what was asked (or, for a file
// inside that cannot be opened, its path and the error).
struct ReloadPath {
  std::string path;
  std::string refusal;
  FileDescriptor file;
};
ReloadPath confine_reload_path(const std::string& requested, const std::string& profile_path);

// Opens `relative` for reading beneath the directory `dir`, never leaving it:
// openat2(2) with RESOLVE_BENEATH ('..' above it and absolute symlinks are
// refused with EXDEV, a symlink leading out too); before Linux 5.6, one
// component at a time with O_NOFOLLOW (every symlink refused, ELOOP or
// ENOTDIR). Empty, with `error` set, when it cannot.
FileDescriptor open_beneath(const std::string& dir, const std::string& relative, int& error);

}  // namespace qs
