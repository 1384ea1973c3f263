// test_backend_ops, linears: the projections of one input (Backend::linears) of every registered
// backend against double-precision loops on fresh random inputs (the suite's instantiation is in
// backend_ops_test.cpp).
#include <algorithm>
#include <string>
#include <vector>

#include "backend_ops_util.h"

namespace deepinfer::backend_ops_test {
namespace {

// linears: sibling projections of one input (V4's wq_a, wkv, the compressors' ...), the CUDA backend's
// tensor-core GEMM over all of a format's weights in one launch (nine BF16 ones: two launches of up
// to 8; row counts that end mid-tile, so members meet inside what one weight's tiles would be), a
// lone F32 one beside them. Every output against the reference at decode and prefill sizes, each
// token's rows alone against the batch where the backend keeps bits under batching, and at 1-2 rows
// (decode) each output against its own linear, bit for bit.
TEST_P(BackendOps, LinearsShareOneInput) {
  const int64_t cols = 640;  // 5 slabs: split K, a short last slice
  struct Member {
    DType dtype;
    Scales scales;
    int64_t rows;
  };
  std::vector<Member> members = {{DType::F8_E4M3, Scales::E8M0Blocks, 1024}, {DType::BF16, Scales::None, 200},
                                 {DType::F8_E4M3, Scales::E8M0Blocks, 520},  {DType::F32, Scales::None, 48},
                                 {DType::BF16, Scales::None, 64}};
  for (int64_t r : {16, 40, 256, 8, 24, 72, 1000}) members.push_back({DType::BF16, Scales::None, r});
  std::vector<const StoredWeight*> ws;
  for (const Member& m : members) ws.push_back(&keep(make_weight(rng, m.dtype, m.rows, cols, m.scales, 128)));
  for (int64_t T : {1, 2, 8, 9, 24, 40, 70}) {
    const auto x = randoms(static_cast<size_t>(T * cols));
    const auto dx = on_device(x);
    std::vector<DeviceF32> ys;
    std::vector<backend::LinearOut> outs;
    for (const StoredWeight* w : ws) ys.push_back(nan_output(static_cast<size_t>(T * w->w.rows)));
    for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i]->w, ys[i].view({T, ws[i]->w.rows})});
    be->linears(dx.view({T, cols}), outs);
    for (size_t i = 0; i < ws.size(); ++i) {
      const auto got = ys[i].download();
      const std::string label = "member " + std::to_string(i) + " (" + std::to_string(ws[i]->w.rows) + " rows) T=" +
                                std::to_string(T);
      EXPECT_CLOSE(got, ref_linear(*ws[i], x, T), label);
      if (T <= 2) {  // decode: linears gives each member its own linear's bits
        auto alone = nan_output(static_cast<size_t>(T * ws[i]->w.rows));
        be->linear(ws[i]->w, dx.view({T, cols}), alone.view({T, ws[i]->w.rows}));
        const auto own = alone.download();
        EXPECT_TRUE(std::equal(own.begin(), own.end(), got.begin(), got.end())) << label << ": differs from its own linear";
      }
      if (!be->batching_keeps_bits() || T == 1) continue;
      for (int64_t t : {int64_t{0}, T - 1}) {
        const auto dxr = on_device(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
        std::vector<DeviceF32> yr;
        std::vector<backend::LinearOut> alone;
        for (const StoredWeight* w : ws) yr.push_back(nan_output(static_cast<size_t>(w->w.rows)));
        for (size_t k = 0; k < ws.size(); ++k) alone.push_back({&ws[k]->w, yr[k].view({1, ws[k]->w.rows})});
        be->linears(dxr.view({1, cols}), alone);
        const auto row = yr[i].download();
        const int64_t R = ws[i]->w.rows;
        EXPECT_TRUE(std::equal(row.begin(), row.end(), got.begin() + t * R)) << label << ": row " << t << " alone differs";
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::backend_ops_test
