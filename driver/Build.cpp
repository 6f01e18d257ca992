//===- Build.cpp - cache, build and launch generated projects ------------===//
#include "driver/Build.h"

#include "support/JsonFile.h"
#include "support/UserError.h"
#include "support/UserFiles.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace autoddl::driver {

namespace fs = std::filesystem;

namespace {

/// plan.json as the cache key sees it: without the search's wall time, which
/// differs every time a model is planned again (`autoddl run MODEL`) but
/// changes nothing the program does.
std::string planKey(const std::string &text) {
  auto doc = nlohmann::ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return text;
  if (doc.contains("search") && doc["search"].is_object())
    doc["search"].erase("wall_time_s");
  return doc.dump();
}

} // namespace

std::string projectHash(const codegen::ProjectFiles &files) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string &s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff; // separator
    h *= 1099511628211ull;
  };
  for (const auto &[path, text] : files) {
    mix(path);
    mix(path == "plan.json" ? planKey(text) : text);
  }
  return fmt::format("{:016x}", h);
}

namespace {

/// $AUTODDL_CACHE, else ~/.cache/autoddl, created if missing. Errors name the
/// variable when it chose the folder: "cannot create the lock file" alone
/// does not say where the path came from.
std::string cacheRoot() {
  const char *c = std::getenv("AUTODDL_CACHE");
  const bool fromEnv = c && *c;
  std::string root;
  if (fromEnv) {
    root = c;
  } else {
    const char *home = std::getenv("HOME");
    root = std::string(home && *home ? home : "/tmp") + "/.cache/autoddl";
  }
  const std::string who =
      fromEnv ? "AUTODDL_CACHE=" + root : "the build cache " + root;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec || !fs::is_directory(root, ec))
    throw UserError(who + ": cannot create the folder" +
                    (ec ? ": " + ec.message() : std::string(" (a file)")));
  if (::access(root.c_str(), W_OK | X_OK) != 0)
    throw UserError(who +
                    ": cannot write into the folder: " + std::strerror(errno));
  return root;
}

// The job runProcess waits for: its process group (mpirun and the ranks it
// starts locally, cmake and its compilers), and the first SIGINT, SIGTERM,
// SIGHUP or SIGQUIT received meanwhile. The handler forwards the signal to the
// whole group and returns; runProcess reaps the job, then removes the temporary folders and
// ends this process by the same signal (no orphaned mpirun or rank).
volatile sig_atomic_t jobGroup = 0;
volatile sig_atomic_t pendingSignal = 0;

extern "C" void forwardToJob(int sig) {
  // A second signal (the user insisting) kills the job outright.
  const int send = pendingSignal ? SIGKILL : sig;
  if (!pendingSignal)
    pendingSignal = sig;
  if (jobGroup > 0)
    ::kill(-pid_t(jobGroup), send);
}

void endBySignal(int sig); // below: removes the temporary folders, re-raises

/// fork + exec in a process group of its own; stdout and stderr to `log`
/// when given, stdin from /dev/null (a job in a background group reading the
/// terminal would stop). Returns the exit status (128 + signal when killed).
int runProcess(const std::vector<std::string> &argv, const std::string &log) {
  // The signals that stop a user's command (a terminal's Ctrl-C, Ctrl-\, its
  // closing; kill): forwarded to the job, unless this process ignored one on
  // entry (a command started with `&` in a script ignores SIGINT).
  constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  constexpr size_t kCount = sizeof(kForwarded) / sizeof(kForwarded[0]);
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kForwarded)
    sigaddset(&block, sig);
  // Blocked across fork: a signal between fork and recording the group
  // would otherwise reach a handler with no job to forward to.
  sigprocmask(SIG_BLOCK, &block, &old);
  struct sigaction forward {};
  forward.sa_handler = forwardToJob;
  sigemptyset(&forward.sa_mask);
  struct sigaction previous[kCount] = {};
  for (size_t i = 0; i < kCount; ++i) {
    sigaction(kForwarded[i], nullptr, &previous[i]);
    if (previous[i].sa_handler != SIG_IGN)
      sigaction(kForwarded[i], &forward, nullptr);
  }
  auto restore = [&] {
    for (size_t i = 0; i < kCount; ++i)
      sigaction(kForwarded[i], &previous[i], nullptr);
  };
  const pid_t parent = ::getpid();
  pid_t pid = fork();
  if (pid < 0) {
    restore();
    sigprocmask(SIG_SETMASK, &old, nullptr);
    throw UserError("cannot start " + argv[0] + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // If autoddl itself is killed outright (SIGKILL, which it cannot
    // forward), the job is told to stop rather than left running.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      _exit(128 + SIGTERM);
    for (size_t i = 0; i < kCount; ++i)
      std::signal(kForwarded[i], previous[i].sa_handler == SIG_IGN ? SIG_IGN
                                                                   : SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (int in = ::open("/dev/null", O_RDONLY); in >= 0) {
      dup2(in, 0);
      close(in);
    }
    if (!log.empty()) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    std::vector<char *> args;
    for (const auto &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "autoddl: error: cannot run %s\n", args[0]);
    _exit(127);
  }
  ::setpgid(pid, pid); // also here: the child may not have run yet
  jobGroup = pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  int waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
    ;
  const int waitErrno = waited < 0 ? errno : 0;
  jobGroup = 0;
  restore();
  if (const int sig = pendingSignal)
    endBySignal(sig);
  if (waited < 0) // SIGCHLD ignored by whoever started autoddl: no status
    throw UserError("lost track of " + argv[0] +
                    " (waitpid: " + std::strerror(waitErrno) +
                    "); its outcome is unknown");
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool onPath(const std::string &tool) {
  const char *path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t b = 0;
  while (b <= p.size()) {
    size_t e = p.find(':', b);
    if (e == std::string::npos)
      e = p.size();
    if (e > b && access((p.substr(b, e - b) + "/" + tool).c_str(), X_OK) == 0)
      return true;
    b = e + 1;
  }
  return false;
}

} // namespace

namespace {

/// An exclusive lock on `path` (created if missing) for this object's life:
/// two autoddl processes building the same project (parallel tests, two runs
/// of one plan) take turns instead of writing one directory at once.
class FileLock {
public:
  explicit FileLock(const std::string &path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0)
      throw UserError("cannot create the lock file " + path + ": " +
                      std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR)
        throw UserError("cannot lock " + path);
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

private:
  int fd_;
};

/// The compiler launcher of a project's build: ccache with the project's own
/// directory as its base, so the paths it hashes are relative ("../runtime/")
/// and every project shares the objects of the runtime sources they carry
/// unchanged; empty without ccache.
std::string ccacheLauncher(const std::string &dir) {
  if (!onPath("ccache"))
    return "";
  return "env;CCACHE_BASEDIR=" + dir + ";ccache";
}

/// Configures (Release) and builds the CMake project in `dir` into dir/build,
/// through ccache where installed, its output in dir/build.log; `defines`:
/// more -D flags. Throws UserError naming the log when a step fails.
void cmakeBuild(const std::string &dir, bool cuda,
                const std::vector<std::string> &defines, bool verbose) {
  const std::string log = dir + "/build.log";
  std::error_code ec;
  fs::remove(log, ec);
  if (verbose)
    std::fprintf(stderr, "autoddl: building %s (log: %s)\n", dir.c_str(),
                 log.c_str());
  std::vector<std::string> configure = {
      "cmake", "-S", dir, "-B", dir + "/build", "-DCMAKE_BUILD_TYPE=Release"};
  configure.insert(configure.end(), defines.begin(), defines.end());
  if (const std::string launcher = ccacheLauncher(dir); !launcher.empty()) {
    configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=" + launcher);
    if (cuda)
      configure.push_back("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + launcher);
  }
  if (runProcess(configure, log) != 0 ||
      runProcess(
          {"cmake", "--build", dir + "/build", "-j",
           std::to_string(std::max(1u, std::thread::hardware_concurrency()))},
          log) != 0)
    throw UserError("building the generated project failed; see " + log);
}

/// The CPU runtime built once per cache root and runtime sources
/// (<root>/runtime-<hash>, codegen::cpuRuntimeProject): the directory a CPU
/// project's AUTODDL_PREBUILT_RUNTIME names, so that each project compiles
/// only its train.cpp and skips the searches for MPI and BLAS.
std::string prebuiltCpuRuntime(const std::string &root, bool verbose) {
  const codegen::ProjectFiles files = codegen::cpuRuntimeProject();
  const std::string dir = root + "/runtime-" + projectHash(files);
  const std::string built = dir + "/build/autoddl_cpu_runtime.built";
  FileLock lock(dir + ".lock");
  if (access(built.c_str(), F_OK) != 0) {
    codegen::writeProject(dir, files);
    cmakeBuild(dir, false, {}, verbose);
    writeFileAtomically(built, "");
  }
  return dir + "/build";
}

} // namespace

std::string buildCached(const codegen::ProjectFiles &files, bool verbose) {
  const std::string root = cacheRoot();
  const std::string dir = root + "/" + projectHash(files);
  const std::string binary = dir + "/build/train";
  FileLock lock(dir + ".lock");
  if (access(binary.c_str(), X_OK) == 0) {
    if (verbose)
      std::fprintf(stderr, "autoddl: using the cached build %s\n",
                   binary.c_str());
    return binary;
  }
  const bool cuda = files.count("runtime/backends/cuda/Comm.h") > 0;
  // A CPU program links the runtime built once for every project of the
  // cache (the projects lock it after their own lock, never the other way).
  std::vector<std::string> defines;
  if (!cuda && files.count("runtime/backends/cpu/StandaloneRuntime.cmake"))
    defines.push_back("-DAUTODDL_PREBUILT_RUNTIME=" +
                      prebuiltCpuRuntime(root, verbose));
  codegen::writeProject(dir, files);
  cmakeBuild(dir, cuda, defines, verbose);
  return binary;
}

void requireGpu(const std::string &what) {
  std::error_code ec;
  const fs::path gpus("/proc/driver/nvidia/gpus");
  const bool any =
      (fs::is_directory(gpus, ec) &&
       fs::directory_iterator(gpus, ec) != fs::directory_iterator()) ||
      fs::exists("/dev/nvidia0", ec);
  if (!any)
    throw UserError(what + ": this machine has no NVIDIA GPU (no "
                           "/proc/driver/nvidia/gpus, no /dev/nvidia0); "
                           "generate the project with `autoddl codegen "
                           "--backend cuda` and run it on a GPU machine");
}

std::string workDir(const std::string &dir, const std::string &what) {
  if (!dir.empty())
    return dir;
  // $TMPDIR as every POSIX tool honours it (a test sees what is left behind).
  const char *env = std::getenv("TMPDIR");
  const std::string base = env && *env == '/' ? env : "/tmp";
  std::string tmpl = base + "/autoddl-" + what + "-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    throw UserError("cannot create a temporary directory in " + base + ": " +
                    std::strerror(errno));
  return tmpl;
}

namespace {

// The temporary work folders alive now, removed by the signal handler. A
// handler that removes files is not async-signal-safe in the strict sense;
// the process is ending anyway, and leaving gigabytes in /tmp is worse.
std::vector<std::string> &liveTempDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

extern "C" void removeTempDirsAndExit(int sig) {
  for (const std::string &d : liveTempDirs()) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void endBySignal(int sig) { removeTempDirsAndExit(sig); }

} // namespace

void checkDataFile(const std::string &data) {
  if (data.empty())
    return;
  if (auto problem = userFileProblem(data, "data file"))
    throw UserError("--data: " + *problem);
}

void WorkDir::create() const {
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec)
    throw UserError(path_ + ": cannot create the folder: " + ec.message());
}

WorkDir::WorkDir(const std::string &dir, const std::string &what) {
  if (!dir.empty()) {
    path_ = dir;
    return;
  }
  path_ = workDir("", what);
  temporary_ = true;
  if (liveTempDirs().empty()) {
    std::signal(SIGINT, removeTempDirsAndExit);
    std::signal(SIGTERM, removeTempDirsAndExit);
  }
  liveTempDirs().push_back(path_);
}

void WorkDir::keep() {
  auto &dirs = liveTempDirs();
  dirs.erase(std::remove(dirs.begin(), dirs.end(), path_), dirs.end());
  temporary_ = false;
}

WorkDir::~WorkDir() {
  if (!temporary_)
    return;
  keep();
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int launchMpi(const std::string &binary, int ranks,
              const std::vector<std::string> &args,
              const std::string &logFile) {
  std::vector<std::string> argv = {"mpirun", "--oversubscribe", "-np",
                                   std::to_string(ranks)};
  if (geteuid() == 0)
    argv.push_back("--allow-run-as-root");
  argv.push_back(binary);
  argv.insert(argv.end(), args.begin(), args.end());
  return runProcess(argv, logFile);
}

int runJob(const std::vector<std::string> &argv) {
  return runProcess(argv, "");
}

} // namespace autoddl::driver
