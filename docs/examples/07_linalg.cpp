// Linear algebra story (docs/linalg.md quotes it): a truncated-SVD low-rank approximation traced as a program, the
// best rank-k approximation A_k = U_k diag(S_k) Vh_k of A fitted to a target T, differentiated with
// ad::value_and_grad, and its gradient checked against central finite differences of the program itself.
#include "docs/examples/Check.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/linalg/Module.h"
#include "extensions/linalg/TraceLinalg.h"
#include "runtime/Runtime.h"

#include <cmath>
#include <vector>

using namespace einstage;
using example::check;
using example::check_close;

int main() {
  // [lowrank]
  Runtime rt;
  rt.add_module(linalg::module_descriptor());          // the einstage.linalg.v1 family: svd, qr, eigh, inv_upper
  const ExtensionRegistry& registry = rt.registry();
  const int64_t m = 6, n = 4, k = 2;

  TraceContext ctx("lowrank", &registry);               // loss(A, T) = ‖A_k − T‖², A_k the rank-k truncation of A
  TracedTensor a = ctx.parameter("a", DType::f64, {m, n});
  TracedTensor t = ctx.parameter("t", DType::f64, {m, n});
  auto [u, s, vh] = linalg::svd(ctx, a);                // thin: u [6,4], s [4] (descending), vh [4,4]
  TracedTensor uk = slice(u, 1, 0, k);                  // keep the first k triplets: u[:, :k]
  TracedTensor sk = slice(s, 0, 0, k);                  // s[:k]
  TracedTensor vhk = slice(vh, 0, 0, k);                // vh[:k, :]
  TracedTensor usk = uk * broadcast_in_dim(sk, {1}, {m, k});
  TracedTensor ak = dot_general(usk, vhk, {1}, {0});    // U_k diag(S_k) Vh_k
  TracedTensor diff = ak - t;
  Program loss = ctx.finish({sum(diff * diff)});

  Program vg = ad::value_and_grad(loss, {0}, &registry);  // (loss, d loss / d A)
  // [lowrank]

  std::vector<double> as(m * n), ts(m * n);
  for (size_t i = 0; i < as.size(); ++i) {
    as[i] = std::sin(1.7 * double(i) + 0.3);            // a generic matrix: distinct singular values
    ts[i] = std::cos(0.9 * double(i));
  }
  const Tensor av = Tensor::from_col_major<double>({m, n}, as), tv = Tensor::from_col_major<double>({m, n}, ts);
  const std::vector<Tensor> out = rt.prepare(vg).run({av, tv});
  check(out.size() == 2, "value_and_grad returns the loss and one gradient");

  // Central differences of the loss program, one element of A at a time.
  const Executable forward = rt.prepare(loss);
  auto value_at = [&](const std::vector<double>& x) {
    return forward.run({Tensor::from_col_major<double>({m, n}, x), tv})[0].to_col_major<double>()[0];
  };
  check_close(out[0], {value_at(as)}, "the loss of value_and_grad equals the loss program's", 1e-14);
  std::vector<double> fd(as.size());
  const double h = 1e-6;
  for (size_t i = 0; i < as.size(); ++i) {
    std::vector<double> up = as, down = as;
    up[i] += h;
    down[i] -= h;
    fd[i] = (value_at(up) - value_at(down)) / (2 * h);
  }
  check_close(out[1], fd, "d loss / d A against central differences", 1e-6);
  return example::result("07_linalg");
}
