# Elementwise add of two [128, 512] float32 tensors: out = a + b.
# SP loads both inputs into SBUF on two DMA queues, DVE adds, SP stores the sum.
# Each instruction waits on the semaphore its producer signals.
.target trn2
.tensor a float32 [128,512] input
.tensor b float32 [128,512] input
.tensor out float32 [128,512] output

sp dma_copy dst=sbuf.fp32[0:128]+0[[1,512]] src=hbm.fp32(a)+0[[512,128],[1,512]] queue=0 signal=S[0]+=1
sp dma_copy dst=sbuf.fp32[0:128]+2048[[1,512]] src=hbm.fp32(b)+0[[512,128],[1,512]] queue=1 signal=S[1]+=1
dve sem_wait wait=S[0]>=1
dve tensor_tensor dst=sbuf.fp32[0:128]+4096[[1,512]] in0=sbuf.fp32[0:128]+0[[1,512]] in1=sbuf.fp32[0:128]+2048[[1,512]] op=add wait=S[1]>=1 signal=S[2]+=1
sp dma_copy dst=hbm.fp32(out)+0[[512,128],[1,512]] src=sbuf.fp32[0:128]+4096[[1,512]] queue=2 wait=S[2]>=1
