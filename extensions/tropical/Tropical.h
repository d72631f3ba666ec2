// The tropical module: `einstage.tropical.v1`, einsum over the max-plus or min-plus semiring -- products become sums
// and sums become max (or min). Stage: extension module, written only against the public extension interface
// (extensions/api/Extension.h), as a third party would write one; built only as a shared library
// (einstage_tropical_module) and loaded by path.
//
// out[output labels] = MAX (or MIN) over the other labels of (x1[labels of x1] + x2[labels of x2] + ...)
//
//   %0 = einstage.tropical.v1(%d, %d) {semiring = "min_plus", subscripts = "ij,jk->ik"} : f64[n,n]
//
// Real uses: min-plus squaring of a distance matrix gives all-pairs shortest paths (k squarings cover paths of up to
// 2^k edges); a max-plus "i,ij->j" step followed by adding emission log-probabilities is one Viterbi step (the
// score of the best state sequence). Subscripts are plain letters with an explicit output ("ij,jk->ik"); a letter
// repeated within one operand reads its diagonal; output letters appear once and in some input. An empty reduction
// gives the semiring's zero (-inf for max-plus, +inf for min-plus). Dtypes f32 and f64 (all operands equal).
// Symbolic extents that must match become shape constraints through the type rule, like any family.
#pragma once

#include "extensions/api/Extension.h"

#include <string>
#include <vector>

namespace tropical {

enum class Semiring { max_plus, min_plus };

/// Parsed subscripts: one letter string per operand and the output letters.
struct Spec {
  std::vector<std::string> inputs;
  std::string output;
  std::string text() const;
};

/// Parses "ij,jk->ik"; fails (einstage::ErrorKind::parse) saying what is wrong and where.
Spec parse_spec(std::string_view text);

/// The attributes of one tropical instruction; the payload is einstage::FamilyPayload<TropicalAttrs>
/// (extensions/api/Family.h supplies family(), hash(), equals(), clone() and the readers returning the payload).
struct TropicalAttrs {
  static constexpr std::string_view kFamily = "einstage.tropical.v1";
  Spec spec;
  Semiring semiring = Semiring::max_plus;

  std::string to_text() const;
  std::string to_json() const;
  bool operator==(const TropicalAttrs& o) const {
    return semiring == o.semiring && spec.inputs == o.spec.inputs && spec.output == o.spec.output;
  }
  static TropicalAttrs parse_text(std::string_view text);
  static TropicalAttrs parse_json(std::string_view text);
};

using TropicalPayload = einstage::FamilyPayload<TropicalAttrs>;

const EinstageModuleDescriptor* module_descriptor();

}  // namespace tropical
