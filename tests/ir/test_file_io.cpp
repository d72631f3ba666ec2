// ir/FileIO.h: atomic writes through symlinks, devices and FIFOs (never replacing them, never blocking on a FIFO
// nobody reads), clear errors for an empty path and directories, stale temporaries of dead writers removed, kept
// permissions; bounded reads of regular files only.
#include "ir/FileIO.h"
#include "support/ErrorOf.h"
#include "support/TempDir.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace einstage;
using einstage::test::error_of;
using einstage::test::read_file_bytes;
using einstage::test::TempDir;
using einstage::test::write_file_bytes;
namespace fs = std::filesystem;

namespace {

// The id of a process that has exited and been reaped: no process runs with it (until the id is reused).
pid_t dead_pid() {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_CASE("write_file_atomically: a symlink is followed, its target written, the link kept") {
  TempDir dir;
  write_file_bytes(dir.file("real.npy"), "old");
  fs::create_symlink("real.npy", dir.file("link.npy"));  // relative: resolved against the link's directory
  write_file_atomically(dir.file("link.npy"), "new");
  CHECK(fs::is_symlink(dir.file("link.npy")));
  CHECK(read_file_bytes(dir.file("real.npy")) == "new");
  // A link to a file that does not exist yet creates it, as shell redirection does; chains are followed.
  fs::create_symlink("link.npy", dir.file("chain.npy"));
  fs::create_symlink(dir.file("later.npy"), dir.file("dangling.npy"));
  write_file_atomically(dir.file("chain.npy"), "chained");
  write_file_atomically(dir.file("dangling.npy"), "created");
  CHECK(read_file_bytes(dir.file("real.npy")) == "chained");
  CHECK(read_file_bytes(dir.file("later.npy")) == "created");
  CHECK(fs::is_symlink(dir.file("dangling.npy")));
  CHECK(dir.entries() == std::vector<std::string>{"chain.npy", "dangling.npy", "later.npy", "link.npy", "real.npy"});
  fs::create_symlink("loop2", dir.file("loop1"));
  fs::create_symlink("loop1", dir.file("loop2"));
  CHECK(error_of([&] { write_file_atomically(dir.file("loop1"), "x"); }) ==
        "cannot write '" + dir.file("loop1") + "': too many levels of symbolic links");
}

TEST_CASE("write_file_atomically: a FIFO is written through when read, refused at once when nobody reads it") {
  TempDir dir;
  std::string fifo = dir.file("fifo.npy");
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  CHECK(error_of([&] { write_file_atomically(fifo, "bytes"); }) ==
        "cannot write '" + fifo + "': it is a FIFO and no process is reading it");
  CHECK(fs::is_fifo(fifo));
  CHECK(dir.entries() == std::vector<std::string>{"fifo.npy"});
  // With a reader the bytes go through the FIFO (they fit in its buffer, so one thread suffices).
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  write_file_atomically(fifo, "through the fifo");
  char buf[64] = {};
  ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  CHECK(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) == "through the fifo");
  CHECK(fs::is_fifo(fifo));
}

TEST_CASE("write_file_atomically: devices are written through, never replaced") {
  write_file_atomically("/dev/null", "discarded");
  CHECK(error_of([] { write_file_atomically("/dev/full", "12345"); }) ==
        "cannot write '/dev/full': writing 5 bytes to a character device failed after 0: No space left on device");
  CHECK(fs::is_character_file("/dev/full"));
  TempDir dir;  // a symlink to a device: followed to the device
  fs::create_symlink("/dev/null", dir.file("null.npy"));
  write_file_atomically(dir.file("null.npy"), "discarded");
  CHECK(fs::is_symlink(dir.file("null.npy")));
}

TEST_CASE("write_file_atomically: an empty path and directories fail clearly; nothing is left behind") {
  TempDir dir;
  CHECK(error_of([] { write_file_atomically("", "x"); }) == "cannot write '': the path is empty; give a file name");
  CHECK(error_of([&] { write_file_atomically(dir.file("sub/"), "x"); }) ==
        "cannot write '" + dir.file("sub/") + "': the path ends in '/', so it names a directory; give a file name");
  fs::create_directory(dir.file("sub"));
  CHECK(error_of([&] { write_file_atomically(dir.file("sub"), "x"); }) ==
        "cannot write '" + dir.file("sub") + "': it is a directory; give a file name");
  CHECK(error_of([&] { write_file_atomically(dir.file("sub"), "x", SpecialTarget::replace); }) ==
        "cannot write '" + dir.file("sub") + "': it is a directory; give a file name");
  CHECK(error_of([&] { write_file_atomically(dir.file("missing/y.npy"), "x"); }) ==
        "cannot write '" + dir.file("missing/y.npy") + "': creating a temporary file in '" + dir.file("missing") +
            "' failed: No such file or directory");
  CHECK(dir.entries() == std::vector<std::string>{"sub"});
  CHECK(fs::is_empty(dir.file("sub")));
}

TEST_CASE("write_file_atomically: stale temporaries of dead writers go, others stay; permissions are kept") {
  TempDir dir;
  pid_t dead = dead_pid();
  std::string stale = fmt::format(".out.npy.tmp.{}.0", dead);
  std::string live = fmt::format(".out.npy.tmp.{}.0", ::getppid());  // the process that started this test runs
  std::string other = fmt::format(".other.npy.tmp.{}.0", dead);      // another file's temporary: not ours to judge
  for (const std::string& name : {stale, live, other}) write_file_bytes(dir.file(name), "partial");
  write_file_bytes(dir.file("out.npy"), "old");
  ::chmod(dir.file("out.npy").c_str(), 0640);
  write_file_atomically(dir.file("out.npy"), "new");
  CHECK(read_file_bytes(dir.file("out.npy")) == "new");
  std::vector<std::string> expected = {live, other, "out.npy"};
  std::sort(expected.begin(), expected.end());
  CHECK(dir.entries() == expected);
  CHECK((fs::status(dir.file("out.npy")).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  // SpecialTarget::replace puts a regular file in place of a FIFO or a symlink instead of going through it.
  REQUIRE(::mkfifo(dir.file("entry").c_str(), 0666) == 0);
  write_file_atomically(dir.file("entry"), "object", SpecialTarget::replace);
  CHECK(fs::is_regular_file(fs::symlink_status(dir.file("entry"))));
  fs::create_symlink("/dev/null", dir.file("linked"));
  write_file_atomically(dir.file("linked"), "object", SpecialTarget::replace);
  CHECK(fs::is_regular_file(fs::symlink_status(dir.file("linked"))));
  CHECK(read_file_bytes(dir.file("linked")) == "object");
}

TEST_CASE("read_regular_file: regular files only, bounded, never blocking") {
  TempDir dir;
  write_file_bytes(dir.file("f"), "12345");
  CHECK(read_regular_file(dir.file("f"), 5) == "12345");
  CHECK(error_of([&] { read_regular_file(dir.file("f"), 4); }) ==
        "cannot read '" + dir.file("f") + "': it is 5 bytes, more than the 4 bytes allowed");
  fs::create_directory(dir.file("d"));
  CHECK(error_of([&] { read_regular_file(dir.file("d"), 100); }) ==
        "cannot read '" + dir.file("d") + "': it is a directory, not a regular file");
  REQUIRE(::mkfifo(dir.file("p").c_str(), 0666) == 0);
  CHECK(error_of([&] { read_regular_file(dir.file("p"), 100); }) ==
        "cannot read '" + dir.file("p") + "': it is a FIFO, not a regular file");
  fs::create_symlink("/dev/zero", dir.file("z"));
  CHECK(error_of([&] { read_regular_file(dir.file("z"), 100); }) ==
        "cannot read '" + dir.file("z") + "': it is a character device, not a regular file");
  CHECK(error_of([&] { read_regular_file(dir.file("none"), 100); }) ==
        "cannot read '" + dir.file("none") + "': No such file or directory");
  CHECK(error_of([&] { read_regular_file("no\tne\x01\x7f", 100); }) ==
        "cannot read 'no\\tne\\x01\\x7f': No such file or directory");
}
