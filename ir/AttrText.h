// Text forms of standard-op attribute values, shared by the printer, the parser and the JSON reader/writer so that
// each value type has exactly one spelling. Semantic IR (compiler stage); depends on ir/Ops.h.
//
//   int list   [0, 1]          dims      [n, 4]        int    3          real   2.5 (shortest round-trip form)
//   dtype      f32             comparison lt (ir/Comparison.h: lt, le, gt, ge, eq, ne)
//   tensor     f64[2,2]<[1, 2, 3, 4]>   (elements in column-major order; complex elements as (re, im); floats in
//                                       shortest round-trip form)
#pragma once

#include "ir/Ops.h"

#include <string>
#include <string_view>

namespace einstage {

std::string format_attr(int64_t v);
std::string format_attr(double v);
std::string format_attr(const Axes& v);
std::string format_attr(const std::vector<Dim>& v);
std::string format_attr(DType v);
std::string format_attr(Comparison v);
std::string format_attr(const Tensor& v);

/// Readers; each fails (ErrorKind::parse) with a message naming `what` (e.g. "attribute 'perm' of 'transpose'").
void parse_attr(std::string_view text, int64_t& out, std::string_view what);
void parse_attr(std::string_view text, double& out, std::string_view what);
void parse_attr(std::string_view text, Axes& out, std::string_view what);
void parse_attr(std::string_view text, std::vector<Dim>& out, std::string_view what);
void parse_attr(std::string_view text, DType& out, std::string_view what);
void parse_attr(std::string_view text, Comparison& out, std::string_view what);
void parse_attr(std::string_view text, Tensor& out, std::string_view what);

/// "axes = [0, 1]" style text of a standard op's attributes (sorted by key), or an extension payload's to_text();
/// empty when the op has none.
std::string format_op_attributes(const Op& op);

/// Fills the attributes of a default-constructed standard op from its attribute text (without braces). Every
/// attribute must be present exactly once; unknown keys fail naming the op and the keys it takes. `where` (may be
/// empty) prefixes the messages.
void parse_std_op_attributes(Op& op, std::string_view text, std::string_view where);

}  // namespace einstage
