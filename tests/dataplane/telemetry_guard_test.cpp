// What the /quicsteer/* telemetry commands let out and take in (issue 29),
// without EAL: the printable-ASCII text every string goes through, reload
// answers without the refused file's content (on the profile loader's real
// messages), and reload paths kept to the running profile's directory.
#include "dataplane/control/telemetry_guard.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "dataplane/config/profile.h"

namespace qs {
namespace {

constexpr std::size_t kNoLimit = std::string::npos;

bool printable_ascii(const std::string& s, bool newlines_allowed = false) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && !(newlines_allowed && c == '\n')) || u >= 0x7f) return false;
  }
  return true;
}

TEST(TelemetryText, PrintableAsciiPassesUnchanged) {
  const std::string text = "refused: /etc/quicsteer/b.yaml:3:7: steering.servers[0].owner: must be in 1..2, got 9";
  EXPECT_EQ(telemetry_text(text, kNoLimit), text);
}

TEST(TelemetryText, BytesAbove0x7fAreEscaped) {
  // "café" in UTF-8, and a lone byte that is no UTF-8 at all.
  EXPECT_EQ(telemetry_text("caf\xc3\xa9.yaml", kNoLimit), "caf\\xc3\\xa9.yaml");
  EXPECT_EQ(telemetry_text("\xff\x80", kNoLimit), "\\xff\\x80");
}

TEST(TelemetryText, ControlCharactersAreEscapedNotDropped) {
  // DPDK drops these silently: "a\x01b" would show as another file, "ab".
  EXPECT_EQ(telemetry_text("a\x01" "b", kNoLimit), "a\\x01b");
  EXPECT_EQ(telemetry_text("\x1b[31mred\x7f", kNoLimit), "\\x1b[31mred\\x7f");
  EXPECT_EQ(telemetry_text("tab\there\r\n", kNoLimit), "tab\\x09here\\x0d\\x0a");
  EXPECT_EQ(telemetry_text(std::string("nul\0after", 9), kNoLimit), "nul\\x00after");
}

TEST(TelemetryText, NewlinesKeptOnlyWhenAsked) {
  EXPECT_EQ(telemetry_text("a: 1\nb: 2\n", kNoLimit, Newlines::kKeep), "a: 1\nb: 2\n");
  EXPECT_EQ(telemetry_text("a\r\n\x02", kNoLimit, Newlines::kKeep), "a\\x0d\n\\x02");
}

TEST(TelemetryText, QuotesAreLeftToDpdkBackslashesAreDoubled) {
  // DPDK escapes '"' and '\\' itself; a backslash is doubled here so that a
  // file really named "a\x41" is not shown as the escaped "aA".
  EXPECT_EQ(telemetry_text("say \"hi\"", kNoLimit), "say \"hi\"");
  EXPECT_EQ(telemetry_text("a\\x41", kNoLimit), "a\\\\x41");
}

TEST(TelemetryText, EveryByteComesOutPrintableAscii) {
  std::string all;
  for (int b = 1; b < 256; ++b) all += char(b);
  const std::string out = telemetry_text(all, kNoLimit);
  EXPECT_TRUE(printable_ascii(out)) << out;
  EXPECT_TRUE(printable_ascii(telemetry_text(all, kNoLimit, Newlines::kKeep), true));
}

TEST(TelemetryText, CutToTheLimitAsDpdkWritesItNeverInsideAnEscape) {
  EXPECT_EQ(telemetry_text("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(telemetry_text("abcdefghijk", 10), "abcdefg...");
  // "\xc3" is four bytes, and its backslash is written twice by DPDK.
  const std::string cut = telemetry_text("ab\xc3\xa9\xc3\xa9", 12);
  EXPECT_EQ(cut, "ab\\xc3...");
  EXPECT_LE(telemetry_json_length(cut), 12u);
  // A quote or a backslash counts twice, as DPDK writes it.
  EXPECT_EQ(telemetry_json_length(telemetry_text("\"\"\"\"\"\"", 10)), 9u);
  EXPECT_EQ(telemetry_text("\"\"\"\"\"\"", 10), "\"\"\"...");
  for (std::size_t limit = 0; limit < 40; ++limit) {
    const std::string out = telemetry_text("\\\x01\xfe\"\n" "abc\xc3\xa9\\\"\x7f", limit);
    EXPECT_LE(telemetry_json_length(out), limit) << limit;
  }
}

TEST(TelemetryName, OnlyAsciiLettersDigitsUnderscoreSlash) {
  EXPECT_EQ(telemetry_name("wire/0"), "wire/0");
  EXPECT_EQ(telemetry_name("caf\xc3\xa9-1 x"), "caf___1_x");
}

// --- reload answers ---

// The loader's own message for `yaml`, as main.cpp's reload answers quote it.
std::string refusal_of(const std::string& yaml, const std::string& name) {
  try {
    parse_profile(yaml, name);
  } catch (const ProfileError& e) {
    return std::string("refused: ") + e.what() + "; steering generation 1 stays live";
  }
  ADD_FAILURE() << "accepted: " << yaml;
  return {};
}

TEST(ReloadAnswer, APemKeyIsNotQuotedBack) {
  const std::string pem =
      "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCSECRETSECRET\n-----END PRIVATE KEY-----\n";
  const std::string full = refusal_of(pem, "/etc/quicsteer/key.pem");
  // The loader quotes the start of it (at most 64 octets, for the log).
  ASSERT_NE(full.find("got '-----BEGIN PRIVATE KEY----- MIIEvQ"), std::string::npos) << "the loader quotes it: " << full;
  const std::string shown = without_file_content(full);
  EXPECT_EQ(shown.find("SECRET"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("PRIVATE"), std::string::npos) << shown;
  EXPECT_EQ(shown, "refused: /etc/quicsteer/key.pem:1:1: (top level): expected a map, got '[not shown]'; "
                   "steering generation 1 stays live");
}

TEST(ReloadAnswer, NoQuotedValueOrUnknownKeyComesBack) {
  const char* const files[] = {
      "SECRET\n",                                        // one scalar
      "'SECRET'\n",                                      // a quoted scalar
      "\"it's a SECRET\"\n",                             // quotes inside the value
      "[SECRET, 2]\n",                                   // a list
      "token_SECRET: 1\n",                               // an unknown key
      "\"key: with SECRET\": 1\n",                       // an unknown key with ": " inside
      "eal: SECRET\n",                                   // a known key, a wrong value
      "eal: [\"--a\"]\nports: SECRET\n",                 // and further down
      "ports:\n  - {name: \"SECRET\", device: net_null0}\n",
      "steering: {short_dcid_len: \"SECRET\"}\n",
      "a: \"\\qSECRET\"\n",                              // a YAML syntax error
      "{SECRET: [}\n",                                   // another
  };
  for (const char* yaml : files) {
    const std::string full = refusal_of(yaml, "/etc/quicsteer/x.yaml");
    const std::string shown = without_file_content(full);
    EXPECT_EQ(shown.find("SECRET"), std::string::npos) << yaml << "\n  full:  " << full << "\n  shown: " << shown;
    EXPECT_EQ(shown.rfind("refused: /etc/quicsteer/x.yaml:", 0), 0u) << shown;
  }
}

TEST(ReloadAnswer, KeepsTheLocationAndTheReason) {
  EXPECT_EQ(without_file_content(refusal_of("steering: {short_dcid_len: 21}\n", "p.yaml")),
            "refused: p.yaml:1:1: ports: required key is missing; steering generation 1 stays live");
  const std::string range =
      "refused: /p/invalid.yaml:11:19: steering.short_dcid_len: must be in 0..20, got 21; steering generation 1 stays live";
  EXPECT_EQ(without_file_content(range), range);
  EXPECT_EQ(without_file_content("refused: /p/x.yaml:2:3: eal: expected a list, got 'x'; steering generation 4 stays live"),
            "refused: /p/x.yaml:2:3: eal: expected a list, got '[not shown]'; steering generation 4 stays live");
  EXPECT_EQ(without_file_content(refusal_of("bogus: 1\n", "p.yaml")).substr(0, 43),
            "refused: p.yaml:1:1: unknown key (allowed h");
  EXPECT_EQ(without_file_content(refusal_of("a: \"\\q\"\n", "p.yaml")),
            "refused: p.yaml:1:7: syntax error (the details are in quicsteer's log)");
}

TEST(ReloadAnswer, WithoutALocationTheAnswerIsKept) {
  // Applied, a valid profile the data path cannot take, a file not opened:
  // nothing of a file that is not a profile.
  for (const std::string& answer : {
           std::string("applied: steering generation 2 is live: QUIC-LB configs [0,1] (4 servers)"),
           std::string("refused: /p/rings.yaml: rings.size: was '512', now '1024'; steering generation 1 stays live"),
           std::string("refused: /p/absent.yaml: cannot open: No such file or directory; steering generation 1 stays live"),
       }) {
    EXPECT_EQ(without_file_content(answer), answer);
  }
}

// --- reload paths ---

class ReloadPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/qs-reload-path-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    dir_ = root_ / "profiles";
    std::filesystem::create_directory(dir_);
    touch(dir_ / "live.yaml");
    touch(dir_ / "blue.yaml");
    touch(root_ / "outside.yaml");
    std::filesystem::create_directory(dir_ / "sub");
    touch(dir_ / "sub" / "green.yaml");
    std::filesystem::create_symlink(root_ / "outside.yaml", dir_ / "leaves.yaml");
    std::filesystem::create_symlink(dir_ / "blue.yaml", dir_ / "stays.yaml");
    live_ = (dir_ / "live.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  static void touch(const std::filesystem::path& p) { std::ofstream(p) << "x: 1\n"; }
  std::string real(const std::filesystem::path& p) const { return std::filesystem::canonical(p).string(); }

  std::filesystem::path root_, dir_;
  std::string live_;
};

TEST_F(ReloadPathTest, FilesInTheProfilesDirectoryAreTaken) {
  EXPECT_EQ(confine_reload_path((dir_ / "blue.yaml").string(), live_).path, real(dir_ / "blue.yaml"));
  EXPECT_EQ(confine_reload_path("blue.yaml", live_).path, real(dir_ / "blue.yaml"));  // relative to the directory
  EXPECT_EQ(confine_reload_path("sub/green.yaml", live_).path, real(dir_ / "sub" / "green.yaml"));
  EXPECT_EQ(confine_reload_path("sub/../blue.yaml", live_).path, real(dir_ / "blue.yaml"));
  EXPECT_EQ(confine_reload_path("stays.yaml", live_).path, real(dir_ / "blue.yaml"));  // a symlink that stays
}

TEST_F(ReloadPathTest, EverythingElseIsRefusedNamingOnlyWhatWasAsked) {
  for (const std::string& asked : {(root_ / "outside.yaml").string(), std::string("../outside.yaml"),
                                  std::string("leaves.yaml"), std::string("/etc/passwd"), std::string("/etc/shadow"),
                                  std::string("sub/../../outside.yaml"), std::string("/nonexistent/x.yaml"),
                                  std::string("../absent.yaml"), std::string("."), std::string("sub/..")}) {
    const ReloadPath r = confine_reload_path(asked, live_);
    EXPECT_TRUE(r.path.empty()) << asked << " -> " << r.path;
    EXPECT_EQ(r.refusal.rfind(asked + ": not under " + real(dir_) + ", the running profile's directory", 0), 0u)
        << asked << " -> " << r.refusal;
  }
}

TEST_F(ReloadPathTest, AMissingFileInsideIsRefusedAsTheLoaderRefusesIt) {
  const ReloadPath r = confine_reload_path("sub/../absent.yaml", live_);
  EXPECT_TRUE(r.path.empty());
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.refusal, real(dir_) + "/absent.yaml: cannot open: No such file or directory");
}

// What a reload reads of a ReloadPath, as SteeringReloader reads it: the file
// confine_reload_path opened, else the path by name.
std::string reload_reads(ReloadPath& r) {
  const int fd = r.file ? ::dup(r.file.get()) : ::open(r.path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string text;
  char buffer[256];
  for (ssize_t n; fd >= 0 && (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, std::size_t(n));
  if (fd >= 0) ::close(fd);
  return text;
}

// The race of issue 38 item 7: the path is checked, then a symlink leading
// out takes the file's place before the reload reads it. The reload reads
// the file that was checked, never the one outside.
TEST_F(ReloadPathTest, ASymlinkSwappedInAfterTheCheckLeadsNowhere) {
  std::ofstream(dir_ / "blue.yaml") << "inside\n";
  std::ofstream(root_ / "outside.yaml") << "outside\n";
  ReloadPath r = confine_reload_path("blue.yaml", live_);
  ASSERT_TRUE(r.refusal.empty()) << r.refusal;
  std::filesystem::remove(dir_ / "blue.yaml");
  std::filesystem::create_symlink(root_ / "outside.yaml", dir_ / "blue.yaml");
  EXPECT_EQ(reload_reads(r), "inside\n");
}

// open_beneath itself, on names realpath would resolve but a symlink put in
// between makes lead out: every one refused, files beneath opened.
TEST_F(ReloadPathTest, OpenBeneathNeverLeavesTheDirectory) {
  std::filesystem::create_symlink("../outside.yaml", dir_ / "relative-out.yaml");
  std::filesystem::create_symlink("..", dir_ / "up");
  std::filesystem::create_symlink(root_, dir_ / "root");
  std::filesystem::create_symlink("sub/green.yaml", dir_ / "relative-in.yaml");
  const std::string dir = real(dir_);
  for (const std::string name : {"leaves.yaml", "relative-out.yaml", "up/outside.yaml", "root/outside.yaml",
                                 "../outside.yaml", "sub/../../outside.yaml"}) {
    int error = 0;
    const FileDescriptor f = open_beneath(dir, name, error);
    EXPECT_FALSE(f) << name;
    EXPECT_TRUE(error == EXDEV || error == ELOOP || error == ENOTDIR) << name << ": " << std::strerror(error);
  }
  for (const std::string name : {"blue.yaml", "sub/green.yaml", "relative-in.yaml"}) {
    int error = 0;
    const FileDescriptor f = open_beneath(dir, name, error);
    EXPECT_TRUE(f) << name << ": " << std::strerror(error);
  }
}

TEST_F(ReloadPathTest, ARelativeProfilePathIsTakenFromTheWorkingDirectory) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(root_);
  EXPECT_EQ(confine_reload_path("blue.yaml", "profiles/live.yaml").path, real(dir_ / "blue.yaml"));
  EXPECT_FALSE(confine_reload_path("../outside.yaml", "profiles/live.yaml").refusal.empty());
  std::filesystem::current_path(cwd);
}

}  // namespace
}  // namespace qs
