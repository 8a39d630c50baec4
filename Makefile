# Kip: run `make help` for the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The Go modules of the workspace (go.work lists the same).
MODULES := . pluginapi plugins/local plugins/aws plugins/azure test/cloudsim/azure/sdktest
# The repository's modules outside go.work, built, vetted, linted and tested
# with GOWORK=off as a third party's plugin module is: the GCE SDK's build
# list (gRPC, genproto, OpenTelemetry) would raise the root module's
# (plugins/gce/doc.go says which versions and why).
STANDALONE := plugins/gce test/cloudsim/gce/sdktest
# Example plugins: standalone modules, not in go.work, built with GOWORK=off
# as a third party's module is (make examples).
EXAMPLES := examples/plugin-toy
# kip's own tags are vX.Y.Z; pluginapi/v* and plugins/<name>/v* tag the other modules.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo 0.0.0-dev)
BIN := $(CURDIR)/bin
# make dist's output (gitignored), and the platforms it builds for.
DIST := $(CURDIR)/dist
DIST_PLATFORMS := linux/amd64 linux/arm64
TOOLS := $(shell hack/tools.sh dir)
GO_TEST_FLAGS ?= -race -count=1 -timeout 20m
# GO_BUILD builds as make dist and kip's images do (static, -trimpath), so
# that their compiles are make build's: the Go build cache holds one, and a
# cold make check compiles kip's graph without -race once (the link and
# the -X flags differ, which the compile does not see).
GO_BUILD := CGO_ENABLED=0 go build -trimpath
LDFLAGS_KIP := -X github.com/kipcell/kip/host/cli.Version=$(VERSION)
LDFLAGS_LOCAL := -X github.com/kipcell/kip/plugins/local.Version=$(VERSION)
LDFLAGS_AWS := -X github.com/kipcell/kip/plugins/aws.Version=$(VERSION)
LDFLAGS_GCE := -X github.com/kipcell/kip/plugins/gce.Version=$(VERSION)
LDFLAGS_AZURE := -X github.com/kipcell/kip/plugins/azure.Version=$(VERSION)
STATE_HOME := $(or $(XDG_STATE_HOME),$(HOME)/.local/state)
# The local control plane's state (PKI, etcd data, logs, kubeconfigs).
CLUSTER_STATE ?= $(STATE_HOME)/kip/cluster
KIP_CLUSTER := $(BIN)/kip-cluster --state $(CLUSTER_STATE)
# The AWS catalog's on-demand prices are karpenter's generated price maps,
# read as Go source from the module cache.
KARPENTER := github.com/aws/karpenter-provider-aws@v1.14.1
# Shell that prints the karpenter module's directory, downloading it once
# (from a throwaway module, so that no go.mod of the repository changes).
KARPENTER_DIR = tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd "$$tmp" && \
  GOWORK=off go mod init kip-catalogs >/dev/null 2>&1 && \
  GOWORK=off GOFLAGS=-mod=mod go mod download -json $(KARPENTER) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'
# catalog_gens FLAGS: run every plugin's catalog generator with FLAGS.
catalog_gens = kdir=$$($(KARPENTER_DIR)); [ -d "$$kdir" ] || { echo "cannot find $(KARPENTER): go mod download failed"; exit 1; }; \
  echo "== catalog aws"; (cd plugins/aws && go run ./catalog/gen -karpenter "$$kdir" $(1)); \
  echo "== catalog gce"; (cd plugins/gce && GOWORK=off go run ./catalog/gen $(1)); \
  echo "== catalog azure"; (cd plugins/azure && go run ./catalog/gen $(1))

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install the Debian packages the project needs (only those missing).
	@hack/install-deps.sh

.PHONY: build
build: build-demo ## Build every binary into ./bin (build-demo's, then kip-plugin-aws, kip-plugin-gce, kip-plugin-azure).
	$(GO_BUILD) -ldflags '$(LDFLAGS_AWS)' -o $(BIN)/kip-plugin-aws ./plugins/aws/cmd/kip-plugin-aws
	cd plugins/gce && GOWORK=off $(GO_BUILD) -ldflags '$(LDFLAGS_GCE)' -o $(BIN)/kip-plugin-gce ./cmd/kip-plugin-gce
	$(GO_BUILD) -ldflags '$(LDFLAGS_AZURE)' -o $(BIN)/kip-plugin-azure ./plugins/azure/cmd/kip-plugin-azure

# build-demo builds what make demo runs, no cloud plugin: their SDKs are
# most of a cold make build's downloads and a good part of its compile
# (docs/benchmarks.md, make demo), and the demo runs the local plugin.
.PHONY: build-demo
build-demo: ## Build what make demo runs into ./bin: kip, kip-cell, kip-plugin-local, kip-cluster, kip-local-provisioner, kip-demo.
	@mkdir -p $(BIN)
	$(GO_BUILD) -ldflags '$(LDFLAGS_KIP)' -o $(BIN)/kip ./cmd/kip
	$(GO_BUILD) -ldflags '$(LDFLAGS_LOCAL)' -o $(BIN)/kip-plugin-local ./plugins/local/cmd/kip-plugin-local
	$(GO_BUILD) -ldflags '-X main.version=$(VERSION)' -o $(BIN)/kip-cell ./cmd/kip-cell
	$(GO_BUILD) -o $(BIN)/kip-cluster ./test/cmd/kip-cluster
	$(GO_BUILD) -o $(BIN)/kip-local-provisioner ./cmd/kip-local-provisioner
	$(GO_BUILD) -o $(BIN)/kip-demo ./test/cmd/kip-demo

.PHONY: dist
dist: ## Build kip, kip-cell, the plugins and kip-local-provisioner for linux/amd64 and linux/arm64 (static, CGO off) into ./dist, with SHA256SUMS.
	@rm -rf $(DIST); mkdir -p $(DIST)
	@for platform in $(DIST_PLATFORMS); do os=$${platform%/*}; arch=$${platform#*/}; echo "== dist $$os/$$arch"; \
	  build() { CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$$2" -o "$(DIST)/$$1-$$os-$$arch" "$$3"; }; \
	  build kip '$(LDFLAGS_KIP)' ./cmd/kip; \
	  build kip-cell '-X main.version=$(VERSION)' ./cmd/kip-cell; \
	  build kip-plugin-local '$(LDFLAGS_LOCAL)' ./plugins/local/cmd/kip-plugin-local; \
	  build kip-plugin-aws '$(LDFLAGS_AWS)' ./plugins/aws/cmd/kip-plugin-aws; \
	  (cd plugins/gce && GOWORK=off build kip-plugin-gce '$(LDFLAGS_GCE)' ./cmd/kip-plugin-gce); \
	  build kip-plugin-azure '$(LDFLAGS_AZURE)' ./plugins/azure/cmd/kip-plugin-azure; \
	  build kip-local-provisioner '' ./cmd/kip-local-provisioner; \
	done
	@cd $(DIST) && sha256sum -- kip* > SHA256SUMS && echo "== $(DIST)/SHA256SUMS ($(VERSION))" && cat SHA256SUMS

# make images: where to push (host[:port][/path]), for which platforms,
# under which tag; INSECURE=1 pushes over plain HTTP (a loopback registry
# always is).
REGISTRY ?=
PLATFORMS ?= linux/amd64,linux/arm64
TAG ?= $(VERSION)
KIP_IMAGES = @[ -n "$(REGISTRY)" ] || { echo "make $@ needs REGISTRY=host[:port]/path"; exit 1; }; \
  go run ./deploy/images/cmd/kip-images --registry '$(REGISTRY)' --platforms '$(PLATFORMS)' --tag '$(TAG)' \
  --version '$(VERSION)' $(if $(INSECURE),--insecure)

.PHONY: images
images: deps ## Build reproducible multi-arch OCI images (no Docker) of kip with its plugins, kip-cell and each kip-plugin-<name>, push them to REGISTRY=host[:port]/path (PLATFORMS, TAG), print each reference@digest and write them to deploy/kustomize/base/images.env.
	$(KIP_IMAGES) --images-env deploy/kustomize/base/images.env

.PHONY: image-plugin
image-plugin: deps ## Build and push one plugin's image alone, kip-plugin-$(PLUGIN): PLUGIN=<name> REGISTRY=host[:port]/path (PLATFORMS, TAG).
	@[ -n "$(PLUGIN)" ] || { echo "make image-plugin needs PLUGIN=local|aws|gce|azure"; exit 1; }
	$(KIP_IMAGES) --images 'kip-plugin-$(PLUGIN)'

# The test report: every step's time and every test's (go test -json),
# which make check sums up at its end and make report prints again
# (test/testreport; docs/testing.md holds the budget).
REPORT_DIR ?= $(BIN)/test-report
TESTREPORT := $(BIN)/kip-testreport
# $(STEP) --name NAME [-C DIR] [--tests] -- COMMAND: run COMMAND as the
# report's step NAME, its go test -json output shown as go test's own.
STEP = $(TESTREPORT) run --dir $(REPORT_DIR) $(if $(filter -v,$(GO_TEST_FLAGS)),-v)

.PHONY: testreport
testreport:
	@mkdir -p $(BIN); go build -o $(TESTREPORT) ./test/cmd/kip-testreport

.PHONY: report
report: testreport ## Print each step's time and the slowest tests of the last make check, test or e2e (REPORT_DIR).
	@$(TESTREPORT) summary --dir $(REPORT_DIR)

.PHONY: test
test: deps testreport ## Run every module's tests with -race.
	@for m in $(MODULES); do echo "== go test $$m"; $(STEP) --name "test $$m" -C $$m -- go test -json $(GO_TEST_FLAGS) ./... || exit 1; done
	@for m in $(STANDALONE); do echo "== go test $$m (GOWORK=off)"; $(STEP) --name "test $$m" -C $$m -- env GOWORK=off go test -json $(GO_TEST_FLAGS) ./... || exit 1; done

# make e2e's passes: the full pass (local) runs every test, with kip,
# kip-cell and the plugins built with -race (as in every pass); a cloud's pass runs the
# plugin path and that cloud's own tests (test/e2e/doc.go lists which).
# The full pass runs alone, first; then the cloud passes all at once
# (each with its own control plane, containerd, registry and network;
# their tests mostly wait, so two cores run three), each line of their
# output headed by its pass; E2E_TOGETHER=0 runs them one after another.
E2E_PASSES ?= local aws gce azure
E2E_TOGETHER ?= 1

.PHONY: e2e
e2e: deps testreport ## Run the end-to-end tests against a real control plane (built once, ~9 min cold): the full pass with the local plugin (every test; kip, kip-cell and the plugins built with -race, as in every pass; also a real kubelet node and kip installed from its image on it), then, all at once, the plugin path and each cloud's own tests with the aws plugin against the EC2 simulator, the gce plugin against the Compute Engine simulator and the azure plugin against the ARM simulator (E2E_PASSES, E2E_TOGETHER).
	@pass() { pkgs=./test/e2e/; [ $$1 != local ] || pkgs="./test/e2e/... ./test/kubeletnode/"; \
	    echo "== e2e $$1: KIP_E2E_PLUGIN=$$1 go test -tags e2e $(GO_TEST_FLAGS) -timeout 60m $$pkgs"; \
	    $(STEP) --name "e2e $$1" --tests $${2:+--prefix "[$$1] "} -- env KIP_E2E_PLUGIN=$$1 go test -json -tags e2e $(GO_TEST_FLAGS) -timeout 60m $$pkgs; }; \
	  clouds=; for p in $(E2E_PASSES); do if [ $$p = local ]; then pass local || exit 1; else clouds="$$clouds $$p"; fi; done; \
	  if [ "$(E2E_TOGETHER)" = 0 ]; then for p in $$clouds; do pass $$p || exit 1; done; exit 0; fi; \
	  pids=; for p in $$clouds; do pass $$p together & pids="$$pids $$!:$$p"; done; \
	  failed=; for j in $$pids; do wait $${j%%:*} || failed="$$failed $${j#*:}"; done; \
	  [ -z "$$failed" ] || { echo "e2e: failed in the pass of$$failed"; exit 1; }

.PHONY: cluster-up
cluster-up: build ## Build (cached) and start a local control plane; prints the KUBECONFIG export.
	@$(KIP_CLUSTER) up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane (its objects stay for the next cluster-up).
	@if [ -x $(BIN)/kip-cluster ]; then $(KIP_CLUSTER) down; else go run ./test/cmd/kip-cluster --state $(CLUSTER_STATE) down; fi

.PHONY: cluster-env
cluster-env: ## Print the export lines (KUBECONFIG, PATH with kubectl) for the local control plane.
	@$(KIP_CLUSTER) env

# make bench's end-to-end benchmarks run on the local control plane with
# BENCH_PLUGIN (local, aws, gce or azure: the simulators boot their
# instances in 20 s); BENCH_E2E=0 runs the micro-benchmarks alone.
BENCH_PLUGIN ?= local
BENCH_E2E ?= 1

.PHONY: bench
bench: deps ## Run the benchmarks: the plugin round trip and the matcher, then end to end on the local control plane a pod's start-up, the 20-pod burst and a pod on a warm-pool standby (BENCH_PLUGIN=local|aws|gce|azure, BENCH_E2E=0 skips these); results go to docs/benchmarks.md by hand, with the command.
	go test -run '^$$' -bench 'RoundTrip|PingPong' -benchtime=2000x -count=3 ./host/plugin/
	go test -run '^$$' -bench 'MatchAWS|Rank' -benchmem -count=3 ./host/match/
	@if [ "$(BENCH_E2E)" != 0 ]; then \
	  echo "KIP_E2E_PLUGIN=$(BENCH_PLUGIN) go test -tags e2e -run '^$$' -bench 'PodStartup|BurstStartup|WarmStartup' -benchtime=1x ./test/e2e/"; \
	  KIP_E2E_PLUGIN=$(BENCH_PLUGIN) go test -tags e2e -run '^$$' -bench 'PodStartup|BurstStartup|WarmStartup' -benchtime=1x -timeout 60m ./test/e2e/; \
	fi

# The bursts of make bench-scale (KIP_SCALE_PODS=100,300,1000 for the
# thousand) and where it writes results.md, results.json and the plots.
# From the environment too: KIP_SCALE_NODES=mock,local,aws (the default:
# all three; e.g. KIP_SCALE_NODES=aws for the aws plugin alone) and
# KIP_SCALE_PROFILE=1 (kip's heap and goroutine profiles after the idle
# window, into KIP_SCALE_OUT/<node>/).
KIP_SCALE_PODS ?= 100,300
KIP_SCALE_OUT ?= $(CURDIR)/bin/bench-scale

.PHONY: bench-scale
bench-scale: deps ## Issue 19's scale benchmark: bursts of KIP_SCALE_PODS pods on one control plane through virtual-kubelet v1.13.0's mock (built from the Go module proxy, cached), then kip with light cells behind the local plugin and behind the aws plugin and the EC2 simulator; results and plots into KIP_SCALE_OUT (copied into docs/benchmarks.md by hand).
	KIP_SCALE_PODS=$(KIP_SCALE_PODS) KIP_SCALE_OUT=$(KIP_SCALE_OUT) go test -tags e2e -count=1 -v -run '^TestScale$$' -timeout 60m ./test/scale/

.PHONY: generate
generate: ## Regenerate the Go code of the .proto contracts (plugin and cell protocols) and the configuration reference (docs/configuration.md).
	@hack/generate.sh

.PHONY: catalogs
catalogs: ## Regenerate the plugins' instance-type catalogs from their sources
	@$(call catalog_gens,)

# go vet and golangci-lint compile every dependency to read its export
# data; with -race (GOFLAGS for golangci-lint's go list), they compile it
# as make test and the end-to-end programs do, so that a cold make check
# compiles the dependency graph once, not once without the race detector
# and once with it. They then read the files of a package that has a
# race build tag (test/e2e/framework's race_on.go), not its !race twin.
LINT_GOFLAGS := -race

.PHONY: verify
verify: deps testreport ## gofmt, go vet, golangci-lint, go mod tidy, generated code, configuration reference and catalogs unchanged, dependency direction.
	@echo "== gofmt"; out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "== go vet $$m"; $(STEP) --name "vet $$m" -C $$m -- go vet $(LINT_GOFLAGS) -tags e2e ./... || exit 1; done
	@$(STEP) --name "golangci-lint's build" -- hack/tools.sh golangci-lint >/dev/null
	@lint=$$(hack/tools.sh golangci-lint); for m in $(MODULES); do echo "== golangci-lint $$m"; \
	  $(STEP) --name "lint $$m" -C $$m -- env GOFLAGS="$$(go env GOFLAGS) $(LINT_GOFLAGS)" $$lint run --config $(CURDIR)/.golangci.yml ./... || exit 1; done
	@lint=$$(hack/tools.sh golangci-lint); for m in $(STANDALONE) $(EXAMPLES); do echo "== go vet, golangci-lint $$m (GOWORK=off)"; \
	  $(STEP) --name "vet, lint $$m" -C $$m -- env GOWORK=off GOFLAGS="$$(go env GOFLAGS) $(LINT_GOFLAGS)" sh -c "go vet ./... && $$lint run --config $(CURDIR)/.golangci.yml ./..." || exit 1; done
	@for m in $(MODULES) $(STANDALONE) $(EXAMPLES); do echo "== go mod tidy $$m"; (cd $$m && GOWORK=off go mod tidy -diff) || \
	  { echo "go.mod/go.sum of $$m are not tidy: run (cd $$m && GOWORK=off go mod tidy)"; exit 1; }; done
	@echo "== generated code and configuration reference"; hack/generate.sh --check
	@$(call catalog_gens,-check)
	@echo "== dependency direction"; hack/depcheck.sh

.PHONY: examples
examples: ## Test the example plugins as standalone modules (GOWORK=off), build them, and list and verify them with bin/kip.
	@mkdir -p $(BIN); $(GO_BUILD) -ldflags '$(LDFLAGS_KIP)' -o $(BIN)/kip ./cmd/kip
	@for m in $(EXAMPLES); do echo "== go test $$m (GOWORK=off)"; (cd $$m && GOWORK=off go test $(GO_TEST_FLAGS) ./...) || exit 1; done
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	  echo "== go build examples/plugin-toy/cmd/kip-plugin-toy (GOWORK=off)" && \
	  (cd examples/plugin-toy && GOWORK=off go build -o "$$dir/kip-plugin-toy" ./cmd/kip-plugin-toy) && \
	  echo "== kip plugins list --plugin-dir $$dir" && $(BIN)/kip plugins list --plugin-dir "$$dir" && \
	  echo "== kip plugins verify toy" && \
	  $(BIN)/kip plugins verify toy --config examples/plugin-toy/kip.yaml --plugin-dir "$$dir"

# The steps of make check, in order.
CHECK_STEPS := verify test examples e2e demo-check

# kip-prefetch prepares in the background, from the start, what later steps
# build and no step before them compiles: golangci-lint, the modules of the
# control plane, CoreDNS and metrics-server (a cold run waits on the
# network beside the CPU), make build into bin/prefetch (the compile
# without -race that examples, demo-check and the full pass's image of kip
# need: GO_BUILD), then the control plane, the kubelet, CoreDNS and
# metrics-server. It runs at nice 19 in make check's session, so that it
# takes only the CPU the steps leave idle, as the leader of a process group of its own, which is killed
# whole when check ends, compilers and all. Warm, it returns in seconds.
# It is built with -race, as verify then compiles its dependencies anyway;
# its log is $(REPORT_DIR)/prefetch.log.
.PHONY: check
check: deps testreport ## Everything CI runs: install what is missing, verify, unit tests, the example plugin, e2e tests, the demo up and down; then each step's time and the 15 slowest tests (REPORT_DIR).
	@rm -rf $(REPORT_DIR); mkdir -p $(REPORT_DIR); status=0; prefetch=; \
	  if go build -race -o $(BIN)/kip-prefetch ./test/cmd/kip-prefetch; then \
	    nice -n 19 $(BIN)/kip-prefetch -make "$(MAKE)" -bin $(BIN)/prefetch >$(REPORT_DIR)/prefetch.log 2>&1 & prefetch=$$!; fi; \
	  for step in $(CHECK_STEPS); do \
	    $(STEP) --name $$step -- $(MAKE) --no-print-directory $$step || { status=$$?; break; }; \
	  done; \
	  [ -z "$$prefetch" ] || kill -- -$$prefetch 2>/dev/null || kill $$prefetch 2>/dev/null || true; \
	  echo; $(TESTREPORT) summary --dir $(REPORT_DIR); \
	  if [ $$status -ne 0 ]; then echo "make check failed in make $$step"; fi; exit $$status

.PHONY: demo
# hack/demo.sh runs make build-demo itself, its output in the demo's build.log,
# so that the screen shows one line per phase and no Go tool's output.
demo: deps ## Start a local control plane and kip with the local plugin, run a sample workload.
	@CLUSTER_STATE=$(CLUSTER_STATE) hack/demo.sh up

.PHONY: demo-check
demo-check: deps ## Run the demo script as make demo does (up, up again, down) on a throwaway cluster state.
	@state=$$(mktemp -d /tmp/kip-demo-check-XXXXXX); \
	  trap 'CLUSTER_STATE=$$state hack/demo.sh down >/dev/null 2>&1 || true; rm -rf "$$state"' EXIT; \
	  echo "== demo up ($$state)"; CLUSTER_STATE=$$state hack/demo.sh up; \
	  echo "== demo up again (already running)"; CLUSTER_STATE=$$state hack/demo.sh up | tee "$$state/again.log"; \
	  grep -q 'already running' "$$state/again.log" || { echo "a second make demo did not say the demo runs"; exit 1; }; \
	  echo "== demo down"; CLUSTER_STATE=$$state hack/demo.sh down

.PHONY: demo-down
demo-down: ## Stop everything make demo started.
	@if [ -x $(BIN)/kip-cluster ]; then CLUSTER_STATE=$(CLUSTER_STATE) hack/demo.sh down; else $(MAKE) -s cluster-down; fi

.PHONY: clean
clean: ## Remove ./bin, ./dist and test caches (the tool and control-plane caches stay).
	rm -rf $(BIN) $(DIST)
	go clean -testcache
