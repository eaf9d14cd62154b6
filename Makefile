# pprpc — GNU make, out-of-tree build in build/.
#
#   make                 build everything (programs in build/bin, libraries in build/lib)
#   make test            every test that runs without a GPU
#   make SANITIZE=address,undefined test
#   make fuzz            run each libFuzzer target for FUZZ_SECONDS (needs clang)
#   make STATIC=1        link libuv, protobuf-c and OpenBLAS statically (for the GPU machine)
#   make CUDA=0|1        CUDA kernels off / required (default auto: on when nvcc is found)
#   make test-cuda       build and run the CUDA op tests (needs a GPU; harmless without)
#   make bench-kda-cuda  GATED_DELTA_NET serial vs chunked on a GPU (build/bin/bench-kda-cuda)
#
# Optional parts are detected, not assumed; the build says what it found.
#
#   make llama           fetch and build the pinned llama.cpp first (LLAMA_RELEASE=v0.4.0: another)

.DEFAULT_GOAL := all

# A sanitizer build gets its own tree (make does not track flags, so the
# plain objects must never be reused): SANITIZE=address,undefined builds in
# build/address-undefined unless BUILD is given.
comma := ,
ifeq ($(origin BUILD),undefined)
BUILD := $(if $(SANITIZE),build/$(subst $(comma),-,$(SANITIZE)),build)
endif
# LLAMA_RELEASE (scripts/llama-releases; default: its first) selects the
# llama.cpp / ggml release; pprpc built against another than the default
# gets a tree of its own (build/llama-<tag>).
LLAMA_RELEASE_DEFAULT := $(shell awk '!/^\#/ && NF { print $$1; exit }' scripts/llama-releases)
LLAMA_RELEASE ?= $(LLAMA_RELEASE_DEFAULT)
ifeq ($(shell awk -v t='$(LLAMA_RELEASE)' '!/^\#/ && $$1 == t' scripts/llama-releases),)
$(error LLAMA_RELEASE=$(LLAMA_RELEASE) is not in scripts/llama-releases)
endif
export LLAMA_RELEASE
ifneq ($(LLAMA_RELEASE),$(LLAMA_RELEASE_DEFAULT))
ifeq ($(origin BUILD),file)
BUILD := $(BUILD)/llama-$(LLAMA_RELEASE)
endif
endif
CC       ?= cc
PROTOC_C ?= protoc-c
PKG_CONFIG ?= pkg-config
SANITIZE ?=
STATIC   ?= 0
FUZZ_SECONDS ?= 60

O := $(BUILD)/obj
B := $(BUILD)/bin
L := $(BUILD)/lib
T := $(BUILD)/tests
G := $(BUILD)/gen

WARN    := -Wall -Wextra -Wstrict-prototypes -Wshadow -Wpointer-arith -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -MMD -MP -fPIC -fvisibility=hidden -pthread
CPPFLAGS += -I. -Iinclude -I$(G) -D_GNU_SOURCE
# The public client header is seen by the library and its users only (tools,
# benchmarks, tests); daemon, transport, kernels and proto share
# include/pprpc/ and never the client library (doc/architecture.md: Layout).
CLIENT_INC := -Ilibclient/include
LDFLAGS += -pthread

ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

UV_CFLAGS   := $(shell $(PKG_CONFIG) --cflags libuv)
PBC_CFLAGS  := $(shell $(PKG_CONFIG) --cflags libprotobuf-c)
BLAS_CFLAGS := $(shell $(PKG_CONFIG) --cflags openblas 2>/dev/null)
CRYPTO_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcrypto)
CPPFLAGS += $(UV_CFLAGS) $(PBC_CFLAGS) $(BLAS_CFLAGS) $(CRYPTO_CFLAGS)

ifeq ($(STATIC),1)
UV_LIBS   := -l:libuv_a.a -ldl -lrt
PBC_LIBS  := -l:libprotobuf-c.a
# OpenBLAS's LAPACK part is Fortran: its runtime goes in statically too, so
# the binaries need nothing beyond glibc's libraries on the target.
BLAS_LIBS := $(shell $(PKG_CONFIG) --variable=libdir openblas 2>/dev/null)/libopenblas.a \
	-l:libgfortran.a -l:libquadmath.a -lm
CRYPTO_LIBS := -l:libcrypto.a -ldl
else
UV_LIBS   := $(shell $(PKG_CONFIG) --libs libuv)
PBC_LIBS  := $(shell $(PKG_CONFIG) --libs libprotobuf-c)
BLAS_LIBS := $(shell $(PKG_CONFIG) --libs openblas 2>/dev/null || echo -lopenblas)
CRYPTO_LIBS := $(shell $(PKG_CONFIG) --libs libcrypto)
endif
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka)

# ---- CUDA (optional) -----------------------------------------------------
# CUDA=auto enables the kernels when $(NVCC) is found; CUDA=1 requires it;
# CUDA=0 builds without.  cudart is linked statically and cuBLAS is
# dlopen'ed, so pprpcd still starts on a host with no GPU and no CUDA
# libraries.  The CUDA objects go into pprpcd only, never into libpprpc.
CUDA      ?= auto
NVCC      ?= nvcc
NVCC_PATH := $(if $(filter 0,$(CUDA)),,$(shell command -v $(NVCC) 2>/dev/null))
ifneq ($(NVCC_PATH),)
CUDA_ON := 1
else ifeq ($(CUDA),1)
$(error CUDA=1 but $(NVCC) was not found)
else
CUDA_ON := 0
endif

ifeq ($(CUDA_ON),1)
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(realpath $(NVCC_PATH))))
CUDA_RELEASE := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
CUDA_MAJOR := $(word 1,$(CUDA_RELEASE))
CUDA_MINOR := $(word 2,$(CUDA_RELEASE))
# sm_90: H100/H200; sm_121: GB10 (CUDA 12.9+); sm_70: V100 (CUDA 12 only).
CUDA_ARCHS := 90 121
ifeq ($(CUDA_MAJOR),12)
CUDA_ARCHS := 70 90 $(if $(filter 9 10 11 12 13 14 15,$(CUDA_MINOR)),121)
endif
NVCCFLAGS ?= -O3
NVCCFLAGS += -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Wno-unused-parameter \
	$(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
CUDA_SRCS := $(wildcard kernels/cuda/*.cu)
CUDA_OBJS := $(patsubst %.cu,$(O)/%.o,$(CUDA_SRCS))
# libstdc++: nvcc's launch stubs use thread-safe local statics.
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
CPPFLAGS += -DPPRPC_HAVE_CUDA=1
else
CUDA_OBJS :=
CUDA_LIBS :=
endif

# RDMA (rdmacm + ibverbs) is optional: without it the daemon is TCP-only
# and says so (transport/rdma_none.c).  RDMA=0 forces it off.
RDMA ?= $(shell $(PKG_CONFIG) --exists libibverbs librdmacm && echo 1 || echo 0)
ifeq ($(RDMA),1)
RDMA_LIBS := $(shell $(PKG_CONFIG) --libs libibverbs librdmacm)
RDMA_SKIP := transport/rdma_none.c
RDMA_INFO := libibverbs $(shell $(PKG_CONFIG) --modversion libibverbs), librdmacm $(shell $(PKG_CONFIG) --modversion librdmacm)
else
RDMA_LIBS :=
RDMA_SKIP := transport/rdma_verbs.c
RDMA_INFO := no (libibverbs-dev/librdmacm-dev not found): TCP only
endif

# ---- the pinned llama.cpp / ggml (doc/ggml.md) ------------------------------
# `make llama` fetches (scripts/fetch-llama.sh) and builds (scripts/build-llama.sh)
# a release of scripts/llama-releases into the git-ignored ext/; nothing is
# rebuilt when nothing changed.  LLAMA_RELEASE selects the release (default:
# the file's first, v0.5.0); each has its own source and build tree, and
# pprpc built against one has its own build tree too (build/ for the
# default, build/llama-<tag> for another).  GGML=auto links the ggml engine
# into pprpcd when those libraries are there; GGML=1 requires them; GGML=0
# builds without.
LLAMA_DIR   ?= ext/llama.cpp-$(LLAMA_RELEASE)
LLAMA_BUILD ?= $(LLAMA_DIR)/build-cpu
# An AddressSanitizer build of pprpc links ggml built with ASan and UBSan
# too (`make llama-asan`: ggml alone, into build-asan), so the sanitizers
# see ggml's kernels run on what the engine let through.
LLAMA_ASAN_BUILD ?= $(LLAMA_DIR)/build-asan
ifneq ($(findstring address,$(SANITIZE)),)
GGML_LIB_DIR ?= $(LLAMA_ASAN_BUILD)/bin
else
GGML_LIB_DIR ?= $(LLAMA_BUILD)/bin
endif
GGML ?= auto
ifneq ($(findstring address,$(SANITIZE)),)
ifneq ($(GGML),0)
ifeq ($(wildcard $(GGML_LIB_DIR)/libggml.so),)
ifneq ($(wildcard $(LLAMA_BUILD)/bin/libggml.so),)
$(error SANITIZE=$(SANITIZE) links the ASan build of ggml, $(GGML_LIB_DIR) has none: run `make llama-asan` (or GGML=0))
endif
endif
endif
endif
ifeq ($(GGML),0)
GGML_ON := 0
else ifneq ($(wildcard $(GGML_LIB_DIR)/libggml.so),)
GGML_ON := 1
else ifeq ($(GGML),1)
$(error GGML=1 but $(GGML_LIB_DIR)/libggml.so was not found: run `make llama`)
else
GGML_ON := 0
endif
ifeq ($(GGML_ON),1)
# ggml's version and commit, which the plugin and the engine compare with the
# libraries they meet at run time (ggml_version(), ggml_commit()).
GGML_VERSION := $(shell sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' $(LLAMA_DIR)/ggml/CMakeLists.txt | paste -sd.)
GGML_COMMIT := $(shell awk -v t='$(LLAMA_RELEASE)' '!/^\#/ && $$1 == t { print substr($$3, 1, 7) }' scripts/llama-releases)
GGML_RELEASE_NUM := $(shell echo $(LLAMA_RELEASE) | awk -F'[v.]' '{ print $$2 * 10000 + $$3 * 100 + $$4 }')
# -isystem: ggml's internal headers (ggml-impl.h) define static helpers
# that every includer would otherwise be warned about.
GGML_INC := -isystem $(LLAMA_DIR)/ggml/include -isystem $(LLAMA_DIR)/ggml/src \
	-DPPRPC_GGML_VERSION='"$(GGML_VERSION)"' -DPPRPC_GGML_COMMIT='"$(GGML_COMMIT)"' \
	-DPPRPC_LLAMA_RELEASE='"$(LLAMA_RELEASE)"' -DPPRPC_LLAMA_RELEASE_NUM=$(GGML_RELEASE_NUM)
# The CPU backend is a module of ggml (GGML_BACKEND_DL, one per instruction
# set); ggml's loader finds it beside libggml-base (daemon/backend/ggml/ggml_load.c).
GGML_LINK := -L$(GGML_LIB_DIR) -lggml -lggml-base -ldl
GGML_LIBS := $(GGML_LINK) -Wl,-rpath,$(abspath $(GGML_LIB_DIR))
GGML_INFO := $(GGML_LIB_DIR) (llama.cpp $(LLAMA_RELEASE), ggml $(GGML_VERSION))
CPPFLAGS += -DPPRPC_HAVE_GGML=1
# The engine (daemon/backend/ggml/, rules/ included) replaces its stand-in.
GGML_SKIP := daemon/backend/ggml_none.c
else
GGML_INC :=
GGML_LIBS :=
GGML_SKIP := $(wildcard daemon/backend/ggml/*.c daemon/backend/ggml/*/*.c) tests/fuzz/fuzz_ggml_graph.c \
	tests/integration/test_ggml.c tests/integration/test_ggml_api.c tests/integration/ggml_wire.c tests/unit/test_ggml_engine.c tests/unit/test_pg_replay.c \
	tests/unit/test_ggml_gdn_engine.c tests/integration/test_ggml_gdn.c bench/ggml_gdn.c
GGML_INFO := no ($(if $(filter 0,$(GGML)),GGML=0,run 'make llama')): no ggml devices
endif

.PHONY: llama llama-asan
llama:
	scripts/build-llama.sh $(LLAMA_DIR) $(LLAMA_BUILD)
llama-asan:
	LLAMA_SANITIZE=1 scripts/build-llama.sh $(LLAMA_DIR) $(LLAMA_ASAN_BUILD)

# ---- sources ------------------------------------------------------------
PROTO      := proto/pprpc.proto
PROTO_C    := $(G)/proto/pprpc.pb-c.c
PROTO_H    := $(G)/proto/pprpc.pb-c.h

PROTO_SRCS     := $(filter-out proto/fuzz_%.c,$(wildcard proto/*.c))
TRANSPORT_SRCS := $(filter-out $(RDMA_SKIP),$(wildcard transport/*.c))
KERNEL_SRCS    := $(wildcard kernels/*.c)
KERNEL_CPU_SRCS := $(wildcard kernels/cpu/*.c)
CLIENT_SRCS    := $(wildcard libclient/*.c)
UTIL_SRCS      := $(wildcard util/*.c)
# The daemon in sub-folders by part (doc/architecture.md: Layout); backends in daemon/backend/<kind>/.
DAEMON_SRCS    := $(filter-out daemon/main.c $(GGML_SKIP),$(wildcard daemon/*.c daemon/*/*.c daemon/*/*/*.c \
	daemon/backend/ggml/rules/*.c))

obj = $(patsubst %.c,$(O)/%.o,$(1))

PROTO_OBJS     := $(call obj,$(PROTO_SRCS)) $(O)/gen/pprpc.pb-c.o
TRANSPORT_OBJS := $(call obj,$(TRANSPORT_SRCS))
KERNEL_OBJS    := $(call obj,$(KERNEL_SRCS))
KERNEL_CPU_OBJS := $(call obj,$(KERNEL_CPU_SRCS))
CLIENT_OBJS    := $(call obj,$(CLIENT_SRCS))
DAEMON_OBJS    := $(call obj,$(DAEMON_SRCS))
UTIL_OBJS      := $(call obj,$(UTIL_SRCS))

# The client library holds the client, the wire code and the shape rules
# (not the CPU kernels: no BLAS).  libuv stays out: the client does its own I/O.
# LIB_SOVERSION follows the ABI, not the release (util/version.h): bump it
# whenever a public type or function changes incompatibly.  2: typed handles,
# statistics as named values, the pipeline options without their test hook.
LIB_SOVERSION := 2
LIB_FILE := libpprpc.so.$(LIB_SOVERSION).0.0
PUBLIC_HEADERS := $(wildcard libclient/include/*.h)
LIBPPRPC_OBJS := $(CLIENT_OBJS) $(PROTO_OBJS) $(UTIL_OBJS) $(KERNEL_OBJS)

TOOL_COMMON_OBJS := $(call obj,$(wildcard tools/common/*.c))
TOOLS := $(patsubst tools/%.c,$(B)/%,$(wildcard tools/*.c))
BENCHES := $(patsubst bench/%.c,$(B)/bench-%,$(filter-out $(GGML_SKIP),$(wildcard bench/*.c)))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(T)/%,$(filter-out $(GGML_SKIP),$(wildcard tests/unit/test_*.c)))
INTEG_TESTS := $(patsubst tests/integration/%.c,$(T)/%,$(filter-out $(GGML_SKIP),$(wildcard tests/integration/test_*.c)))
FUZZ_SRCS := $(filter-out $(GGML_SKIP),$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(T)/replay_%,$(FUZZ_SRCS))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

.PHONY: rule-sources docs
.PHONY: all test unit integration fuzz-replay fuzz clean info run run-pprpc-bench test-install soak soak-asan test-hostile test-rdma run-fence
# Keep intermediate objects (test and tool objects) between runs.
.SECONDARY:
all: info $(B)/pprpcd $(L)/libpprpc.so $(L)/libpprpc.a $(TOOLS) $(BENCHES)

info:
	@echo "pprpc build: libuv $$($(PKG_CONFIG) --modversion libuv), protobuf-c $$($(PKG_CONFIG) --modversion libprotobuf-c), libcrypto $$($(PKG_CONFIG) --modversion libcrypto), rdma: $(RDMA_INFO), openblas: $(if $(BLAS_LIBS),yes,no), static deps: $(STATIC)$(if $(SANITIZE), sanitize=$(SANITIZE))"
	@echo "pprpc build: ggml engine: $(GGML_INFO)"
	@echo "pprpc build: CUDA $(if $(filter 1,$(CUDA_ON)),found: $(NVCC_PATH) (release $(CUDA_MAJOR).$(CUDA_MINOR), archs $(CUDA_ARCHS)),not found or disabled (CUDA=$(CUDA)): CPU only)"

# ---- generated protobuf-c code -------------------------------------------
$(PROTO_C) $(PROTO_H): $(PROTO)
	@mkdir -p $(G)/proto
	$(PROTOC_C) --c_out=$(G) $(PROTO)

$(O)/gen/pprpc.pb-c.o: $(PROTO_C)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-shadow -c $< -o $@

# The ggml engine and the tests that build ggml graphs see ggml's headers.
$(O)/daemon/backend/ggml/%.o: CPPFLAGS += $(GGML_INC)
$(O)/tests/integration/test_ggml.o $(O)/tests/integration/test_ggml_api.o $(O)/tests/integration/ggml_wire.o $(O)/tests/unit/test_ggml_engine.o \
	$(O)/tests/unit/test_ggml_gdn_engine.o $(O)/tests/integration/test_ggml_gdn.o $(O)/bench/ggml_gdn.o: \
	CPPFLAGS += $(GGML_INC)

# Every object may include the generated header.
$(O)/%.o: %.c | $(PROTO_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(O)/libclient/%.o $(O)/tools/%.o $(O)/bench/%.o $(O)/tests/%.o: CPPFLAGS += $(CLIENT_INC)

# ---- libraries and programs -----------------------------------------------
$(L)/libpprpc.a: $(LIBPPRPC_OBJS)
	@mkdir -p $(L)
	rm -f $@ && ar rcs $@ $^

$(L)/libpprpc.so: $(LIBPPRPC_OBJS)
	@mkdir -p $(L)
	$(CC) -shared -Wl,-soname,libpprpc.so.$(LIB_SOVERSION) $(LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libprotobuf-c libcrypto) -lm
# (the shared library always links protobuf-c and libcrypto dynamically: a
# static archive of non-PIC code cannot go into a shared object)

PPRPCD_OBJS := $(O)/daemon/main.o $(DAEMON_OBJS) $(PROTO_OBJS) $(UTIL_OBJS) $(TRANSPORT_OBJS) $(KERNEL_OBJS) $(KERNEL_CPU_OBJS) $(CUDA_OBJS)
PPRPCD_LIBS := $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(CUDA_LIBS) $(RDMA_LIBS)
$(B)/pprpcd: $(PPRPCD_OBJS)
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $^ $(PPRPCD_LIBS) $(GGML_LIBS) -lm

# The installed pprpcd finds ggml in PREFIX/lib/pprpc, relative to itself
# ($$ORIGIN), never in the build tree: a rank installs on its own.
$(BUILD)/install/pprpcd: $(PPRPCD_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PPRPCD_LIBS) $(GGML_LINK) $(if $(GGML_LINK),-Wl$(comma)-rpath$(comma)'$$ORIGIN/../lib/pprpc') -lm

$(B)/%: $(O)/tools/%.o $(TOOL_COMMON_OBJS) $(L)/libpprpc.a
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $< $(TOOL_COMMON_OBJS) $(L)/libpprpc.a $(PBC_LIBS) $(CRYPTO_LIBS) -lm

# pprpc-bench is split by job (tools/bench/bench.h).
BENCH_TOOL_OBJS := $(call obj,$(wildcard tools/bench/*.c))
$(B)/pprpc-bench: $(O)/tools/pprpc-bench.o $(BENCH_TOOL_OBJS) $(TOOL_COMMON_OBJS) $(L)/libpprpc.a
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $< $(BENCH_TOOL_OBJS) $(TOOL_COMMON_OBJS) $(L)/libpprpc.a $(PBC_LIBS) $(CRYPTO_LIBS) -lm

$(B)/bench-%: $(O)/bench/%.o $(TOOL_COMMON_OBJS) $(L)/libpprpc.a
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $< $(TOOL_COMMON_OBJS) $(L)/libpprpc.a $(PBC_LIBS) $(CRYPTO_LIBS) -lm

# Kernel benchmarks call the CPU kernels directly (no daemon).
# (util/ hashes model files with libcrypto: util/filesum.c)
$(B)/bench-kda_cpu: $(O)/bench/kda_cpu.o $(KERNEL_OBJS) $(KERNEL_CPU_OBJS) $(UTIL_OBJS)
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) $(CRYPTO_LIBS) -lm

# ---- the ggml backend plugin (ggml-pprpc/, doc/ggml.md) -------------------
# libggml-pprpc.so: loaded by unmodified llama.cpp tools with
# GGML_BACKEND_PATH.  libpprpc's objects go in (PIC already), so the plugin
# needs only protobuf-c, libcrypto and the ggml-base the tool already has
# (no rpath: the tool's own copy is the one to use); the version script
# exports ggml_backend_init alone.
PLUGIN_SRCS := $(wildcard ggml-pprpc/*.c)
# throw.cpp: a rank fault leaves a void ggml call as a C++ exception
# (ggml-pprpc/throw.cpp says why); the C files unwind it (-fexceptions).
PLUGIN_CXX_SRCS := $(wildcard ggml-pprpc/*.cpp)
PLUGIN_OBJS := $(call obj,$(PLUGIN_SRCS)) $(patsubst %.cpp,$(O)/%.o,$(PLUGIN_CXX_SRCS))
CXX ?= c++
# The plugin is a user of libpprpc like any other: it sees the public
# headers (libclient/include/, include/pprpc/types.h), ggml's, its own (by
# file name, beside it) and util/ggml_release.h (header-only, shared with
# the daemon's engine), copied into a folder of its own so that no other
# internal header (libclient/, proto/) can be reached: no -I. here.
# tests/install/run.sh builds it once more against the installed headers.
PLUGIN_INC := $(O)/plugin-inc
PLUGIN_CPPFLAGS = -D_GNU_SOURCE $(CLIENT_INC) -Iinclude -I$(PLUGIN_INC) $(GGML_INC)
$(PLUGIN_INC)/util/ggml_release.h: util/ggml_release.h
	@mkdir -p $(@D)
	cp $< $@
ifeq ($(GGML_ON),1)
PLUGIN := $(L)/libggml-pprpc.so
$(PLUGIN_OBJS): CPPFLAGS = $(PLUGIN_CPPFLAGS)
$(PLUGIN_OBJS): CFLAGS += -fexceptions
$(PLUGIN_OBJS): | $(PLUGIN_INC)/util/ggml_release.h
$(O)/ggml-pprpc/%.o: ggml-pprpc/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(PLUGIN_CPPFLAGS) -std=c++17 -O2 -g -Wall -Wextra -fPIC -fvisibility=hidden -MMD -MP \
		$(if $(SANITIZE),-fsanitize=$(SANITIZE)) -c $< -o $@
$(PLUGIN): $(PLUGIN_OBJS) $(LIBPPRPC_OBJS) ggml-pprpc/exports.map
	@mkdir -p $(L)
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=ggml-pprpc/exports.map -Wl,-z,defs -o $@ \
		$(PLUGIN_OBJS) $(LIBPPRPC_OBJS) -L$(GGML_LIB_DIR) -lggml-base $(shell $(PKG_CONFIG) --libs libprotobuf-c libcrypto) -lstdc++ -lm
all: $(PLUGIN)
# The plugin's sources against an installed libpprpc's headers only
# (tests/install/run.sh: PLUGIN_CHECK_INC=PREFIX/include, PLUGIN_CHECK_SRCS
# a copy of ggml-pprpc/*.c, so their own headers are found beside them).
.PHONY: plugin-header-check
plugin-header-check: $(PLUGIN_INC)/util/ggml_release.h
	$(CC) -std=gnu11 $(WARN) -Werror -fsyntax-only -D_GNU_SOURCE -I$(PLUGIN_CHECK_INC) -I$(PLUGIN_INC) \
		$(GGML_INC) $(PLUGIN_CHECK_SRCS)
else
PLUGIN :=
endif

# llama.cpp's own suites through the plugin (tests/llama/): `make test`
# runs the subset, `make test-llama-full` every case and architecture.
# Without the pinned llama.cpp build the drivers print why they skip.
.PHONY: test-llama test-llama-full
ifeq ($(GGML_ON),1)
LLAMA_TEST_DEPS := $(PLUGIN) $(B)/pprpcd $(B)/pprpcctl $(T)/gguf-add-vocab $(T)/amx_emul.so $(T)/ggml_version_shim.so
$(O)/tests/llama/%.o: CPPFLAGS += $(GGML_INC)
# LD_PRELOAD shims for llama.cpp's tools (tests/llama/amx.sh, release.sh):
# never sanitized, they load into the tools as they are.
$(T)/amx_emul.so: tests/llama/amx_emul.c
	@mkdir -p $(T)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -fPIC -shared $(GGML_INC) -o $@ $< -ldl
$(T)/ggml_version_shim.so: tests/llama/ggml_version_shim.c
	@mkdir -p $(T)
	$(CC) -std=gnu11 $(WARN) -O2 -fPIC -shared -o $@ $<
$(T)/gguf-add-vocab: $(O)/tests/llama/gguf-add-vocab.o
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $< -L$(GGML_LIB_DIR) -Wl,-rpath,$(abspath $(GGML_LIB_DIR)) -lggml-base
else
LLAMA_TEST_DEPS :=
endif

# llama-logits (bench/llama-vs-rpc/llama-logits.cpp): teacher-forced logits
# for the benchmark's comparison against local.  C++ against llama.cpp's
# libllama-common (built with llama-completion), so it takes llama-completion's
# arguments as they are.  RUNPATH, not RPATH (--enable-new-dtags, also the
# linker's default here): LD_LIBRARY_PATH comes first, and points it at
# another build of the same release (the GPU machine's CUDA build), whose
# libggml's folder holds the backend modules the tool loads.
ifeq ($(GGML_ON),1)
ifneq ($(wildcard $(GGML_LIB_DIR)/libllama-common.so),)
LLAMA_LOGITS := $(B)/llama-logits
$(O)/bench/llama-vs-rpc/llama-logits.o: bench/llama-vs-rpc/llama-logits.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Wno-unused-parameter -MMD -MP -I. -DGGML_SHARED -DLLAMA_SHARED \
		$(GGML_INC) -isystem $(LLAMA_DIR)/include -isystem $(LLAMA_DIR)/common \
		$(if $(SANITIZE),-fsanitize=$(SANITIZE)) -c $< -o $@
$(LLAMA_LOGITS): $(O)/bench/llama-vs-rpc/llama-logits.o
	@mkdir -p $(B)
	$(CXX) $(LDFLAGS) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) -o $@ $< -L$(GGML_LIB_DIR) \
		-lllama-common -lllama -lggml -lggml-base -ldl \
		-Wl,--enable-new-dtags -Wl,-rpath,$(abspath $(GGML_LIB_DIR))
all: $(LLAMA_LOGITS)
LLAMA_TEST_DEPS += $(LLAMA_LOGITS)
endif
endif
ifneq ($(SANITIZE),)
# A sanitized plugin cannot load into llama.cpp's unsanitized tools (the
# sanitizer runtime must come first in the process), but their graphs can
# run on sanitized ranks: llama.cpp's tools with the plain plugin, every
# rank this build's pprpcd over ggml's sanitized build (a soak of
# llama.cpp's own graphs under ASan+UBSan: generation over two ranks, and
# test-llama-archs' architectures).
LLAMA_SAN_SUITES := generate archs
test-llama test-llama-full:
ifeq ($(GGML_ON),1)
	@$(MAKE) --no-print-directory SANITIZE= BUILD=build build/lib/libggml-pprpc.so build/bin/pprpcctl \
		build/tests/gguf-add-vocab >/dev/null
	@rc=0; for t in $(LLAMA_SAN_SUITES); do \
		echo "== tests/llama/$$t.sh: llama.cpp's graphs on ranks under $(SANITIZE) ($(B)/pprpcd, $(GGML_LIB_DIR))"; \
		GGML_ON=1 BUILD=build PPRPCD=$(B)/pprpcd LLAMA_BIN=$(LLAMA_BUILD)/bin tests/llama/$$t.sh || rc=1; \
	done; exit $$rc
else
	@echo "test-llama: skipped: pprpc built without the pinned llama.cpp (GGML_ON=0)"
endif
else
test-llama: $(LLAMA_TEST_DEPS)
	@GGML_ON=$(GGML_ON) BUILD=$(BUILD) LLAMA_BIN=$(GGML_LIB_DIR) tests/llama/run.sh
test-llama-full: $(LLAMA_TEST_DEPS)
	@GGML_ON=$(GGML_ON) BUILD=$(BUILD) LLAMA_BIN=$(GGML_LIB_DIR) tests/llama/run.sh --full
endif

# ---- tests ---------------------------------------------------------------
# Unit tests link everything except daemon/main.o, so they can test daemon
# internals as well as the library.
TEST_LINK := $(DAEMON_OBJS) $(CLIENT_OBJS) $(PROTO_OBJS) $(UTIL_OBJS) $(TRANSPORT_OBJS) $(KERNEL_OBJS) $(KERNEL_CPU_OBJS) $(CUDA_OBJS)
$(T)/test_%: $(O)/tests/unit/test_%.o $(TEST_LINK)
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(CUDA_LIBS) $(RDMA_LIBS) $(GGML_LIBS) -lm

# The engine's own tests build their graphs with ggml in process.
$(T)/test_ggml_engine $(T)/test_ggml_gdn_engine: $(T)/%: $(O)/tests/unit/%.o $(O)/tests/integration/ggml_wire.o $(TEST_LINK)
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(CUDA_LIBS) $(RDMA_LIBS) $(GGML_LIBS) -lm

# The ggml engine's GATED_DELTA_NET, ggml's kernel against pprpc's, in
# process on a ggml device (ggml:CUDA0 with a CUDA build of llama.cpp's
# libraries on LD_LIBRARY_PATH): the engine and the kernels linked in.
$(B)/bench-ggml_gdn: $(O)/bench/ggml_gdn.o $(O)/tests/integration/ggml_wire.o $(TEST_LINK)
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $^ $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(CUDA_LIBS) $(RDMA_LIBS) $(GGML_LIBS) -lm

# test_ggml computes its references with ggml itself (ggml_wire.c turns a
# local ggml graph into the wire form).
$(T)/test_ggml $(T)/test_ggml_gdn: $(T)/%: $(O)/tests/integration/%.o $(O)/tests/integration/ggml_wire.o \
		$(O)/daemon/backend/ggml/ggml_load.o $(O)/tests/integration/harness.o $(TOOL_COMMON_OBJS) $(L)/libpprpc.a
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(GGML_LIBS) -lm

# The plugin's cache test builds ggml-pprpc/cache.c in (no ggml needed).
$(T)/test_pg_cache: $(O)/tests/unit/test_pg_cache.o
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS)

# The plugin's graph recognition test builds ggml-pprpc/replay.c in.
$(O)/tests/unit/test_pg_replay.o: CPPFLAGS += $(GGML_INC) $(CLIENT_INC)
$(T)/test_pg_replay: $(O)/tests/unit/test_pg_replay.o
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) -L$(GGML_LIB_DIR) -Wl,-rpath,$(abspath $(GGML_LIB_DIR)) -lggml-base

# Integration tests may compute local references with the CPU kernels.
$(T)/test_%: $(O)/tests/integration/test_%.o $(O)/tests/integration/harness.o $(TOOL_COMMON_OBJS) $(KERNEL_CPU_OBJS) $(L)/libpprpc.a
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) -lm

# Fuzz targets: the same source is built twice — with a replay main (any
# compiler; runs over the saved corpus in `make test`) and with libFuzzer.
# A target's extra sources: FUZZ_EXTRA_<target>.
FUZZ_EXTRA_fuzz_ggml_graph := tests/integration/ggml_wire.c
.SECONDEXPANSION:
$(T)/replay_%: tests/fuzz/%.c tests/fuzz/replay_main.c $$(FUZZ_EXTRA_$$*) $(TEST_LINK) | $(PROTO_H)
	@mkdir -p $(T)
	$(CC) $(CPPFLAGS) $(GGML_INC) $(CFLAGS) -o $@ tests/fuzz/$*.c tests/fuzz/replay_main.c $(FUZZ_EXTRA_$*) $(TEST_LINK) $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(CUDA_LIBS) $(RDMA_LIBS) $(GGML_LIBS) -lm

FUZZ_CC ?= clang
FUZZ_LINK_SRCS := $(DAEMON_SRCS) $(PROTO_SRCS) $(UTIL_SRCS) $(TRANSPORT_SRCS) $(KERNEL_SRCS) $(KERNEL_CPU_SRCS) $(PROTO_C)
$(BUILD)/fuzz/%: tests/fuzz/%.c $$(FUZZ_EXTRA_$$*) $(FUZZ_LINK_SRCS)
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) $(CPPFLAGS) $(GGML_INC) -UPPRPC_HAVE_CUDA -std=gnu11 -g -O1 -pthread -fsanitize=fuzzer,address,undefined -o $@ $< \
		$(FUZZ_EXTRA_$*) $(FUZZ_LINK_SRCS) $(UV_LIBS) $(PBC_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) $(RDMA_LIBS) $(GGML_LIBS) -lm

# The ggml per-op validation rules (daemon/backend/ggml/rules, doc/ggml.md) need
# the pinned ggml headers; their test also links ggml-cpu.  Without ggml the
# test is skipped (and said so by `make unit`).  GGML_RULES_OBJS is for whatever
# links the rules (the ggml engine).
GGML_RULES_SRCS := $(wildcard daemon/backend/ggml/rules/*.c)
ifeq ($(GGML_ON),1)
GGML_RULES_OBJS := $(call obj,$(GGML_RULES_SRCS))
$(GGML_RULES_OBJS) $(O)/tests/unit/test_ggml_rules.o: CPPFLAGS += $(GGML_INC)
$(T)/test_ggml_rules: $(O)/tests/unit/test_ggml_rules.o $(GGML_RULES_OBJS) $(O)/daemon/backend/ggml/ggml_load.o
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(GGML_LIBS) -lm
# The rules over every graph llama.cpp's test-llama-archs builds (an LD_PRELOAD
# shim; minutes, so not in `make unit`).  ARCH=name runs one architecture.
$(T)/ggml_rules_archs.so: tests/unit/test_ggml_rules_archs.c $(GGML_RULES_SRCS)
	@mkdir -p $(T)
	$(CC) $(CPPFLAGS) $(GGML_INC) $(CFLAGS) -shared -o $@ $(filter %.c,$^) $(GGML_LIBS) -ldl -lm
test-ggml-rules-archs: $(T)/ggml_rules_archs.so
	LD_PRELOAD=$(abspath $<) $(LLAMA_BUILD)/bin/test-llama-archs $(if $(ARCH),-a $(ARCH))
else
GGML_RULES_OBJS :=
UNIT_TESTS := $(filter-out $(T)/test_ggml_rules%,$(UNIT_TESTS))
test-ggml-rules-archs:
	@echo "test-ggml-rules-archs: no ggml ($(GGML_INFO))"; exit 1
endif
UNIT_TESTS := $(filter-out $(T)/test_ggml_rules_archs,$(UNIT_TESTS))
.PHONY: test-ggml-rules-archs

unit: $(UNIT_TESTS) $(B)/pprpcd
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done
	@echo "== every include is one doc/layers.txt allows" && tests/layers.sh
	@echo "== the settings in README.md, doc/man/pprpcd.8, conf/pprpcd.conf are options.c's table" && \
		scripts/gen-docs.sh --check $(B)/pprpcd
	@$(if $(filter 1,$(GGML_ON)),:,echo "== test_ggml_rules: skipped, ggml engine: $(GGML_INFO)")
	@$(if $(filter 1,$(GGML_ON)),echo "== every ggml rule cites its kernels" && tests/ggml/rule-sources.sh $(LLAMA_DIR)/ggml/src,:)

# The settings table of README.md, the OPTIONS of doc/man/pprpcd.8 and
# conf/pprpcd.conf, written from daemon/server/options.c's table (make unit
# checks them).
docs: $(B)/pprpcd
	@scripts/gen-docs.sh $(B)/pprpcd

# The table of the ggml rules' source lines (issue 27's closing note).
rule-sources:
	@tests/ggml/rule-sources.sh --list $(LLAMA_DIR)/ggml/src

# test_hostile's stand-in for a DNS that does not answer (LD_PRELOAD into
# the daemon): never sanitized, it must load into any build of pprpcd.
$(T)/slow_resolver.so: tests/integration/slow_resolver.c
	@mkdir -p $(T)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -fPIC -shared -o $@ $< -ldl

integration: $(INTEG_TESTS) $(T)/slow_resolver.so $(B)/pprpcd $(TOOLS)
	@set -e; for t in $(INTEG_TESTS); do echo "== $$t"; PPRPCD=$(B)/pprpcd BINDIR=$(B) $$t; done
ifeq ($(GGML_ON),1)
	@echo "== $(T)/test_ggml, ggml:CPU staged as a GPU device is (PPRPC_GGML_STAGED=1)"
	@PPRPC_GGML_STAGED=1 PPRPCD=$(B)/pprpcd BINDIR=$(B) $(T)/test_ggml
	@echo "== $(T)/test_ggml_gdn, staged (PPRPC_GGML_STAGED=1)"
	@PPRPC_GGML_STAGED=1 PPRPCD=$(B)/pprpcd BINDIR=$(B) $(T)/test_ggml_gdn
endif

fuzz-replay: $(FUZZ_REPLAY)
	@set -e; for t in $(FUZZ_REPLAY); do n=$${t##*/replay_}; echo "== $$t tests/fuzz/corpus/$$n"; $$t tests/fuzz/corpus/$$n; done

test-install: all
	@SANITIZE="$(SANITIZE)" tests/install/run.sh

# The long soak (make test runs 150 iterations of the same test).
soak: all $(T)/test_soak
	SOAK_ITERS=$${SOAK_ITERS:-10000} PPRPCD=$(B)/pprpcd $(T)/test_soak

# The short soak again with daemon, library and test under AddressSanitizer
# and UBSan (LeakSanitizer checks every daemon at exit): part of make test.
ASAN_BUILD := $(if $(findstring address,$(SANITIZE)),$(BUILD),$(BUILD)/asan)
# (with the ggml engine, ggml's own ASan build first: built once, ~5 min)
ASAN_GGML := $(if $(filter 1,$(GGML_ON)),$(MAKE) --no-print-directory llama-asan >/dev/null &&,)
soak-asan:
	@$(ASAN_GGML) $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) SANITIZE=address,undefined CUDA=0 \
		$(ASAN_BUILD)/bin/pprpcd $(ASAN_BUILD)/tests/test_soak $(ASAN_BUILD)/tests/test_faults >/dev/null
	@echo "== soak and faults under ASan+UBSan"
	@SOAK_ITERS=$${SOAK_ITERS:-100} PPRPCD=$(ASAN_BUILD)/bin/pprpcd $(ASAN_BUILD)/tests/test_soak
	@PPRPCD=$(ASAN_BUILD)/bin/pprpcd $(ASAN_BUILD)/tests/test_faults

# The hostile-input tests (issue 19: test_hostile, also part of `make
# integration`) again with daemon and test under ASan+UBSan: the refusal
# paths, the floor accounting, the exit deadline.  .ci/run runs it after
# `make test`.
#  With the ggml engine, also the structure-aware sweep of every accepted
# op (test_ggml_rules: each rule's samples with their fields broken, every
# accepted variant computed) and the fuzz corpus with llama.cpp's own
# graphs, both against ggml's ASan build.
test-hostile:
	@$(ASAN_GGML) $(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) SANITIZE=address,undefined CUDA=0 \
		$(ASAN_BUILD)/bin/pprpcd $(ASAN_BUILD)/tests/test_hostile $(ASAN_BUILD)/tests/slow_resolver.so \
		$(if $(filter 1,$(GGML_ON)),$(ASAN_BUILD)/tests/test_ggml_rules $(ASAN_BUILD)/tests/replay_fuzz_ggml_graph) >/dev/null
	@echo "== hostile input under ASan+UBSan"
	@PPRPCD=$(ASAN_BUILD)/bin/pprpcd $(ASAN_BUILD)/tests/test_hostile
ifeq ($(GGML_ON),1)
	@echo "== every accepted ggml op with hostile fields, ggml under ASan+UBSan"
	@$(ASAN_BUILD)/tests/test_ggml_rules
	@echo "== the ggml fuzz corpus (llama.cpp's graphs among it), ggml under ASan+UBSan"
	@FUZZ_GGML_REPORT=1 $(ASAN_BUILD)/tests/replay_fuzz_ggml_graph tests/fuzz/corpus/fuzz_ggml_graph
endif

# llama.cpp's own graphs into the ggml fuzz corpus (tests/fuzz/seed-ggml-graphs.sh).
.PHONY: fuzz-seed-ggml
fuzz-seed-ggml: $(LLAMA_TEST_DEPS)
	@BUILD=$(BUILD) LLAMA_BIN=$(GGML_LIB_DIR) GGML_ON=$(GGML_ON) tests/fuzz/seed-ggml-graphs.sh

test: all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory fuzz-replay
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory soak-asan
	@$(MAKE) --no-print-directory test-install
	@$(MAKE) --no-print-directory test-llama
	@echo "make test: all suites passed"

# Real RDMA: a QEMU guest with Soft-RoCE (tests/vm/run.sh).  Not part of
# `make test`.  RDMA_VM_OPTIONAL=1 turns "cannot boot a VM here" (exit 77)
# into a printed skip instead of a failure (.ci/run uses it).
test-rdma: all $(T)/test_rdma_ring
	@if [ "$(RDMA)" != 1 ]; then echo "test-rdma: pprpc built without RDMA ($(RDMA_INFO))"; exit 1; fi
	@rc=0; tests/vm/run.sh $(BUILD) || rc=$$?; \
	if [ $$rc = 77 ] && [ "$(RDMA_VM_OPTIONAL)" = 1 ]; then echo "test-rdma: skipped (see above)"; exit 0; fi; \
	if [ $$rc != 0 ]; then echo "test-rdma: FAILED"; exit 1; fi; echo "test-rdma: passed"

fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$${f##*/}; mkdir -p tests/fuzz/corpus/$$n; \
		echo "== $$n for $(FUZZ_SECONDS)s"; FUZZ_GGML_REPORT=1 $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 tests/fuzz/corpus/$$n; done

# ---- CUDA objects and tests ------------------------------------------------
# test-cuda is not part of `make test` (it needs a GPU to mean much).  The
# program compares every op's CUDA result with the CPU kernels; without
# a device it says so and exits 0.  It needs only the kernels and BLAS, so a
# STATIC=1 build runs on the GPU machine as is.
.PHONY: test-cuda-build test-cuda bench-cuda bench-kda-cuda
ifeq ($(CUDA_ON),1)
$(O)/kernels/cuda/%.o: kernels/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

$(O)/tests/cuda/%.o: CPPFLAGS += -I$(CUDA_HOME)/include
# Every file of the CUDA backend folder sees the CUDA headers; so does the
# ggml engine's CUDA glue for ggml:CUDA devices (pprpc's GATED_DELTA_NET,
# CUDA IPC at stage boundaries, streams that hold WAITs on the GPU).
$(O)/daemon/backend/cuda/%.o: CPPFLAGS += -I$(CUDA_HOME)/include
$(O)/daemon/backend/ggml/ggml_cuda_%.o: \
	CPPFLAGS += -I$(CUDA_HOME)/include

$(T)/test_cuda_ops: $(O)/tests/cuda/test_cuda_ops.o $(KERNEL_OBJS) $(KERNEL_CPU_OBJS) $(CUDA_OBJS)
	@mkdir -p $(T)
	$(CC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) $(CUDA_LIBS) -lm

# The GPU-to-GPU ceiling for bench-p2p --devices cuda:0,cuda:1 (bench/cuda/).
$(B)/bench-peer-ceiling: bench/cuda/peer_ceiling.cu
	@mkdir -p $(B)
	$(NVCC) $(NVCCFLAGS) -cudart static -o $@ $<

$(B)/bench-ipc-probe: bench/cuda/ipc_probe.cu
	@mkdir -p $(B)
	$(NVCC) $(NVCCFLAGS) -cudart static -o $@ $<

$(B)/bench-chain-probe: bench/cuda/chain_probe.cu
	@mkdir -p $(B)
	$(NVCC) $(NVCCFLAGS) -cudart static -o $@ $<

bench-cuda: info $(B)/bench-peer-ceiling $(B)/bench-ipc-probe $(B)/bench-chain-probe

test-cuda-build: info $(T)/test_cuda_ops

# The GATED_DELTA_NET benchmark on a GPU (bench/kda_cuda.cu).  cuBLAS (the
# GEMM ceiling it reports) is linked dynamically, unlike pprpcd's dlopen.
$(O)/bench/kda_cuda.o: bench/kda_cuda.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

$(B)/bench-kda-cuda: $(O)/bench/kda_cuda.o $(KERNEL_OBJS) $(CUDA_OBJS) $(UTIL_OBJS)
	@mkdir -p $(B)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(CUDA_HOME)/lib64 -lcublas $(CUDA_LIBS) -lm

bench-kda-cuda: info $(B)/bench-kda-cuda

test-cuda: test-cuda-build
	$(T)/test_cuda_ops
else
test-cuda-build test-cuda bench-cuda bench-kda-cuda:
	@echo "CUDA is not enabled (CUDA=$(CUDA), $(NVCC) not found): nothing to build" >&2; exit 1
endif

# ---- install -----------------------------------------------------------------------
VERSION := $(shell sed -n 's/^\#define PPRPC_VERSION "\(.*\)"$$/\1/p' util/version.h)
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BINS := pprpcd pprpcctl pp-fence-test pprpc-demo
.PHONY: install
# With the ggml engine, ggml's libraries and backend modules (the CPU
# variants, ggml-cuda when the build has it) go to PREFIX/lib/pprpc, symlinks
# kept, for pprpcd alone: llama.cpp's tools keep their own ggml, which the
# plugin uses (and checks, util/ggml_release.h).
# (all of ggml's libraries: a build without the loader links its backends,
# ggml-cpu and ggml-rpc, into libggml as NEEDED libraries)
GGML_INSTALL_LIBS := $(if $(GGML_LINK),$(wildcard $(GGML_LIB_DIR)/libggml*.so*))
# The release's llama-server goes beside that ggml (PREFIX/lib/pprpc), for
# pprpc-llama-server@.service (LD_LIBRARY_PATH names the folder).
LLAMA_SERVER_BIN := $(if $(GGML_LINK),$(wildcard $(GGML_LIB_DIR)/llama-server))
LLAMA_SERVER_LIBS := $(if $(LLAMA_SERVER_BIN),$(wildcard $(addprefix $(GGML_LIB_DIR)/,libllama.so* libllama-common.so* \
	libllama-server-impl.so* libmtmd.so*)))
install: all $(BUILD)/install/pprpcd
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/pprpc \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 755 $(BUILD)/install/pprpcd $(DESTDIR)$(PREFIX)/bin/
	for b in $(filter-out pprpcd,$(INSTALL_BINS)); do [ ! -x $(B)/$$b ] || install -m 755 $(B)/$$b $(DESTDIR)$(PREFIX)/bin/; done
	$(if $(GGML_INSTALL_LIBS),install -d $(DESTDIR)$(PREFIX)/lib/pprpc && cp -P $(GGML_INSTALL_LIBS) $(DESTDIR)$(PREFIX)/lib/pprpc/ \
		&& cp $(GGML_LIB_DIR)/pprpc-llama-release $(DESTDIR)$(PREFIX)/lib/pprpc/llama-release)
	install -m 755 $(L)/libpprpc.so $(DESTDIR)$(PREFIX)/lib/$(LIB_FILE)
	ln -sf $(LIB_FILE) $(DESTDIR)$(PREFIX)/lib/libpprpc.so.$(LIB_SOVERSION)
	ln -sf libpprpc.so.$(LIB_SOVERSION) $(DESTDIR)$(PREFIX)/lib/libpprpc.so
	install -m 644 $(L)/libpprpc.a $(DESTDIR)$(PREFIX)/lib/
	$(if $(PLUGIN),install -m 755 $(PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	install -d $(DESTDIR)$(PREFIX)/include/pprpc
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/pprpc/types.h $(DESTDIR)$(PREFIX)/include/pprpc/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@PBC_LIBS@|$(PBC_LIBS) $(CRYPTO_LIBS)|g' pprpc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pprpc.pc
	sed -e 's|/usr/local/bin/pprpcd|$(PREFIX)/bin/pprpcd|' systemd/pprpcd@.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/pprpcd@.service
	sed -e 's|/usr/local/|$(PREFIX)/|g' systemd/pprpc-llama-server@.service \
		> $(DESTDIR)$(PREFIX)/lib/systemd/system/pprpc-llama-server@.service
	$(if $(LLAMA_SERVER_BIN),install -m 755 $(LLAMA_SERVER_BIN) $(DESTDIR)$(PREFIX)/lib/pprpc/llama-server \
		&& cp -P $(LLAMA_SERVER_LIBS) $(DESTDIR)$(PREFIX)/lib/pprpc/)
	install -m 644 conf/pprpcd.conf conf/cluster.conf conf/llama-server.env $(DESTDIR)$(PREFIX)/share/pprpc/
	for m in pprpcctl.1 pp-fence-test.1; do sed 's|@VERSION@|$(VERSION)|' doc/man/$$m > $(DESTDIR)$(PREFIX)/share/man/man1/$$m; done
	sed 's|@VERSION@|$(VERSION)|' doc/man/pprpcd.8 > $(DESTDIR)$(PREFIX)/share/man/man8/pprpcd.8

# The main job (README): llama.cpp over pprpc vs llama.cpp over its own RPC
# backend (bench/llama-vs-rpc, doc/llama-vs-rpc.md): two local pprpcd and two
# ggml-rpc-server, one core each, a generated hybrid (KDA + MLA, MoE) model,
# paired rounds, token-hash parity, the report.  The pinned llama.cpp is built
# first when needed (unless LLAMA_BIN names another build), then everything
# else is (re-)read by a sub-make, since the ggml detection happens when the
# Makefile is read.  LVR_ARGS: more llama-vs-rpc options.
LLAMA_BIN ?= $(abspath $(LLAMA_BUILD)/bin)
RUN_MODEL ?= $(BUILD)/models/kimi-linear-tiny-s1-f16.gguf
LVR_OUT ?= $(BUILD)/llama-vs-rpc
LVR_ARGS ?=
run:
ifeq ($(origin LLAMA_BIN),file)
	@scripts/build-llama.sh $(LLAMA_DIR) $(LLAMA_BUILD)
endif
	@$(MAKE) --no-print-directory all GGML=1
	@$(MAKE) --no-print-directory $(RUN_MODEL)
	@mkdir -p $(LVR_OUT)
	LLAMA_BIN=$(LLAMA_BIN) PPRPC_BUILD=$(abspath $(BUILD)) bench/llama-vs-rpc/llama-vs-rpc --model $(RUN_MODEL) \
		--json $(LVR_OUT)/results.json --svg $(LVR_OUT)/pipeline.svg $(LVR_ARGS)

# Generated models (bench/model-gen): NAME-PRESET-sSEED-f16.gguf.
$(BUILD)/models/%-tiny-s1-f16.gguf: bench/model-gen/gen-model bench/model-gen/archs.py bench/model-gen/vocab.py \
		bench/model-gen/weights.py bench/model-gen/gguf_min.py
	@mkdir -p $(dir $@)
	bench/model-gen/gen-model --arch $* --preset tiny --seed 1 -o $@ >/dev/null

# The synthetic hybrid transformer in pprpc's native op set (the former `make run`).
run-pprpc-bench: all
	$(B)/pprpc-bench --spawn 2

run-fence: all
	$(B)/pp-fence-test --spawn 2 --ubatches 8

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -path $(BUILD)/vm -prune -o -name '*.d' -type f -print 2>/dev/null)
