# The smallest DMA: one 64-byte row from HBM to SBUF, whose time is the cross-engine start
# latency of a transfer (descriptor and semaphore handling), not its bytes.
.target trn2
.tensor x float32 [1,16] input
.tensor out float32 [1,16] output

sp dma_copy dst=sbuf.fp32[0:1]+0[[1,16]] src=hbm.fp32(x)+0[[16,1],[1,16]] queue=0 signal=S[0]+=1
sp dma_copy dst=hbm.fp32(out)+0[[16,1],[1,16]] src=sbuf.fp32[0:1]+0[[1,16]] queue=1 wait=S[0]>=1
