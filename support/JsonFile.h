//===- JsonFile.h - reading user JSON files with precise errors ----------===//
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace autoddl {

/// Deepest nesting of arrays and objects accepted in a JSON file: real model,
/// cluster and plan files nest fewer than ten levels.
constexpr size_t kMaxJsonDepth = 1000;

/// Reads and parses a JSON file the user gave us (readUserFile: a regular file
/// of bounded size). Throws UserError naming the file and the cause: missing
/// path, a directory, a device or FIFO, an empty or binary file, nesting deeper
/// than kMaxJsonDepth or a syntax error (with line and column). `what` says
/// what the file is ("model", "cluster").
nlohmann::json readJsonFile(const std::string &path, const std::string &what);

/// Parses JSON text; `origin` names it in messages. Same errors as
/// readJsonFile.
nlohmann::json parseJsonText(const std::string &text,
                             const std::string &origin);

/// "<origin>: at <json pointer>: " prefix for errors inside a parsed document.
std::string jsonPlace(const std::string &origin,
                      const nlohmann::json::json_pointer &where);

/// Writes `text` to `path` atomically (temporary file in the same folder,
/// fsync, rename), so a reader never sees a half-written file and a failure
/// leaves the old file intact; refuses devices, FIFOs and the command's inputs
/// (writeUserFile). Throws UserError on failure.
void writeFileAtomically(const std::string &path, const std::string &text);

} // namespace autoddl
