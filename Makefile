# srgeo - scale-resolved geometry of image encoders.
#
#   make            build build/srgeo (the shell) and build/srgeo.so (Lua module)
#   make deps       install missing Debian 12 packages (scripts/install-deps.sh)
#   make layers     check core/'s layering rules (tests/layers.lua)
#   make test       layering rules + C unit tests + Lua specs; ends with "N passed, N failed"
#   make sanitize   the same tests under ASan + UBSan (+ LeakSanitizer)
#   make fuzz       every parser's libFuzzer target, FUZZ_SECONDS each (clang;
#                   make test runs them 20 s each when clang is installed)
#   make bench      benchmarks (ratios against sgemm peak / PyTorch, same run)
#   make demo       deps + build + the headline experiment on a shipped model
#   make fixtures   regenerate PyTorch reference fixtures (needs python3-torch)
#   make models     retrain the shipped models (scripts/make_models.sh)
#   make install    PREFIX=/usr/local (DESTDIR= for staging): the shell, srgeo.so,
#                   the library, models, scripts, notebooks, srgeo.pc, srgeo.1,
#                   the Jupyter kernelspec
#   make uninstall
#   make clean

CC      ?= cc
BUILD   ?= build
PKGS    := lua5.4 openblas vips libcjson zlib libcmark-gfm libprotobuf-c libzmq libcurl
# The packages' flags are asked of pkg-config the first time a recipe needs
# them, never when make reads this file: on a fresh machine `make demo` runs
# `make deps` first, and before that there is no pkg-config nor any .pc file.
# Missing packages stop the build with that advice instead of a compiler
# error about a header.
pkg = $(eval PKG_$1 := $$(shell pkg-config --$2 $(PKGS)))$(if $(filter 0,$(.SHELLSTATUS)),,$(error \
  pkg-config cannot find $(PKGS) (or is not installed): run `make deps` (scripts/install-deps.sh) first))$(PKG_$1)
PKG_CFLAGS = $(call pkg,CFLAGS,cflags)
PKG_LIBS   = $(call pkg,LIBS,libs)
OPT     ?= -O2 -march=native
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration -fopenmp -fPIC \
           -MMD -MP -Icore $(PKG_CFLAGS)
LDLIBS   = $(PKG_LIBS) -lreadline -lm -fopenmp

# ONNX models are read with protobuf-c through the C code protoc-c makes
# from Debian's onnx.proto (libonnx-dev), generated here, never committed.
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
GEN      := $(BUILD)/gen
CFLAGS   += -I$(GEN)

# core/FLOOR/*.c: every floor but the Lua bindings, the shell and MPI goes
# into the Lua-free static library (core/README.md has the map).
CORE_SRC := $(filter-out core/lua/% core/shell/% core/mpi/%,$(wildcard core/*/*.c))
LUA_SRC  := $(wildcard core/lua/*.c)
TEST_SRC := $(wildcard tests/c/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o) $(GEN)/onnx.pb-c.o
LUA_OBJ  := $(LUA_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

all: $(BUILD)/srgeo $(BUILD)/srgeo.so $(BUILD)/srgeo_mpi.so

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo '  CC     $<'
	@$(CC) $(CFLAGS) -c $< -o $@

$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(GEN)
	@echo '  PROTOC $<'
	@protoc-c --c_out=$(GEN) --proto_path=$(dir $<) $<
$(GEN)/onnx.pb-c.o: $(GEN)/onnx.pb-c.c
	@echo '  CC     $<'
	@$(CC) $(CFLAGS) -c $< -o $@
# The ONNX reader includes the generated header (its own .d lists it after
# the first build).
$(BUILD)/core/io/onnx.o: $(GEN)/onnx.pb-c.h

# The depthwise and GEMM kernels' vector blocks want a·b + c fused (see
# depthwise.c, gemm.c); -std=c11 alone turns contraction off.
$(BUILD)/core/kernels/depthwise.o $(BUILD)/core/kernels/gemm.o: CFLAGS += -ffp-contract=fast

# core/'s layering rules (tests/layers.lua, core/README.md) gate the build:
# an upward include or a layer-kind comparison fails `make` itself.
$(BUILD)/layers.ok: tests/layers.lua $(wildcard core/*/*.c core/*/*.h)
	@mkdir -p $(BUILD)
	@lua5.4 tests/layers.lua > $@.log || { cat $@.log; exit 1; }
	@touch $@

$(BUILD)/libsrgeo_core.a: $(CORE_OBJ) $(BUILD)/layers.ok
	@rm -f $@ && ar rcs $@ $(CORE_OBJ)

$(BUILD)/srgeo: $(BUILD)/core/shell/shell.o $(BUILD)/core/shell/kernel.o $(LUA_OBJ) $(BUILD)/libsrgeo_core.a
	@echo '  LINK   $@'
	@$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) -Wl,-E

$(BUILD)/srgeo.so: $(LUA_OBJ) $(BUILD)/libsrgeo_core.a
	@echo '  LINK   $@'
	@$(CC) $(CFLAGS) -shared -o $@ $^ $(filter-out -llua5.4,$(LDLIBS))

# Open MPI's side of srgeo (core/mpi/comm.c), the one object linked with
# libmpi: srgeo dlopens it only when launched by mpirun (core/lua/mpi.c).
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   = $(shell pkg-config --libs ompi-c 2>/dev/null)
$(BUILD)/srgeo_mpi.so: core/mpi/comm.c core/mpi/comm.h $(BUILD)/layers.ok
	@pkg-config --exists ompi-c || { echo "srgeo_mpi.so needs Open MPI (libopenmpi-dev): make deps"; exit 1; }
	@echo '  LINK   $@'
	@$(CC) $(filter-out -fopenmp -MMD -MP,$(CFLAGS)) $(MPI_CFLAGS) -shared -o $@ core/mpi/comm.c $(MPI_LIBS) -lpthread

$(BUILD)/test_core: $(TEST_OBJ) $(BUILD)/libsrgeo_core.a
	@echo '  LINK   $@'
	@$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Benchmarks: each tests/bench/bench_NAME.c is a standalone program.
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/%)
$(BUILD)/bench_%: tests/bench/bench_%.c $(BUILD)/libsrgeo_core.a
	@echo '  LINK   $@'
	@$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Fuzzing (libFuzzer, clang): every tests/fuzz/fuzz_NAME.c runs FUZZ_SECONDS
# from tests/fuzz/corpus_NAME (seeds: tests/fuzz/seed_corpus.lua); a crash,
# a leak, a timeout or an input using more than FUZZ_RSS_MB fails the run
# and leaves build/fuzz/crash-* (or leak-*, timeout-*, oom-*) to turn into a
# test.  The core is built once with the fuzzer's instrumentation
# (build/fuzz/obj) and linked into each target.  `make test` fuzzes every
# target for FUZZ_TEST_SECONDS (20 s) when clang and libFuzzer are installed
# (install-deps.sh --test, as CI does), so a parser regression fails the
# test run; FUZZ_TEST_SECONDS=0 skips it.
FUZZ_SECONDS ?= 60
FUZZ_RSS_MB ?= 2048
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
# `=`, not `:=`: PKG_CFLAGS may only be asked for by a recipe (see pkg above).
FUZZ_CC = clang -g -O1 -Wno-pass-failed -fopenmp -D_GNU_SOURCE -std=c11 -Icore -I$(GEN) $(PKG_CFLAGS)
FUZZ_OBJ := $(CORE_SRC:%.c=build/fuzz/obj/%.o) build/fuzz/obj/$(GEN)/onnx.pb-c.o
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo '  CC     $@'
	@$(FUZZ_CC) -MMD -MP -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
build/fuzz/obj/core/io/onnx.o: $(GEN)/onnx.pb-c.h
# Header dependencies: without them an object built before a struct changed
# (sr_module_ops gained arity) kept the old layout and the onnx target read
# past a layer's ops table.
-include $(wildcard $(FUZZ_OBJ:.o=.d))
build/fuzz/libcore.a: $(FUZZ_OBJ)
	@rm -f $@ && ar rcs $@ $^
build/fuzz/%: tests/fuzz/%.c build/fuzz/libcore.a
	@echo '  FUZZ   $@'
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(PKG_LIBS) -lm

FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
fuzz-build: $(FUZZ_BIN)
fuzz: fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS)

layers:
	@lua5.4 tests/layers.lua

deps:
	sh scripts/install-deps.sh

# Retrain the shipped default encoders from scratch with the recorded
# commands (hours on 2 cores; resumable: rerun to continue).
models: all
	sh scripts/make_models.sh $(BUILD)

FUZZ_TEST_SECONDS ?= 20
have_fuzz = $(shell command -v clang >/dev/null 2>&1 && test -f "$$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)" && echo yes)
test: all $(BUILD)/test_core
	@if [ "$(FUZZ_TEST_SECONDS)" != 0 ] && [ -n "$(have_fuzz)" ]; then $(MAKE) --no-print-directory fuzz-build; fi
	@FUZZ_SECONDS=$(FUZZ_TEST_SECONDS) sh tests/run.sh $(BUILD)

# Separate build tree so sanitizer objects never mix with optimised ones.
# allocator_may_return_null: a huge tensor must fail with an error, as it does
# without ASan, not abort the run.  tests/lsan.supp: third-party leaks only.
sanitize:
	ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build/san FUZZ_TEST_SECONDS=0 OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" test

bench: all $(BENCH_BIN)
	@sh tests/bench/run.sh $(BUILD)

# One pass on a fresh machine: each step is its own make, so the build reads
# the packages' flags after deps has installed them (and -j cannot start
# compiling beside the installer).
demo:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/srgeo scripts/demo.lua

# Each area's generator writes its own tests/fixtures/AREA/*.npy (deterministic).
fixtures:
	@for g in tests/fixtures/gen_*.py; do echo "  GEN    $$g"; /usr/bin/python3 $$g || exit 1; done

clean:
	rm -rf build

# Install: PREFIX/bin/srgeo, PREFIX/lib/lua/5.4/srgeo.so (on stock lua5.4's
# package.cpath for /usr/local), the library root PREFIX/share/srgeo (lua/,
# models/, scripts/, notebooks/; the shell and srgeo.so find it from where
# they are, core/lua/srgeo.c), the core for C programs (PREFIX/include/srgeo,
# PREFIX/lib/libsrgeo_core.a, PREFIX/lib/pkgconfig/srgeo.pc), srgeo.1 and the
# Jupyter kernelspec PREFIX/share/jupyter/kernels/srgeo (srgeo kernel install).
# LuaRocks (srgeo-*.rockspec) installs a whole prefix into its rock folder.
# When LUA_CMOD is not on stock lua5.4's package.cpath (any PREFIX but
# /usr/local), install prints the LUA_PATH / LUA_CPATH exports that let
# lua5.4 -l srgeo find it (srgeo --lua-path prints them too).
VERSION := $(shell sed -n 's/^\#define SRGEO_VERSION "\(.*\)"/\1/p' core/lua/srgeo.c)
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
LUA_CMOD ?= $(LIBDIR)/lua/5.4
DATADIR ?= $(PREFIX)/share/srgeo
INCDIR  ?= $(PREFIX)/include/srgeo
MANDIR  ?= $(PREFIX)/share/man
ROOT_DIRS := lua models scripts notebooks
D := $(DESTDIR)

install: all
	install -d $(D)$(BINDIR) $(D)$(LUA_CMOD) $(D)$(DATADIR) $(D)$(INCDIR) $(D)$(LIBDIR)/pkgconfig $(D)$(MANDIR)/man1
	install -m 755 $(BUILD)/srgeo $(D)$(BINDIR)/srgeo
	install -m 755 $(BUILD)/srgeo.so $(D)$(LUA_CMOD)/srgeo.so
	install -m 644 $(BUILD)/libsrgeo_core.a $(D)$(LIBDIR)/libsrgeo_core.a
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCDIR@|$(INCDIR)|; s|@VERSION@|$(VERSION)|' \
	    -e 's|@DATADIR@|$(DATADIR)|; s|@LUA_CMOD@|$(LUA_CMOD)|; s|@CORE_PKGS@|$(filter-out lua5.4,$(PKGS))|' \
	    srgeo.pc.in >$(D)$(LIBDIR)/pkgconfig/srgeo.pc
	install -m 644 srgeo.1 $(D)$(MANDIR)/man1/srgeo.1
	rm -rf $(addprefix $(D)$(DATADIR)/,$(ROOT_DIRS))
	tar -cf - $(ROOT_DIRS) | tar -xf - -C $(D)$(DATADIR) --no-same-owner
	cd core && find . -name '*.h' | tar -cf - -T - | tar -xf - -C $(D)$(INCDIR) --no-same-owner
	$(BUILD)/srgeo kernel install --prefix $(D)$(PREFIX) --exe $(BINDIR)/srgeo >/dev/null
	@env -u LUA_CPATH -u LUA_CPATH_5_4 lua5.4 -e 'print(package.cpath)' 2>/dev/null | tr ';' '\n' \
	  | grep -qxF '$(LUA_CMOD)/?.so' || printf '%s\n' \
	  "srgeo: $(LUA_CMOD) is not on stock lua5.4's package.cpath; for lua5.4 -l srgeo (require \"srgeo\" from Lua):" \
	  "  export LUA_PATH=\"$(DATADIR)/lua/?.lua;;\"" \
	  "  export LUA_CPATH=\"$(LUA_CMOD)/?.so;;\"" \
	  "($(BINDIR)/srgeo --lua-path prints these lines; the srgeo shell itself needs neither)"

uninstall:
	rm -f $(D)$(BINDIR)/srgeo $(D)$(LUA_CMOD)/srgeo.so $(D)$(LIBDIR)/libsrgeo_core.a \
	      $(D)$(LIBDIR)/pkgconfig/srgeo.pc $(D)$(MANDIR)/man1/srgeo.1
	rm -rf $(D)$(DATADIR) $(D)$(INCDIR) $(D)$(PREFIX)/share/jupyter/kernels/srgeo

.PHONY: all layers deps test sanitize bench demo fixtures fuzz fuzz-build models install uninstall clean
-include $(CORE_OBJ:.o=.d) $(LUA_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/core/shell/shell.d $(BUILD)/core/shell/kernel.d
