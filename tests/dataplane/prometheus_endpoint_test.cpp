// The Prometheus endpoint's thread renders nothing (issue 38 item 7): /metrics
// is rendered once per publish and shared by every scrape, and /healthz
// answers while a rendering is under way, however long it takes. No EAL: a
// LiveView, the endpoint on a loopback port, and plain HTTP/1.0 clients.
#include "dataplane/control/prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace qs {
namespace {

struct Reply {
  int status = 0;  // 0: no answer
  std::string body;
};

// One GET over HTTP/1.0 (the server closes after the answer). A client that
// hears nothing for `patience_s` gives up: a hang shows as status 0, not as
// a test that never ends.
Reply get(std::uint16_t port, const std::string& path, int patience_s = 10) {
  Reply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  timeval patience{patience_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: test\r\n\r\n";
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    char buffer[65536];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, std::size_t(n));
  }
  ::close(fd);
  const std::size_t body = answer.find("\r\n\r\n");
  if (answer.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) return r;
  r.status = std::stoi(answer.substr(9, 3));
  r.body = answer.substr(body + 4);
  return r;
}

StatsSnapshot snapshot(std::uint64_t generation) {
  StatsSnapshot s;
  s.steering_generation = generation;
  return s;
}

class PrometheusEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    live_ = std::make_shared<LiveView>();
    live_->publish(snapshot(1));
    live_->publish(Health{true, ""});
    ListenAddress address;
    ASSERT_TRUE(parse_listen_address("127.0.0.1:0", address));
    endpoint_ = std::make_unique<PrometheusEndpoint>(address, live_);
  }
  void TearDown() override { endpoint_.reset(); }

  std::shared_ptr<LiveView> live_;
  std::unique_ptr<PrometheusEndpoint> endpoint_;
};

TEST_F(PrometheusEndpointTest, ServesTheExpositionOfTheLastPublish) {
  live_->publish(snapshot(7));
  const Reply r = get(endpoint_->port(), "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("quicsteer_steering_generation 7\n"), std::string::npos) << r.body.substr(0, 400);
  EXPECT_EQ(r.body, prometheus_text(snapshot(7), 0, 0));
  live_->count_reload(false);  // a counted reload shows at once, without a publish
  EXPECT_NE(get(endpoint_->port(), "/metrics").body.find("quicsteer_steering_reloads_total{result=\"refused\"} 1\n"),
            std::string::npos);
}

// Scrapes cost no rendering: the text of a publish is rendered once, however
// many scrape it.
TEST_F(PrometheusEndpointTest, RendersOncePerPublishNotPerScrape) {
  std::atomic<int> renders{0};
  live_->render_metrics_with([&](const StatsSnapshot& s, std::uint64_t, std::uint64_t) {
    ++renders;
    return "generation " + std::to_string(s.steering_generation) + "\n";
  });
  live_->publish(snapshot(2));
  const int rendered = renders.load();
  EXPECT_EQ(rendered, 2);  // the renderer's own first rendering, then the publish
  for (int i = 0; i < 5; ++i) {
    const Reply r = get(endpoint_->port(), "/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "generation 2\n");
  }
  EXPECT_EQ(renders.load(), rendered);
}

// However long a rendering takes (a large fleet), /healthz answers meanwhile,
// and so does /metrics, with the text of the publish before.
TEST_F(PrometheusEndpointTest, HealthzAndMetricsAnswerWhileARenderingIsUnderWay) {
  std::mutex m;
  std::condition_variable cv;
  bool rendering = false, release = false;
  live_->render_metrics_with([&](const StatsSnapshot& s, std::uint64_t, std::uint64_t) {
    if (s.steering_generation == 3) {
      std::unique_lock lock(m);
      rendering = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
    return "generation " + std::to_string(s.steering_generation) + "\n";
  });
  auto publisher = std::async(std::launch::async, [&] { live_->publish(snapshot(3)); });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return rendering; });
  }
  // A scrape while the rendering is held: it must not wait for it.
  auto scrape = std::async(std::launch::async, [&] { return get(endpoint_->port(), "/metrics", 5); });
  const Reply health = get(endpoint_->port(), "/healthz", 5);
  const Reply metrics = scrape.get();
  {
    std::lock_guard lock(m);
    release = true;
    cv.notify_all();
  }
  publisher.get();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "generation 1\n");
  EXPECT_EQ(get(endpoint_->port(), "/metrics").body, "generation 3\n");
}

TEST_F(PrometheusEndpointTest, HealthzFollowsTheVerdict) {
  live_->publish(Health{false, "lcore 2 made no progress for 1200 ms"});
  const Reply r = get(endpoint_->port(), "/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "lcore 2 made no progress for 1200 ms\n");
}

}  // namespace
}  // namespace qs
