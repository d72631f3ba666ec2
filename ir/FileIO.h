// Whole-file reading and writing with the guarantees einstage's outputs and caches need, in one place:
// write_file_atomically (a regular file is replaced in one rename, never left half-written; symlinks are followed;
// devices and FIFOs are written through, never replaced; stale temporaries of dead writers are removed) and
// read_regular_file (regular files only, size-bounded, never blocks on a FIFO or a device). write_npy and the JIT's
// kernel disk cache both use them. Part of ir/; depends on ir/Error.h only.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace einstage {

/// What write_file_atomically does when `path` names a symlink, a device or a FIFO.
enum class SpecialTarget {
  /// Outputs the user named: a symlink is followed and its target written; a device (/dev/null, /dev/full) or a
  /// FIFO is written through in place, never replaced; a FIFO no process reads fails at once instead of blocking.
  follow,
  /// Files einstage owns (kernel cache entries): whatever non-directory sits at `path` is replaced by a regular file.
  replace,
};

/// Writes `bytes` as the whole content of `path`. A regular file (new or existing) is written to a temporary file
/// `.NAME.tmp.PID.N` beside it and renamed over it (keeping an existing file's permission bits), so a reader sees
/// the old content or the new, never part of it, and a failure leaves no partial file; temporaries of NAME left by
/// processes that no longer run (a write killed half-way) are removed first. Fails with ErrorKind::io starting
/// "cannot write 'PATH': " and saying why: an empty path, a path that names a directory, a FIFO without a reader,
/// a missing directory, a full device or disk.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           SpecialTarget special = SpecialTarget::follow);
/// The same with the content given as consecutive pieces (a header and data held elsewhere), written one after the
/// other without joining them first, with the same guarantees.
void write_file_atomically(const std::string& path, std::span<const std::string_view> pieces,
                           SpecialTarget special = SpecialTarget::follow);

/// The content of `path`, which must be a regular file (after following symlinks) of at most `max_bytes` bytes.
/// Fails with ErrorKind::io starting "cannot read 'PATH': " and saying what was found instead (a directory, a FIFO,
/// a character device, ...), that it is too large, or the system's reason. Never blocks on a FIFO or device.
std::string read_regular_file(const std::string& path, size_t max_bytes);

}  // namespace einstage
