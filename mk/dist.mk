# ---- process groups (cgotorch/csrc/dist/, package dist) ----------------------------------------
# c10d's ProcessGroupGloo.hpp declares nothing without USE_C10D_GLOO (cgo gets it from
# cgotorch/flags.go); the C-level builds of the Makefile and mk/ take it through TORCH_INC.
# Gloo's own headers come from libgloo-dev (APT_PACKAGES); its code is inside libtorch_cpu.
TORCH_INC += -DUSE_C10D_GLOO
