//===- ClusterJson.h - cluster files and presets --------------------------===//
//
// Reads a cluster description (docs/cluster-format.md) into a cost::Cluster.
// Throws autoddl::UserError naming the file and the JSON place of the cause:
// syntax errors with line:column, unknown fields, wrong types, missing sources,
// impossible values (zero or negative bandwidth, ...).
//
// --cluster takes a preset name (a file name in the presets folder without
// .json) or a path. The presets folder is $AUTODDL_PRESETS_DIR when set,
// otherwise the source tree's examples/clusters/ (compiled in).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost_model/Cluster.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace autoddl::cost {

/// Parses an already-read cluster document; `origin` names it in messages.
Cluster clusterFromJson(const nlohmann::json &doc, const std::string &origin);

/// Reads a cluster file.
Cluster readClusterFile(const std::string &path);

/// The folder presets are looked up in (see above).
std::string presetsDir();
/// Names of the presets found there, sorted.
std::vector<std::string> presetNames();

/// The file a `--cluster` spec names (see loadCluster); throws UserError for
/// an unknown preset.
std::string clusterSpecPath(const std::string &spec);

/// `spec` is a path when it names an existing file or contains '/' or ends in
/// ".json"; otherwise a preset name. `nodes` > 0 scales the cluster to that
/// many nodes. Throws UserError for an unknown preset (listing the known ones).
Cluster loadCluster(const std::string &spec, int nodes = 0);

} // namespace autoddl::cost
