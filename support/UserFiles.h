//===- UserFiles.h - one reader of inputs, one writer of outputs ---------===//
//
// Every file the user names goes through readUserFile (inputs) or
// writeUserFile (outputs), so the rules hold for every command at once:
//   - an input must be a regular file of bounded size: a FIFO with no writer,
//     /dev/zero or a directory is refused by name instead of hanging or
//     growing memory without bound;
//   - an output is written atomically (temporary file in the target's folder,
//     fsync, rename); a device node, a FIFO, a directory or a symbolic link to
//     anything but a regular file is refused, never replaced; a symbolic link
//     to a regular file is followed (the link stays a link); an output that is
//     one of the command's inputs (same inode) is refused.
// Errors are UserError, one line naming the path and the cause.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace autoddl {

/// Inputs larger than this are refused (no model, cluster, plan or trace file
/// comes near it; it keeps a mistaken multi-gigabyte path from exhausting
/// memory).
constexpr size_t kMaxUserFileBytes = size_t(1) << 30;

/// Why `path` cannot be read as a user input file of kind `what` ("model",
/// "cluster"), or nothing when it can. Does not throw and does not block
/// (for tools built without exceptions, e.g. autoddl-opt).
std::optional<std::string> userFileProblem(const std::string &path,
                                           const std::string &what);

/// The bytes of the user's file `path` (see userFileProblem for what is
/// refused) and records it as an input of this command, so no output may
/// overwrite it.
std::string readUserFile(const std::string &path, const std::string &what);

/// Records `path` as an input of this command without reading it.
void noteUserInput(const std::string &path);

/// Forgets the recorded inputs: for a process that runs several commands one
/// after another (tests), each starting afresh.
void clearUserInputs();

/// Throws what writeUserFile would for `path` without writing, and when its
/// folder is missing or not writable: commands check their outputs before
/// long work (a search, a simulation, a build, a run), not after. `flag` (the
/// option that named the path, "-o", "--trace") starts the message.
void checkUserOutput(const std::string &path, const std::string &flag);

/// Writes `text` to the output `path` by the rules above.
void writeUserFile(const std::string &path, const std::string &text);

/// writeUserFile without exceptions (autoddl-opt): why `text` could not be
/// written to `path`, or nothing once it is.
std::optional<std::string> writeUserFileProblem(const std::string &path,
                                                const std::string &text);

/// Shortens a message to at most `limit` bytes per line (a megabyte-long
/// model name quoted back is no use to anyone).
std::string capMessage(const std::string &message, size_t limit = 400);

} // namespace autoddl
