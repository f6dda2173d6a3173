// Classic libpcap capture files (microsecond timestamps, LINKTYPE_ETHERNET):
// the format tshark, libpcap, DPDK's net_pcap and pktgen's -s replay all read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace qs::traffic {

class PcapWriter {
 public:
  // Creates (truncates) the file and writes the global header; throws
  // std::runtime_error naming the file on failure.
  explicit PcapWriter(const std::string& path);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // One record; timestamp in nanoseconds since the epoch (stored as µs).
  void write(std::span<const std::uint8_t> frame, std::uint64_t timestamp_ns);
  // Flushes and closes; throws if the data could not be written (disk full).
  void close();

  std::uint64_t frames() const { return frames_; }
  std::uint64_t bytes() const { return bytes_; }  // frame bytes, headers excluded

  static constexpr std::uint32_t kSnapLen = 65535;
  static constexpr std::uint32_t kLinkTypeEthernet = 1;

 private:
  void put(const void* data, std::size_t len);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t frames_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace qs::traffic
