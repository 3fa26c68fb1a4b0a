# 64 dependent ScalarE activations of one element on trn1 (NC-v2): each reads the result
# of the one before (ping-pong between two SBUF words), the nki_perf_guide's dependent
# 1-element instruction case. Generated; 64 instructions, so `per` is 64.
.target trn1
.tensor out float32 [1,1] output

act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+4[[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] func=exp
act activation dst=sbuf.fp32[0:1]+0[[1,1]] src=sbuf.fp32[0:1]+4[[1,1]] func=exp signal=S[0]+=1
sp dma_copy dst=hbm.fp32(out)+0[[1,1],[1,1]] src=sbuf.fp32[0:1]+0[[1,1]] queue=0 wait=S[0]>=1
