// The mesh: one step, a chunk to and from every other rank at once.
#include "plans.h"

namespace neuronsim::cc::plans {

void mesh_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag) {
  Step st;
  for (int j = 0; j < R; ++j) {
    if (j == r) continue;
    st.sends.push_back({j, 0, c.off(j), c.bytes(j, j + 1), tag, false});
    st.recvs.push_back({j, 0, c.off(r), c.bytes(r, r + 1), tag, true});  // reduced in rank order
  }
  p.steps.push_back(std::move(st));
}

void mesh_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag) {
  Step st;
  for (int j = 0; j < R; ++j) {
    if (j == r) continue;
    st.sends.push_back({j, 0, c.off(r), c.bytes(r, r + 1), tag, false});
    st.recvs.push_back({j, 0, c.off(j), c.bytes(j, j + 1), tag, false});
  }
  p.steps.push_back(std::move(st));
}

}  // namespace neuronsim::cc::plans
