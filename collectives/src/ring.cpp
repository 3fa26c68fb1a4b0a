// The ring: R - 1 steps, each a chunk to the next rank and one from the previous.
#include "plans.h"

namespace neuronsim::cc::plans {

void ring_reduce_scatter(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0) {
  // Step s: send chunk r-s-1 to r+1, receive chunk r-s-2 from r-1 and reduce; rank r ends
  // with chunk r fully reduced.
  for (int s = 0; s < R - 1; ++s) {
    Step st;
    int sc = mod(r - s - 1, R), rc = mod(r - s - 2, R);
    uint64_t tag = tag0 + static_cast<uint64_t>(s);
    st.sends.push_back({mod(r + 1, R), 0, c.off(sc), c.bytes(sc, sc + 1), tag, false});
    st.recvs.push_back({mod(r - 1, R), 0, c.off(rc), c.bytes(rc, rc + 1), tag, true});
    st.reduction_streams = s + 2 < R;  // the chunk reduced now is sent on at the next step
    p.steps.push_back(std::move(st));
  }
}

void ring_all_gather(RankPlan& p, int R, int r, const Chunks& c, uint64_t tag0) {
  // Step s: send chunk r-s to r+1, receive chunk r-s-1 from r-1.
  for (int s = 0; s < R - 1; ++s) {
    Step st;
    int sc = mod(r - s, R), rc = mod(r - s - 1, R);
    uint64_t tag = tag0 + static_cast<uint64_t>(s);
    st.sends.push_back({mod(r + 1, R), 0, c.off(sc), c.bytes(sc, sc + 1), tag, false});
    st.recvs.push_back({mod(r - 1, R), 0, c.off(rc), c.bytes(rc, rc + 1), tag, false});
    p.steps.push_back(std::move(st));
  }
}

}  // namespace neuronsim::cc::plans
