// Guide story (c): differentiate a traced program (compiler/ad/Ad.h) and run the derivatives. Quoted in
// docs/guide.md.
#include "docs/examples/Check.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/TraceEinsum.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"

#include <vector>

using namespace einstage;
using example::check_close;

int main() {
  // [grad]
  Runtime rt;
  rt.add_module(einsum::module_descriptor());           // its registry carries einsum's AD rules
  const ExtensionRegistry& registry = rt.registry();

  TraceContext ctx("loss", &registry);                  // loss(x, w) = sum((x·w)²)
  TracedTensor x = ctx.parameter("x", DType::f64, {Dim::symbol("n"), 3});
  TracedTensor w = ctx.parameter("w", DType::f64, {3, 4});
  TracedTensor y = einsum::einsum(ctx, "ij,jk->ik", {x, w});
  TracedTensor y2 = y * y;
  Program loss = ctx.finish({sum(y2)});

  Program g = ad::grad(loss, {0, 1}, &registry);            // @loss_grad(%x, %w) -> (f64[n,3], f64[3,4])
  Program vg = ad::value_and_grad(loss, {1}, &registry);    // (loss, d loss / d w)
  fmt::print("{}", print_program(g));

  std::vector<double> xs(2 * 3), ws(3 * 4);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = 0.5 * double(k) - 1;
  for (size_t k = 0; k < ws.size(); ++k) ws[k] = double(k % 4) - 1.5;
  Tensor xv = Tensor::from_col_major<double>({2, 3}, xs);   // binds n = 2
  Tensor wv = Tensor::from_col_major<double>({3, 4}, ws);
  std::vector<Tensor> grads = rt.prepare(g).run({xv, wv});  // {2·y·wᵀ, 2·xᵀ·y}
  std::vector<Tensor> value_grad = rt.prepare(vg).run({xv, wv});
  // [grad]

  // Independent oracle: y = x·w, loss = Σ y², dx = 2·y·wᵀ, dw = 2·xᵀ·y, by loops (column-major).
  std::vector<double> yv(2 * 4, 0.0), dx(2 * 3, 0.0), dw(3 * 4, 0.0);
  double value = 0;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 3; ++j) yv[i + 2 * k] += xs[i + 2 * j] * ws[j + 3 * k];
      value += yv[i + 2 * k] * yv[i + 2 * k];
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        dx[i + 2 * j] += 2 * yv[i + 2 * k] * ws[j + 3 * k];
        dw[j + 3 * k] += 2 * xs[i + 2 * j] * yv[i + 2 * k];
      }
  check_close(grads.at(0), dx, "grad x");
  check_close(grads.at(1), dw, "grad w");
  check_close(value_grad.at(0), {value}, "value_and_grad value");
  check_close(value_grad.at(1), dw, "value_and_grad w");

  // [jvp-vjp]
  Program fwd = ad::jvp(loss, {1}, &registry);           // (%x, %w, %t_w) -> (loss, d loss · t_w)
  Program rev = ad::vjp(loss, {0}, &registry);           // (%x, %w, %ct_0) -> (loss, ct_0 · d loss / d x)
  Tensor tw = Tensor::from_col_major<double>({3, 4}, std::vector<double>(12, 1.0));
  Tensor half = Tensor::scalar<double>(0.5);
  std::vector<Tensor> directional = rt.prepare(fwd).run({xv, wv, tw});   // Σ dw (all-ones tangent)
  std::vector<Tensor> pulled = rt.prepare(rev).run({xv, wv, half});      // 0.5 · dx
  // [jvp-vjp]
  double dir = 0;
  for (double d : dw) dir += d;
  std::vector<double> half_dx = dx;
  for (double& d : half_dx) d *= 0.5;
  check_close(directional.at(1), {dir}, "jvp along ones");
  check_close(pulled.at(1), half_dx, "vjp with cotangent 0.5");

  // [grad-of-grad]
  TraceContext cc("cube", &registry);                    // cube(s) = s³ on a scalar
  TracedTensor s = cc.parameter("s", DType::f64, {});
  TracedTensor s2 = s * s;
  Program cube = cc.finish({s2 * s});
  Program d2 = ad::grad(ad::grad(cube, {0}, &registry), {0}, &registry);   // 6·s
  Tensor second = rt.prepare(d2).run({Tensor::scalar<double>(1.5)}).at(0);  // 9
  // [grad-of-grad]
  check_close(second, {6 * 1.5}, "grad of grad");

  return example::result("03_grad");
}
