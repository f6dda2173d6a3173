#include "tests/traffic/pcap_writer.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace qs::traffic {

namespace {

// The format is defined in the writer's byte order, flagged by the magic; we
// write little-endian explicitly so the file does not depend on the host.
void le32(std::uint8_t* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = std::uint8_t(v >> (8 * i));
}
void le16(std::uint8_t* at, std::uint16_t v) {
  at[0] = std::uint8_t(v);
  at[1] = std::uint8_t(v >> 8);
}

}  // namespace

PcapWriter::PcapWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  std::uint8_t header[24];
  le32(header, 0xa1b2c3d4);  // microsecond timestamps
  le16(header + 4, 2);       // version 2.4
  le16(header + 6, 4);
  le32(header + 8, 0);   // thiszone
  le32(header + 12, 0);  // sigfigs
  le32(header + 16, kSnapLen);
  le32(header + 20, kLinkTypeEthernet);
  put(header, sizeof header);
}

PcapWriter::~PcapWriter() {
  if (file_) std::fclose(file_);
}

void PcapWriter::put(const void* data, std::size_t len) {
  if (!file_) throw std::runtime_error(path_ + ": write after close");
  if (std::fwrite(data, 1, len, file_) != len)
    throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

void PcapWriter::write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns) {
  if (frame.size() > kSnapLen) throw std::runtime_error(path_ + ": frame larger than the snap length");
  std::uint8_t record[16];
  le32(record, std::uint32_t(timestamp_ns / 1000000000u));
  le32(record + 4, std::uint32_t(timestamp_ns % 1000000000u / 1000u));
  le32(record + 8, std::uint32_t(frame.size()));   // captured
  le32(record + 12, std::uint32_t(frame.size()));  // on the wire
  put(record, sizeof record);
  put(frame.data(), frame.size());
  ++frames_;
  bytes_ += frame.size();
}

void PcapWriter::close() {
  if (!file_) return;
  const bool flushed = std::fflush(file_) == 0;
  const int saved = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) throw std::runtime_error(path_ + ": write failed: " + std::strerror(flushed ? errno : saved));
}

}  // namespace qs::traffic
