//===- TemplateSupport.h - pieces shared by the template builders --------===//
#pragma once

#include "ir/import/GraphBuilder.h"
#include "ir/import/Templates.h"

#include <string>

namespace autoddl::import {

/// Throws UserError "<o.place><message>" unless `ok`.
void require(bool ok, const BuildOptions &o, const std::string &message);

/// The sequence length to build for: --seq, or the model's context length;
/// refuses one beyond `maxPositions` (`field` names the config field).
int64_t sequenceLength(const BuildOptions &o, int64_t maxPositions,
                       const std::string &field);

/// Refuses --seq for models that have no sequence dimension.
void requireNoSeq(const BuildOptions &o, const std::string &family);

/// A torch.nn.Linear(in, out): weight `<prefix>.weight` [out,in] (normal,
/// `std`), bias `<prefix>.bias` [out] (zeros) when `bias`.
int torchLinear(GraphBuilder &b, const std::string &opName,
                const std::string &prefix, int x, int64_t in, int64_t out,
                bool bias, double std);

/// Applies a Hugging Face activation name (hidden_act / activation_function):
/// gelu_new, gelu_pytorch_tanh, gelu_fast → gelu(tanh); gelu → gelu(erf);
/// relu; silu, swish → silu. Anything else is refused.
int activation(GraphBuilder &b, const std::string &opName, int x,
               const std::string &act, const BuildOptions &o);

} // namespace autoddl::import
