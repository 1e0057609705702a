"""FP8 / FP4 rollouts: fake-quantised sampling policies (W8A8, FP8 KV cache) with TIS/MIS
correction in the sequence trainer (:mod:`.quant`; quantisation formats registered there)."""
