// Loading a profile: the file read with care (regular files only, bounded),
// one YAML document parsed, then decoded (profile_decoder.cpp).
#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "dataplane/config/profile.h"
#include "dataplane/config/profile_decoder.h"
#include "dataplane/config/yaml_reader.h"

namespace qs {

int Profile::port_index(const std::string& name) const {
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Records where each document of a YAML stream starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

Profile parse_profile(const std::string& yaml_text, const std::string& name) {
  const config::Decoder decoder(name);
  YAML::Node root;
  DocumentStarts starts;
  try {
    // At most two documents are looked at: yaml-cpp 0.7's LoadAll() never
    // returns when text is left over after a document (e.g. `"a", "b"`), so
    // the stream is walked one document at a time and the profile is Load()ed.
    std::istringstream stream(yaml_text);
    YAML::Parser parser(stream);
    for (int i = 0; i < 2 && parser.HandleNextDocument(starts); ++i) {
    }
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    decoder.fail(e.mark, "syntax error", e.msg);
  }
  if (starts.marks.size() > 1) {
    decoder.fail(starts.marks[1], "", "a profile is one YAML document, but more follows the first");
  }
  if (!root.IsDefined() || root.IsNull()) decoder.fail(YAML::Mark::null_mark(), "", "the profile is empty");
  Profile profile;
  profile.path = name;
  config::decode_profile(decoder, root, profile);
  return profile;
}

Profile load_profile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file) {
    const int error = errno;
    throw ProfileError(path + ": cannot open: " + std::strerror(error));
  }
  return load_profile(std::move(file), path);
}

Profile load_profile(FileDescriptor file, const std::string& path) {
  const int fd = file.get();
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    throw ProfileError(path + ": cannot read: " + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw ProfileError(path + ": cannot read: Is " + std::string(kind) +
                       "; a profile must be a regular file (at most " + std::to_string(kMaxProfileBytes >> 20) +
                       " MiB)");
  }
  const auto too_large = [&] {
    throw ProfileError(path + ": cannot read: larger than " + std::to_string(kMaxProfileBytes >> 20) +
                       " MiB, the most a profile may be");
  };
  if (std::uint64_t(st.st_size) > kMaxProfileBytes) too_large();
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      throw ProfileError(path + ": cannot read: " + std::strerror(error));
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxProfileBytes) too_large();  // it grew while being read
  }
  file.close();
  return parse_profile(text, path);
}

double parse_seconds(const std::string& text, const std::string& what, double min, double max) {
  double value = 0;
  switch (config::parse_real(text, min, max, value)) {
    case config::RealParse::kOk: return value;
    case config::RealParse::kNotANumber:
      throw ProfileError(what + ": expected a number of seconds (decimal, e.g. 1.5), got '" + text + "'");
    case config::RealParse::kOutOfRange: break;
  }
  throw ProfileError(what + ": must be in " + config::format_real(min) + ".." + config::format_real(max) +
                     " seconds, got '" + text + "'");
}

std::optional<Profile> load_profile_or_report(const std::string& path) {
  try {
    Profile profile = load_profile(path);
    for (const std::string& warning : profile.warnings) std::fprintf(stderr, "%s\n", warning.c_str());
    return profile;
  } catch (const ProfileError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return std::nullopt;
  }
}

}  // namespace qs
