# One rank of a collective job: y = the sum over every rank of x, for [128, 64] float32.
# Load it with nrt_load_collectives (one model per rank); a plain nrt_load cannot run it.
# SP loads x into SBUF, POOL all-reduces it across the ranks, SP stores the result.
.target trn2
.tensor x float32 [128,64] input
.tensor y float32 [128,64] output

sp dma_copy dst=sbuf.fp32[0:128]+0[[1,64]] src=hbm.fp32(x)+0[[64,128],[1,64]] queue=0 signal=S[0]+=1
pool all_reduce dst=sbuf.fp32[0:128]+256[[1,64]] src=sbuf.fp32[0:128]+0[[1,64]] op=add wait=S[0]>=1 signal=S[1]+=1
sp dma_copy dst=hbm.fp32(y)+0[[64,128],[1,64]] src=sbuf.fp32[0:128]+256[[1,64]] queue=1 wait=S[1]>=1
