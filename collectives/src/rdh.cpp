// Recursive halving (reduce-scatter) and doubling (all-gather) for a power of two of ranks.
#include "plans.h"

namespace neuronsim::cc::plans {

void rdh_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0) {
  // Recursive halving: partner at distance R/2, R/4, ..., 1; keep the half holding chunk r.
  int lo = 0, hi = R, L = log2i(R);
  for (int k = 0; k < L; ++k) {
    int d = R >> (k + 1), partner = r ^ d, mid = lo + (hi - lo) / 2;
    int klo = (r & d) ? mid : lo, khi = (r & d) ? hi : mid;
    int slo = (r & d) ? lo : mid, shi = (r & d) ? mid : hi;
    Step st;
    uint64_t tag = tag0 + static_cast<uint64_t>(k);
    st.sends.push_back({partner, 0, c.off(slo), c.bytes(slo, shi), tag, false});
    st.recvs.push_back({partner, 0, c.off(klo), c.bytes(klo, khi), tag, true});
    st.reduction_streams = k + 1 < L;  // half of what is reduced now is sent at the next step
    p.steps.push_back(std::move(st));
    lo = klo;
    hi = khi;
  }
}

void rdh_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0) {
  // Recursive doubling: partner at distance 1, 2, ..., R/2; exchange the aligned ranges held.
  int L = log2i(R);
  for (int k = 0; k < L; ++k) {
    int d = 1 << k, partner = r ^ d;
    int mine = r & ~(d - 1), theirs = partner & ~(d - 1);
    Step st;
    uint64_t tag = tag0 + static_cast<uint64_t>(k);
    st.sends.push_back({partner, 0, c.off(mine), c.bytes(mine, mine + d), tag, false});
    st.recvs.push_back({partner, 0, c.off(theirs), c.bytes(theirs, theirs + d), tag, false});
    p.steps.push_back(std::move(st));
  }
}

}  // namespace neuronsim::cc::plans
