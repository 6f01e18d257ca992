// The TCP world of jobs started without MPI (see Bootstrap.h).
#include "backends/cuda/Bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

namespace autoddl::rt::tcp {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x61646431; // "add1"
enum : uint32_t { kDataConn = 1, kControlConn = 2 };
constexpr int64_t kCollectiveTag = INT64_MIN + 1; // user tags are >= 0
constexpr uint64_t kWorldCtx = 1;

/// The first bytes on every connection: who connects, and for what.
struct Hello {
  uint32_t magic = kMagic, kind = 0;
  int32_t rank = 0, size = 0, port = 0, pad = 0;
};
struct Header {
  uint64_t ctx = 0;
  int64_t tag = 0;
  uint64_t bytes = 0;
};
/// One control message: 'A', rank `origin` failed: stop.
struct Control {
  char kind = 0;
  char pad[3] = {};
  int32_t origin = 0;
};

struct Frame {
  uint64_t ctx;
  int64_t tag;
  std::vector<char> data;
};
struct Peer {
  int fd = -1;
  std::deque<Frame> pending; // arrived, not asked for yet
};

struct State {
  bool started = false;
  int rank = 0, size = 1;
  std::vector<Peer> peers;  // data connections by rank (none to itself)
  std::vector<int> control; // rank 0: by rank; others: [0], to rank 0
  std::thread monitor;
  std::atomic<bool> stop{false}, finalizing{false}, failing{false};
};
// Never destroyed: the monitor thread may still run while statics go away.
State &st() {
  static State *s = new State;
  return *s;
}
std::atomic<void (*)(const char *)> gHook{nullptr};
std::atomic<int64_t> gProgressNs{Clock::now().time_since_epoch().count()};
std::atomic<const char *> gProgressPlace{"start"};

std::string prefix() { return "autoddl: rank " + std::to_string(st().rank); }

void send_control(int fd, char kind, int origin) {
  Control c;
  c.kind = kind;
  c.origin = origin;
  // Best effort: the peer may be gone already.
  (void)::send(fd, &c, sizeof c, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/// Tells the other ranks that rank `origin` failed: rank 0 tells every rank,
/// the others tell rank 0 (which tells the rest).
void tell_others(int origin) {
  for (int fd : st().control)
    if (fd >= 0)
      send_control(fd, 'A', origin);
}

/// The one way out after a failure: the message, the others told, the hook,
/// exit. A second thread failing meanwhile waits for the first to exit.
/// `origin`: the rank that failed first (-1: this one).
[[noreturn]] void fail(const std::string &message, int origin = -1) {
  if (st().failing.exchange(true))
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  tell_others(origin < 0 ? st().rank : origin);
  if (auto *hook = gHook.load())
    hook(message.c_str());
  std::_Exit(1);
}

std::string sys_error(int err) { return std::strerror(err); }

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

/// Waits until fd is readable; false at the deadline.
bool wait_readable(int fd, Clock::time_point deadline) {
  for (;;) {
    const double left = seconds_left(deadline);
    if (left <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, int(left * 1000) + 1);
    if (r > 0)
      return true;
    if (r < 0 && errno != EINTR)
      return false;
  }
}

/// Sends (out) or receives n bytes; false on EOF, an error or (given one,
/// receiving) the deadline.
bool transfer(int fd, char *c, size_t n, bool out,
              const Clock::time_point *deadline) {
  while (n > 0) {
    if (deadline && !wait_readable(fd, *deadline))
      return false;
    const ssize_t k =
        out ? ::send(fd, c, n, MSG_NOSIGNAL) : ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

bool write_all(int fd, const void *p, size_t n) {
  return transfer(fd, static_cast<char *>(const_cast<void *>(p)), n, true,
                  nullptr);
}

bool read_all(int fd, void *p, size_t n,
              const Clock::time_point *deadline = nullptr) {
  return transfer(fd, static_cast<char *>(p), n, false, deadline);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// A listening socket on every interface; port 0: any free port. Returns
/// the fd and sets *bound to the port.
int listen_on(int port, int *bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw std::runtime_error(prefix() + ": socket: " + sys_error(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::listen(fd, 256) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(prefix() + ": cannot listen on port " +
                             std::to_string(port) + ": " + sys_error(err));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  *bound = ntohs(a.sin_port);
  return fd;
}

/// Connects to host:port, retrying while the listener is not up yet, until the
/// deadline; `who` names the peer in the error.
int connect_to(const std::string &host, int port, Clock::time_point deadline,
               const std::string &who) {
  std::string last = "no attempt";
  while (seconds_left(deadline) > 0) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    const int gai =
        ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve ") + host + ": " + gai_strerror(gai);
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        set_nodelay(fd);
        return fd;
      }
      last = sys_error(errno);
      if (fd >= 0)
        ::close(fd);
      ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error(prefix() + ": could not connect to " + who + " at " +
                           host + ":" + std::to_string(port) +
                           " in time (last error: " + last +
                           "); is it running, with the same MASTER_ADDR and "
                           "MASTER_PORT? (AUTODDL_CONNECT_TIMEOUT sets the "
                           "bound)");
}

/// Accepts one connection and reads its Hello, until the deadline.
int accept_one(int lfd, Clock::time_point deadline, Hello &h, bool &timed_out) {
  timed_out = false;
  for (;;) {
    if (!wait_readable(lfd, deadline)) {
      timed_out = true;
      return -1;
    }
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    set_nodelay(fd);
    if (read_all(fd, &h, sizeof h, &deadline) && h.magic == kMagic &&
        h.size == st().size && h.rank > 0 && h.rank < st().size)
      return fd;
    ::close(fd); // not one of ours (or gone): keep waiting
  }
}

void monitor_loop() {
  State &s = st();
  std::vector<pollfd> fds;
  std::vector<int> who;
  for (size_t r = 0; r < s.control.size(); ++r)
    if (s.control[r] >= 0) {
      fds.push_back({s.control[r], POLLIN, 0});
      who.push_back(s.rank == 0 ? int(r) : 0);
    }
  while (!s.stop.load()) {
    if (::poll(fds.data(), fds.size(), 200) <= 0)
      continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      Control c;
      const bool got = read_all(fds[i].fd, &c, sizeof c);
      if (got && c.kind == 'A')
        fail(prefix() + ": stopping: rank " + std::to_string(c.origin) +
                 " failed (see its message, or rank 0's if it crashed)",
             c.origin);
      if (s.finalizing.load()) { // closed after its finalize barrier
        fds[i].fd = -1;
        continue;
      }
      fail(prefix() + ": rank " + std::to_string(who[i]) +
               " exited or crashed (its control connection closed); stopping",
           who[i]);
    }
  }
}

/// A data connection broke: usually because its rank exited after another
/// rank failed. The monitor thread reports the rank that failed first if its
/// notice comes within a moment (and exits); else this rank reports the loss.
[[noreturn]] void connection_lost(int r, const char *while_) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  fail(prefix() + ": lost the connection to rank " + std::to_string(r) +
           " while " + while_ + " (it exited or crashed)",
       r);
}

Peer &peer(int r) {
  if (r < 0 || r >= st().size)
    throw std::out_of_range(prefix() + ": no rank " + std::to_string(r) +
                            " in a world of " + std::to_string(st().size));
  return st().peers[size_t(r)];
}

} // namespace

Launcher detect_launcher() {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK",
                        "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"})
    if (const char *s = std::getenv(v); s && *s)
      return Launcher::Mpi;
  if (std::getenv("RANK") && std::getenv("WORLD_SIZE"))
    return Launcher::Torchrun;
  return Launcher::Single;
}

namespace {
int env_int(const char *name, int lo, int hi) {
  const char *s = std::getenv(name);
  if (!s || !*s)
    throw std::runtime_error(std::string("torchrun-style start: ") + name +
                             " is not set (RANK, WORLD_SIZE, MASTER_ADDR and "
                             "MASTER_PORT are needed without mpirun)");
  char *end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    throw std::runtime_error(std::string("torchrun-style start: ") + name +
                             "=" + s + " is not an integer in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) +
                             "]");
  return int(v);
}
} // namespace

Options options_from_env() {
  Options o;
  o.size = env_int("WORLD_SIZE", 1, 1 << 20);
  o.rank = env_int("RANK", 0, o.size - 1);
  if (o.size == 1)
    return o;
  const char *addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr)
    throw std::runtime_error("torchrun-style start: MASTER_ADDR is not set");
  o.master_addr = addr;
  if (std::getenv("AUTODDL_MASTER_PORT")) {
    o.master_port = env_int("AUTODDL_MASTER_PORT", 1, 65535);
  } else {
    o.master_port = env_int("MASTER_PORT", 1, 65534);
    // torchrun's agent may serve its own store on MASTER_PORT.
    const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent &&
        (std::strcmp(agent, "True") == 0 || std::strcmp(agent, "1") == 0))
      o.master_port += 1;
  }
  if (const char *t = std::getenv("AUTODDL_CONNECT_TIMEOUT"); t && *t)
    o.timeout_s = std::atof(t);
  return o;
}

void World::start(const Options &o) {
  State &s = st();
  if (s.started)
    return;
  s.rank = o.rank;
  s.size = o.size;
  s.peers.assign(size_t(o.size), Peer{});
  s.control.assign(o.rank == 0 ? size_t(o.size) : 1, -1);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(o.timeout_s * 1000));
  if (o.size > 1 && o.rank == 0) {
    int port = 0;
    const int lfd = listen_on(o.master_port, &port);
    // Every other rank connects twice: control, then data (with the port of
    // its own listener).
    std::vector<uint32_t> ip(size_t(o.size), 0);
    std::vector<int32_t> ports(size_t(o.size), 0);
    int connected = 0;
    while (connected < 2 * (o.size - 1)) {
      Hello h;
      bool timed_out = false;
      const int fd = accept_one(lfd, deadline, h, timed_out);
      if (timed_out) {
        ::close(lfd);
        throw std::runtime_error(
            prefix() + ": only " + std::to_string(connected) + " of " +
            std::to_string(2 * (o.size - 1)) +
            " connections from the other ranks came to port " +
            std::to_string(o.master_port) + " in " +
            std::to_string(int(o.timeout_s)) +
            " s; did every rank start, with WORLD_SIZE=" +
            std::to_string(o.size) + "?");
      }
      int &slot = h.kind == kControlConn ? s.control[size_t(h.rank)]
                                         : s.peers[size_t(h.rank)].fd;
      if (slot >= 0 || (h.kind != kControlConn && h.kind != kDataConn)) {
        ::close(fd);
        ::close(lfd);
        throw std::runtime_error(prefix() + ": two processes claim rank " +
                                 std::to_string(h.rank));
      }
      slot = fd;
      if (h.kind == kDataConn) {
        sockaddr_in a{};
        socklen_t len = sizeof a;
        ::getpeername(fd, reinterpret_cast<sockaddr *>(&a), &len);
        ip[size_t(h.rank)] = a.sin_addr.s_addr;
        ports[size_t(h.rank)] = h.port;
      }
      ++connected;
    }
    ::close(lfd);
    for (int r = 1; r < o.size; ++r)
      if (!write_all(s.peers[size_t(r)].fd, ip.data(), ip.size() * 4) ||
          !write_all(s.peers[size_t(r)].fd, ports.data(), ports.size() * 4))
        throw std::runtime_error(prefix() + ": rank " + std::to_string(r) +
                                 " closed its connection while starting");
  } else if (o.size > 1) {
    int myPort = 0;
    const int lfd = listen_on(0, &myPort);
    Hello control, data;
    control.kind = kControlConn;
    data.kind = kDataConn;
    control.rank = data.rank = o.rank;
    control.size = data.size = o.size;
    data.port = myPort;
    s.control[0] = connect_to(o.master_addr, o.master_port, deadline, "rank 0");
    const int fd0 =
        connect_to(o.master_addr, o.master_port, deadline, "rank 0");
    s.peers[0].fd = fd0;
    if (!write_all(s.control[0], &control, sizeof control) ||
        !write_all(fd0, &data, sizeof data))
      throw std::runtime_error(prefix() + ": rank 0 closed the connection");
    std::vector<uint32_t> ip(size_t(o.size));
    std::vector<int32_t> ports(size_t(o.size));
    if (!read_all(fd0, ip.data(), ip.size() * 4, &deadline) ||
        !read_all(fd0, ports.data(), ports.size() * 4, &deadline))
      throw std::runtime_error(
          prefix() + ": rank 0 did not send the addresses of the other ranks "
                     "in time (another rank did not connect?)");
    // Lower ranks listen already: connect to them; accept the higher ones.
    for (int r = 1; r < o.rank; ++r) {
      char host[INET_ADDRSTRLEN] = {};
      in_addr a{};
      a.s_addr = ip[size_t(r)];
      ::inet_ntop(AF_INET, &a, host, sizeof host);
      const int fd = connect_to(host, ports[size_t(r)], deadline,
                                "rank " + std::to_string(r));
      Hello hr;
      hr.kind = kDataConn;
      hr.rank = o.rank;
      hr.size = o.size;
      if (!write_all(fd, &hr, sizeof hr))
        throw std::runtime_error(prefix() + ": rank " + std::to_string(r) +
                                 " closed the connection");
      s.peers[size_t(r)].fd = fd;
    }
    for (int k = o.rank + 1; k < o.size; ++k) {
      Hello hr;
      bool timed_out = false;
      const int fd = accept_one(lfd, deadline, hr, timed_out);
      if (timed_out || hr.rank <= o.rank || s.peers[size_t(hr.rank)].fd >= 0) {
        ::close(lfd);
        throw std::runtime_error(prefix() +
                                 ": a higher rank did not connect in time");
      }
      s.peers[size_t(hr.rank)].fd = fd;
    }
    ::close(lfd);
  }
  s.started = true;
  if (o.size > 1)
    s.monitor = std::thread(monitor_loop);
  progress("start");
}

bool World::started() { return st().started; }
int World::rank() { return st().rank; }
int World::size() { return st().size; }

Group World::world_group() {
  Group g;
  g.ctx = kWorldCtx;
  g.me = st().rank;
  for (int r = 0; r < st().size; ++r)
    g.ranks.push_back(r);
  return g;
}

void World::send(int to, uint64_t ctx, int64_t tag, const void *data,
                 size_t bytes) {
  Peer &p = peer(to);
  if (to == st().rank) {
    const char *c = static_cast<const char *>(data);
    p.pending.push_back({ctx, tag, std::vector<char>(c, c + bytes)});
    return;
  }
  Header h{ctx, tag, bytes};
  if (!write_all(p.fd, &h, sizeof h) || !write_all(p.fd, data, bytes))
    connection_lost(to, "sending to it");
}

std::vector<char> World::recv(int from, uint64_t ctx, int64_t tag) {
  Peer &p = peer(from);
  for (auto it = p.pending.begin(); it != p.pending.end(); ++it)
    if (it->ctx == ctx && it->tag == tag) {
      std::vector<char> d = std::move(it->data);
      p.pending.erase(it);
      return d;
    }
  if (from == st().rank)
    throw std::logic_error(prefix() + ": receive from itself never sent");
  for (;;) {
    Header h;
    Frame f;
    bool ok = read_all(p.fd, &h, sizeof h);
    if (ok) {
      f.data.resize(size_t(h.bytes));
      ok = read_all(p.fd, f.data.data(), f.data.size());
    }
    if (!ok)
      connection_lost(from, "receiving from it");
    if (h.ctx == ctx && h.tag == tag)
      return std::move(f.data);
    f.ctx = h.ctx;
    f.tag = h.tag;
    p.pending.push_back(std::move(f));
  }
}

std::vector<std::vector<char>> World::gather(const Group &g, int root,
                                             const void *data, size_t bytes) {
  std::vector<std::vector<char>> all;
  if (g.me != root) {
    send(g.ranks[size_t(root)], g.ctx, kCollectiveTag, data, bytes);
    return all;
  }
  all.resize(size_t(g.size()));
  const char *c = static_cast<const char *>(data);
  for (int i = 0; i < g.size(); ++i)
    all[size_t(i)] = i == g.me
                         ? std::vector<char>(c, c + bytes)
                         : recv(g.ranks[size_t(i)], g.ctx, kCollectiveTag);
  return all;
}

void World::bcast(const Group &g, int root, std::vector<char> &data) {
  if (g.me == root) {
    for (int i = 0; i < g.size(); ++i)
      if (i != g.me)
        send(g.ranks[size_t(i)], g.ctx, kCollectiveTag, data.data(),
             data.size());
    return;
  }
  data = recv(g.ranks[size_t(root)], g.ctx, kCollectiveTag);
}

std::vector<std::vector<char>>
World::allgather(const Group &g, const void *data, size_t bytes) {
  std::vector<std::vector<char>> all = gather(g, 0, data, bytes);
  // One message: each member's length, then its bytes.
  std::vector<char> packed;
  if (g.me == 0)
    for (const auto &d : all) {
      const uint64_t n = d.size();
      packed.insert(packed.end(), reinterpret_cast<const char *>(&n),
                    reinterpret_cast<const char *>(&n) + 8);
      packed.insert(packed.end(), d.begin(), d.end());
    }
  bcast(g, 0, packed);
  if (g.me == 0)
    return all;
  all.assign(size_t(g.size()), {});
  size_t pos = 0;
  for (auto &d : all) {
    uint64_t n = 0;
    std::memcpy(&n, packed.data() + pos, 8);
    pos += 8;
    d.assign(packed.begin() + long(pos), packed.begin() + long(pos + n));
    pos += n;
  }
  return all;
}

void World::barrier(const Group &g) { allgather(g, nullptr, 0); }

void World::finalize() {
  State &s = st();
  if (!s.started)
    return;
  if (s.size > 1) {
    // From here on a closing control connection is no failure; no rank
    // leaves the barrier before every rank has set this.
    s.finalizing = true;
    barrier(world_group());
    s.stop = true;
    if (s.monitor.joinable())
      s.monitor.join();
    for (Peer &p : s.peers)
      if (p.fd >= 0)
        ::close(p.fd);
    for (int fd : s.control)
      if (fd >= 0)
        ::close(fd);
  }
  s.peers.clear();
  s.control.clear();
  s.started = false;
}

void World::abort(int code) {
  if (!st().failing.exchange(true))
    tell_others(st().rank);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code == 0 ? 1 : code);
}

void announce_failure() {
  if (st().started && !st().failing.exchange(true))
    tell_others(st().rank);
}

void set_failure_hook(void (*hook)(const char *message)) { gHook = hook; }

void progress(const char *place) {
  gProgressNs = Clock::now().time_since_epoch().count();
  gProgressPlace = place;
}

double progress_age_s(const char **place) {
  if (place)
    *place = gProgressPlace.load();
  return double(Clock::now().time_since_epoch().count() - gProgressNs.load()) *
         double(Clock::period::num) / double(Clock::period::den);
}

} // namespace autoddl::rt::tcp
