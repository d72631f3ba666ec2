#include "ir/FileIO.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace einstage {

namespace {

namespace fs = std::filesystem;

// "a directory", "a FIFO", ... for messages about a file that is not what was needed.
std::string_view kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

[[noreturn]] void cannot_write(const std::string& path, std::string_view why) {
  fail(ErrorKind::io, "cannot write '{}': {}", shown_arg(path), why);
}

size_t total_size(std::span<const std::string_view> pieces) {
  size_t total = 0;
  for (std::string_view piece : pieces) total += piece.size();
  return total;
}

// Writes all of `pieces`, one after the other, to fd; false (errno set) on failure, with `done` the bytes written
// before it.
bool write_all(int fd, std::span<const std::string_view> pieces, size_t& done) {
  done = 0;
  for (std::string_view bytes : pieces) {
    size_t at = 0;
    while (at < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0) errno = EIO;
        return false;
      }
      at += static_cast<size_t>(n);
      done += static_cast<size_t>(n);
    }
  }
  return true;
}

// The file a chain of symbolic links starting at `path` ends at (itself when it is no link); the end may not exist.
fs::path follow_links(const std::string& path) {
  fs::path p(path);
  for (int hops = 0;; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    if (hops == 40) cannot_write(path, "too many levels of symbolic links");
    std::error_code ec;
    fs::path next = fs::read_symlink(p, ec);
    if (ec) cannot_write(path, fmt::format("reading the symbolic link '{}' failed: {}", shown_arg(p.string()), ec.message()));
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
}

// Writes through a device or FIFO at `path` without replacing it. O_NONBLOCK makes opening a FIFO that nobody
// reads fail (ENXIO) instead of waiting forever; the writes themselves block as usual.
void write_through(const std::string& path, std::span<const std::string_view> bytes, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENXIO && S_ISFIFO(mode)) cannot_write(path, "it is a FIFO and no process is reading it");
    cannot_write(path, fmt::format("opening {} failed: {}", kind_of(mode), std::strerror(errno)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size_t done = 0;
  if (!write_all(fd, bytes, done)) {
    int err = errno;
    ::close(fd);
    cannot_write(path, fmt::format("writing {} bytes to {} failed after {}: {}", total_size(bytes), kind_of(mode), done,
                                   std::strerror(err)));
  }
  if (::close(fd) != 0) cannot_write(path, fmt::format("closing {} failed: {}", kind_of(mode), std::strerror(errno)));
}

// Removes `.NAME.tmp.PID.N` files in `dir` whose writer process PID no longer exists (it was killed mid-write).
// A live PID, even one reused by an unrelated process, keeps its file: only certainly stale files go.
void remove_stale_temporaries(const fs::path& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = "." + name + ".tmp.";
  while (const dirent* e = ::readdir(d)) {
    std::string_view entry = e->d_name;
    if (!entry.starts_with(prefix)) continue;
    std::string_view rest = entry.substr(prefix.size());
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc() || pid <= 0 || end == rest.data() + rest.size() || *end != '.') continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    ::unlink((dir / std::string(entry)).c_str());
  }
  ::closedir(d);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes, SpecialTarget special) {
  write_file_atomically(path, std::span<const std::string_view>(&bytes, 1), special);
}

void write_file_atomically(const std::string& path, std::span<const std::string_view> bytes, SpecialTarget special) {
  if (path.empty()) cannot_write(path, "the path is empty; give a file name");
  if (path.back() == '/') cannot_write(path, "the path ends in '/', so it names a directory; give a file name");
  struct stat st;
  bool exists = false;
  fs::path target(path);
  if (special == SpecialTarget::follow) {
    exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) cannot_write(path, "it is a directory; give a file name");
    if (exists && !S_ISREG(st.st_mode)) return write_through(path, bytes, st.st_mode);
    target = follow_links(path);  // a link to a missing file creates that file, as shell redirection does
  } else {
    exists = ::lstat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) cannot_write(path, "it is a directory; give a file name");
  }

  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string name = target.filename().string();
  remove_stale_temporaries(dir, name);
  // Process state on purpose (issue 38): the temporary's name must differ from every other write in flight in this
  // process, whatever context it runs for; the count carries no setting, cache content or failure, and O_EXCL below
  // still refuses a name taken by another process.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = (dir / fmt::format(".{}.tmp.{}.{}", name, ::getpid(), counter++)).string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    cannot_write(path,
                 fmt::format("creating a temporary file in '{}' failed: {}", dir.string(), std::strerror(errno)));
  auto give_up = [&](std::string why) {
    ::unlink(tmp.c_str());
    cannot_write(path, why);
  };
  if (exists && S_ISREG(st.st_mode)) ::fchmod(fd, st.st_mode & 07777);  // keep the replaced file's permissions
  size_t done = 0;
  if (!write_all(fd, bytes, done)) {
    int err = errno;
    ::close(fd);
    give_up(fmt::format("writing {} bytes failed after {}: {}", total_size(bytes), done, std::strerror(err)));
  }
  if (::close(fd) != 0) give_up(fmt::format("closing the temporary file failed: {}", std::strerror(errno)));
  if (::rename(tmp.c_str(), target.c_str()) != 0)
    give_up(fmt::format("renaming the temporary file into place failed: {}", std::strerror(errno)));
}

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail(ErrorKind::io, "cannot read '{}': {}", shown_arg(path), std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(ErrorKind::io, "cannot read '{}': {}", shown_arg(path), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::io, "cannot read '{}': it is {}, not a regular file", shown_arg(path), kind_of(st.st_mode));
  }
  auto size = static_cast<size_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    fail(ErrorKind::io, "cannot read '{}': it is {} bytes, more than the {} bytes allowed", shown_arg(path), size, max_bytes);
  }
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {  // a file that shrinks meanwhile yields what is there; one that grows, its first size bytes
    ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail(ErrorKind::io, "cannot read '{}': {}", shown_arg(path), std::strerror(err));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

}  // namespace einstage
