build-clang/obj/kernels/iq2_grids.o: kernels/iq2_grids.c \
  kernels/iq2_grids.h

kernels/iq2_grids.h:
