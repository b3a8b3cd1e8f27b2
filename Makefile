# qk - a C toolchain for quantized LLM checkpoints.  GNU Make.
#
#   make            build/qk and its links (release, -O2, runs on any x86-64)
#   make check      Criterion tests, then the same tests under ASan+UBSan
#   make demo       the main job on the bundled tiny model
#   make install PREFIX=/usr/local
#   make fuzz       libFuzzer harnesses (clang); make fuzz-smoke runs each 30 s (check: 3 s each)
#   make report-demo  qk-report on stories4M with the GGUF presets

CC      ?= cc
ifeq ($(origin CC),default)
CC      := gcc
endif
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2 -g
CSTD    := -std=c17 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
# Includes are written from the root with their folder ("lib/core/err.h"), so one -I serves.
INC     := -I.
CFLAGS  ?=
ALL_CFLAGS = $(CSTD) -ffp-contract=off $(OPT) $(WARN) $(INC) -pthread -MMD -MP $(CFLAGS)
LDLIBS  := -lzstd -lm -pthread
# Compile on every core (JOBS=1 for a serial build): make check builds the library three times
# (plain, ASan+UBSan, fuzzer), and serially on 2 cores that alone took 11 of its minutes.
JOBS    ?= $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(JOBS)
endif

# Debian packages the build and its tests need: a file each installs -> package.
DEPS_HDRS := /usr/include/zstd.h:libzstd-dev /usr/include/criterion/criterion.h:libcriterion-dev \
             /usr/bin/parallel:parallel
MISSING   = $(foreach d,$(DEPS_HDRS),$(if $(wildcard $(firstword $(subst :, ,$(d)))),,$(lastword $(subst :, ,$(d)))))

LIB_SRC  := $(sort $(wildcard lib/*/*.c formats/*.c kernels/*.c kernels/x86/*.c))
CMD_SRC  := $(sort $(wildcard cmd/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
# Every cmd/NAME.c except qk.c is a command: the binary answers to qk-NAME.
COMMANDS := $(filter-out qk,$(basename $(notdir $(CMD_SRC))))

LIB_OBJ  = $(LIB_SRC:%.c=$(B)/obj/%.o)
B := $(BUILD)

.PHONY: all deps check test asan-test demo install fuzz clean
all: deps $(B)/qk links

deps:
	@m="$(strip $(MISSING))"; if [ -n "$$m" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $$m"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$m >/dev/null || exit 1; \
	  else echo "missing packages; run: sudo apt-get install -y $$m" >&2; exit 1; fi; fi

$(B)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/libqk.a: $(LIB_SRC:%.c=$(B)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

$(B)/qk: $(CMD_SRC:%.c=$(B)/obj/%.o) $(B)/libqk.a
	$(CC) $(ALL_CFLAGS) -o $@ $(CMD_SRC:%.c=$(B)/obj/%.o) $(B)/libqk.a $(LDLIBS)

links: $(B)/qk
	@for c in $(COMMANDS); do ln -sf qk $(B)/qk-$$c; done

.PHONY: links

# --- tests: one Criterion binary per tests/test_*.c -------------------------
$(B)/tests/%: tests/%.c $(B)/libqk.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(B)/libqk.a -lcriterion $(LDLIBS)

TEST_BINS = $(TEST_SRC:tests/%.c=$(B)/tests/%)

test: all $(TEST_BINS) $(B)/tools/conv-synth
	@fail=0; for t in $(TEST_BINS); do QK_BIN=$(CURDIR)/$(B)/qk $$t --jobs 2 || fail=1; done; \
	  echo "test_golden again at QK_CPU=scalar (the encoders' scalar searches)"; \
	  QK_CPU=scalar $(B)/tests/test_golden --jobs 2 || fail=1; \
	  if [ -x tests/cli.sh ]; then QK_BIN=$(CURDIR)/$(B)/qk sh tests/cli.sh || fail=1; fi; exit $$fail

asan-test:
	QK_SANITIZED=1 $(MAKE) BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

check: test
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(MAKE) asan-test
	$(MAKE) fuzz-smoke FUZZ_TIME=$(CHECK_FUZZ_TIME)

# ThreadSanitizer: qk built with -fsanitize=thread in build-tsan/, and tests/tsan.sh's threaded
# command lines (the pool under matmul and attention in qk-run, qk-kld and qk-bench, quantization
# with several threads, sharded KLD and a factored base read with threads).  The Criterion tests
# cannot run under TSan (Criterion's fixed-address arena collides with TSan's shadow memory).
# Part of crosscheck, not of check (the build and the slowed-down runs take minutes).
tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" all
	sh tests/tsan.sh build-tsan/qk
.PHONY: tsan

demo: all
	@sh tests/demo.sh $(B)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 755 $(B)/qk $(DESTDIR)$(PREFIX)/bin/qk
	@for c in $(COMMANDS); do ln -sf qk $(DESTDIR)$(PREFIX)/bin/qk-$$c; done
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 completions/qk.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/qk
	@for c in $(COMMANDS); do ln -sf qk $(DESTDIR)$(PREFIX)/share/bash-completion/completions/qk-$$c; done
	install -m 644 completions/_qk $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_qk
	install -m 644 completions/qk.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/qk.fish

# --- benchmarks (not tests): plain programs in tools/ --------------------
$(B)/tools/%: tools/%.c $(B)/libqk.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(B)/libqk.a $(LDLIBS)

bench-kernels: $(B)/tools/bench-kernels
	$(B)/tools/bench-kernels
.PHONY: bench-kernels

# a short fixed suite -> $(B)/bench.md (LLAMA_BENCH=/path/llama-bench, IK_BENCH=/path/ik-llama-bench add a side-by-side table)
bench: all $(B)/tools/conv-synth
	sh tools/bench-suite.sh $(B)/qk $(B)/bench.md
	sh tools/bench-convert.sh
# qk-quant vs llama-quantize (LLAMA_QUANTIZE=/path/llama-quantize) on bench250m
bench-quant: all
	sh tools/bench-quant.sh
# quantized HF checkpoints against the GGUF types of their bytes per weight on bench250m (issue #18)
bench-hf: all
	sh tools/bench-hf.sh
# qk-convert vs convert_hf_to_gguf.py (LLAMA_CPP=/path/llama.cpp, PYTHON=...) on a 245M-parameter model
bench-convert: all $(B)/tools/conv-synth
	sh tools/bench-convert.sh
.PHONY: bench bench-quant bench-hf bench-convert

# the numerics studies of docs/studies.md (scorecard, wire sweep, KV sweep) on stories260K
studies: $(B)/tools/study-run
	sh tools/studies.sh $(B)
.PHONY: studies

# qk-report on stories4M with the GGUF presets -> $(B)/report-demo/report/
report-demo: all
	sh tools/report-demo.sh $(B)
.PHONY: report-demo

# reference Python packages (ml_dtypes, safetensors, compressed-tensors, torch, transformers) in a venv,
# llama.cpp for the model families (tools/archmodels.py) and qk-convert, and qk-report's HTML in
# headless Chromium (docs/report-demo.png), then the ThreadSanitizer runs (make tsan); not part of check
crosscheck: all $(B)/tools/ckpt-tool $(B)/tools/conv-synth report-demo
	sh tools/report-shot.sh $(B)
	sh tools/crosscheck.sh $(B)
	$(MAKE) tsan
.PHONY: crosscheck

# docs/cross-format.md: stories4M's GGUF types and quantized HF checkpoints against its F32 HF base (Python producers)
cross-format: all
	sh tools/cross-format.sh $(B) docs/cross-format.md
.PHONY: cross-format

# docs/retention.md: the scorecard's schemes written by qk-quant --to (calibrated where they are) on
# stories4M and a random smol135m, against their float bases, and the scorecard's claims (issue 19)
retention: all
	sh tools/retention.sh $(B) docs/retention.md
.PHONY: retention

# --- fuzzing: libFuzzer harnesses, one per parser --------------------------
# The library once with fuzzer coverage and ASan+UBSan (UB aborts, so libFuzzer sees it), each
# harness linked against it.  fuzz-smoke: 30 s each (FUZZ_TIME), new inputs in a scratch
# directory (the committed seeds stay as they are).  Part of check when clang is there, at
# CHECK_FUZZ_TIME (3 s) each: at 30 s the eleven harnesses' 330 s, with the fuzzer build, pushed
# a clean clone's make check past 20 minutes on 2 cores.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS = $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = $(CSTD) -ffp-contract=off -O1 -gline-tables-only -fno-omit-frame-pointer $(WARN) $(INC) -pthread $(FUZZ_SAN)
FUZZ_TIME ?= 30
CHECK_FUZZ_TIME ?= 3
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
# The SIMD kernels without ASan, UBSan or coverage: the harnesses fuzz parsers, which never hand
# them fuzzed bytes (the scalar kernels beside them stay instrumented, and make check's ASan+UBSan
# pass runs every SIMD kernel).  Instrumented, their unrolled loops took clang 850 s of the fuzz
# build's 940 (CPU seconds on a 2-core Zen 1), and the build 8 of a clean make check's 21 minutes.
build-fuzz/obj/kernels/x86/%.o: kernels/x86/%.c
	@mkdir -p $(dir $@)
	clang $(CSTD) -ffp-contract=off -O1 -gline-tables-only $(WARN) $(INC) -pthread -MMD -MP -c $< -o $@
build-fuzz/libqk.a: $(LIB_SRC:%.c=build-fuzz/obj/%.o)
	@rm -f $@
	ar rcs $@ $^
build-fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h build-fuzz/libqk.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< build-fuzz/libqk.a $(LDLIBS)
fuzz:
	@command -v clang >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq clang >/dev/null; else echo "missing clang; run: sudo apt-get install -y clang" >&2; exit 1; fi; }
	$(MAKE) $(FUZZ_BINS)
	@echo "run e.g.: sh tests/fuzz/run.sh fuzz_gguf 600   (or build-fuzz/fuzz_gguf -max_total_time=600 DIR tests/fuzz/corpus/gguf)"
fuzz-smoke:
	@if ! command -v clang >/dev/null; then echo "fuzz-smoke: skipped (no clang; sudo apt-get install -y clang)"; exit 0; fi; \
	  $(MAKE) --no-print-directory $(FUZZ_BINS) && \
	  fail=0; for h in $(FUZZ_SRC:tests/fuzz/%.c=%); do sh tests/fuzz/run.sh $$h $(FUZZ_TIME) || fail=1; done; exit $$fail
.PHONY: fuzz fuzz-smoke

clean:
	rm -rf build build-asan build-fuzz build-tsan

-include $(shell find $(B) -name '*.d' 2>/dev/null)
-include $(shell find build-fuzz -name '*.d' 2>/dev/null)
