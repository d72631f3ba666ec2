// Guide story (c): differentiate a traced program (compiler/ad/Ad.h) and run the derivatives. Quoted in
// docs/guide.md.
#include "docs/examples/Check.h"
#include "compiler/Trace.h"
#include "compiler/ad/Ad.h"
#include "extensions/einsum/Module.h"
#include "extensions/einsum/op/TraceEinsum.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"

#include <string>
#include <vector>

using namespace einstage;
using example::check;
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

  // [select]
  TraceContext tc("two", &registry);                     // two(x, w) = (sum((x·w)²), sum(x))
  TracedTensor tx = tc.parameter("x", DType::f64, {Dim::symbol("n"), 3});
  TracedTensor tw2 = tc.parameter("w", DType::f64, {3, 4});
  TracedTensor ty = einsum::einsum(tc, "ij,jk->ik", {tx, tw2});
  TracedTensor ty2 = ty * ty;
  Program two = tc.finish({sum(ty2), sum(tx)});
  Program g1 = ad::grad(two, 0, {0, 1}, &registry);             // output 0 only: the same as grad(loss, ...)
  Program vg2 = ad::value_and_grad(two, 1, {0}, &registry);     // (sum(x), ones like x); the einsum is dropped
  Program v01 = ad::vjp(two, ad::Outputs{1, 0}, {0}, &registry);  // (%x, %w, %ct_1, %ct_0) -> (sum(x), loss, dx)
  std::vector<Tensor> selected = rt.prepare(g1).run({xv, wv});
  // [select]
  check_close(selected.at(0), dx, "grad of output 0, x");
  check_close(selected.at(1), dw, "grad of output 0, w");
  std::vector<Tensor> sum_x = rt.prepare(vg2).run({xv, wv});
  double total = 0;
  for (double v : xs) total += v;
  check_close(sum_x.at(0), {total}, "value of output 1");
  check_close(sum_x.at(1), std::vector<double>(xs.size(), 1.0), "grad of output 1");
  std::vector<Tensor> pulled2 = rt.prepare(v01).run({xv, wv, Tensor::scalar<double>(2.0), half});
  std::vector<double> both_dx = half_dx;
  for (double& d : both_dx) d += 2.0;
  check_close(pulled2.at(2), both_dx, "vjp of outputs 1 and 0 with cotangents 2 and 0.5");
  std::string index_error;
  try {
    ad::grad(two, 3, {0}, &registry);
  } catch (const Error& e) {
    index_error = e.what();
  }
  check(index_error == "grad: output index 3 is out of range for @two, which has 2 outputs (f64[], f64[]); give an "
                       "index from 0 to 1",
        "the message the guide quotes: " + index_error);

  return example::result("03_grad");
}
