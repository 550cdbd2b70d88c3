# Ironfleet — every tool this Makefile uses is pinned in hack/tools and built on first use into
# a cache outside the clone (TOOLS_DIR), by version, so `make test` and `make lab` work on a
# fresh machine with only Go installed, and a fresh clone on a machine that built them once
# builds none again.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

LOCALBIN ?= $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)

# Versions come from the tools modules, so a version is written in exactly one place.
mod_version = $(shell awk '$$1 == "$(2)" || ($$1 == "require" && $$2 == "$(2)") {print $$NF; exit}' $(1))
CONTROLLER_TOOLS_VERSION := $(call mod_version,hack/tools/go.mod,sigs.k8s.io/controller-tools)
KUSTOMIZE_VERSION        := $(call mod_version,hack/tools/go.mod,sigs.k8s.io/kustomize/kustomize/v5)
OPERATOR_SDK_VERSION     := $(call mod_version,hack/tools/operator-sdk/go.mod,github.com/operator-framework/operator-sdk)
K8S_VERSION              := $(patsubst v%,%,$(call mod_version,hack/tools/kube/go.mod,k8s.io/kubernetes))
ETCD_VERSION             := $(patsubst v%,%,$(call mod_version,hack/tools/etcd/go.mod,go.etcd.io/etcd/server/v3))
OPM_VERSION              := $(call mod_version,hack/tools/olm/go.mod,github.com/operator-framework/operator-registry)
GRPC_HEALTH_PROBE_VERSION := $(call mod_version,hack/tools/olm/go.mod,github.com/grpc-ecosystem/grpc-health-probe)
OLM_VERSION              := $(call mod_version,hack/tools/olm/go.mod,github.com/operator-framework/operator-lifecycle-manager)
HELM_VERSION             := $(call mod_version,hack/tools/helm/go.mod,helm.sh/helm/v3)
COREDNS_VERSION          := $(call mod_version,hack/tools/coredns/go.mod,github.com/coredns/coredns)
CLUSTERCTL_VERSION       := $(call mod_version,hack/tools/clusterctl/go.mod,sigs.k8s.io/cluster-api)

# Built tools, by version: shared by every clone on the machine. The binaries' names carry their
# versions, so a changed pin builds anew; remove the directory to rebuild everything.
TOOLS_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ironfleet/tools
export IRONFLEET_TOOLS_DIR := $(TOOLS_DIR)

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE      := $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VERSION)
OPERATOR_SDK   := $(TOOLS_DIR)/operator-sdk-$(OPERATOR_SDK_VERSION)
OPM            := $(TOOLS_DIR)/opm-$(OPM_VERSION)
GRPC_HEALTH_PROBE := $(TOOLS_DIR)/grpc_health_probe-$(GRPC_HEALTH_PROBE_VERSION)
# OLM's operators and its bundle copier, for the OLM image the install tests run OLM from.
OLM_DIR        := $(TOOLS_DIR)/olm-$(OLM_VERSION)
OLM_BINARIES   := olm catalog cpb package-server
# helm renders OLM's chart into its release manifests (the install tests).
HELM           := $(TOOLS_DIR)/helm-$(HELM_VERSION)
export IRONFLEET_HELM := $(HELM)
# clusterctl renders templates/cluster-template.yaml and the provider's repository (test/capi).
CLUSTERCTL     := $(TOOLS_DIR)/clusterctl-$(CLUSTERCTL_VERSION)
export IRONFLEET_CLUSTERCTL := $(CLUSTERCTL)
# Tools that go into images are static and reproducible: the same bytes from any machine.
STATIC_BUILD := CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags=-buildid=
# The envtest control plane: kube-apiserver, kubectl and etcd in one directory, as envtest wants.
ENVTEST_ASSETS := $(TOOLS_DIR)/envtest/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
export KUBEBUILDER_ASSETS := $(ENVTEST_ASSETS)
# The rest of a real node (test/node): kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy; with the envtest control plane above.
NODE_ASSETS := $(TOOLS_DIR)/node/k8s-$(K8S_VERSION)
export IRONFLEET_NODE_ASSETS := $(NODE_ASSETS)
# The node's cluster DNS.
COREDNS := $(TOOLS_DIR)/coredns-$(COREDNS_VERSION)
export IRONFLEET_COREDNS := $(COREDNS)
export KUSTOMIZE
# Kubernetes binaries built from the module report the version they are (not v0.0.0-master).
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean

GO_TEST_FLAGS ?= -race -count=1
# Per package: test/e2e boots its VMs one after another under TCG and took 18.5–20 min of it on
# 2 cores (CI, 11-27); a package that passes its own deadlines must not be cut by this one.
GO_TEST_TIMEOUT ?= 30m
# test/e2e first: go test starts packages in the order given, two at a time on 2 cores, and the
# VM suite is the longest by far (17–19 min); started last, as ./... orders it, it ran on alone
# for minutes after everything else had finished.
TEST_PACKAGES ?= ./test/e2e/ $(shell go list ./... | grep -v '/test/e2e$$')

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods for the API.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from markers into config/.
	$(CONTROLLER_GEN) crd:maxDescLen=512 paths=./apis/metal/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd:maxDescLen=512 paths=./apis/infrastructure/... output:crd:artifacts:config=config/capi/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/controller/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=boot-service-role paths=./internal/boot/... output:rbac:artifacts:config=config/boot-namespace
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/capi/... output:rbac:artifacts:config=config/capi/rbac

.PHONY: docs
docs: ## Generate docs/ from code (every state table's lifecycle diagram).
	go run ./hack/gendocs

.PHONY: fmt
fmt: ## Format the code.
	go fmt ./...

.PHONY: vet
vet: ## Vet the code.
	go vet ./...

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail when generated files are not what the sources generate.
	hack/verify-generated.sh

.PHONY: build
build: ## Build the manager binary into bin/.
	go build -o $(LOCALBIN)/manager ./cmd/manager

# How much make test fuzzes each hostile-input parser after the tests (make fuzz: FUZZTIME): a
# count of inputs, not a duration. Go can fail a duration-bound fuzz run with "context deadline
# exceeded" when the time runs out under load, having found nothing (go.dev/issue/75804).
TEST_FUZZTIME ?= 100000x

.PHONY: test
test: test-deps verify-generated verify-bundle vet envtest node-tools probe-image tenant-image catalog test-images $(KUSTOMIZE) $(CLUSTERCTL) ## Verify generated files, vet, run every test against a real control plane (and real VMs, as root), then fuzz each parser with TEST_FUZZTIME inputs.
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $(TEST_PACKAGES)
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

.PHONY: catalog
catalog: images $(OPM) $(GRPC_HEALTH_PROBE) ## Render the bundle into a file-based catalog with opm (bin/images/fbc/) and build the catalog image that serves it (bin/images/catalog.tar).
	go run ./internal/ociimage/cmd/build-images -images catalog -out $(IMAGES_DIR) -bundle-ref $(BUNDLE_IMG) -catalog-ref $(CATALOG_IMG) \
		-opm $(OPM) -grpc-health-probe $(GRPC_HEALTH_PROBE)

.PHONY: image-deps
image-deps: vm-deps ## Install what the images carry besides our binaries (CA certificates, a static busybox for the OLM test image; iPXE comes with vm-deps) with apt-get if missing.
	@missing=$$(for p in $(IMAGE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

# What a real node needs besides the binaries built from source (test/node).
NODE_PACKAGES := containerd runc iptables containernetworking-plugins

.PHONY: node-deps
node-deps: ## Install containerd, runc, iptables and the CNI plugins with apt-get if missing (a real node for the install tests).
	@missing=$$(for p in $(NODE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

.PHONY: test-deps
test-deps: vm-deps image-deps node-deps ## Install redfishtool (third-party Redfish client for the bmcsim interop test) and the VM packages with apt-get if missing.
	@command -v redfishtool >/dev/null 2>&1 || { \
		SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends redfishtool; }

# What real VMs need: QEMU (TCG), its iPXE NIC ROMs, Debian's iPXE builds the boot service
# serves over TFTP, OVMF for UEFI machines, and OpenIPMI's ipmi_sim (the IPMI LAN BMC of the
# lab's and tests' IPMI hosts) with ipmitool (the third-party IPMI client tests check against).
VM_PACKAGES := qemu-system-x86 ipxe-qemu ipxe ovmf openipmi ipmitool

.PHONY: vm-deps
vm-deps: ## Install QEMU, iPXE, OVMF, OpenIPMI's ipmi_sim and ipmitool with apt-get if missing (as root; without root the lab runs without VMs).
	@missing=$$(for p in $(VM_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then apt-get update && apt-get install -y --no-install-recommends $$missing; \
		else echo "vm-deps: not root, not installing $$missing: the lab and tests run without VMs"; fi; \
	fi

FUZZTIME ?= 100000x

.PHONY: fuzz
# Every hostile-input parser's fuzz target (and the ignition renderer's), as package:Target.
FUZZ_TARGETS := ./internal/registry/:FuzzDecodeReport ./internal/registry/:FuzzVerifyToken \
	./internal/macdb/:FuzzParse ./internal/bmc/:FuzzParseAddress ./internal/ignition/:FuzzParse \
	./internal/ignition/:FuzzRender ./internal/boot/dhcp/:FuzzDHCP ./internal/bmc/ipmi/:FuzzParseFRU \
	./internal/bmc/ipmi/:FuzzDecoders
# How many targets fuzz at once, each with one worker: Go fuzzes one target per go test, and
# each run's build and corpus loading leave the CPUs idle that another run can use.
FUZZ_JOBS ?= 2

fuzz: ## Fuzz every hostile-input parser and the ignition renderer, FUZZTIME each (a count of inputs, or a duration; see TEST_FUZZTIME), FUZZ_JOBS at a time, each line prefixed with its target. A crasher fails the run and lands in testdata/fuzz: commit it, it is then a regression test.
	@printf '%s\n' $(FUZZ_TARGETS) | xargs -P $(FUZZ_JOBS) -n 1 bash -o pipefail -c \
		'pkg=$${0%:*} fn=$${0##*:}; go test -run "^$$" -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -parallel 1 "$$pkg" 2>&1 | sed -u "s|^|[$$fn] |"'

CHAOS_KILLS ?= 100

.PHONY: chaos
chaos: envtest ## Crash consistency, longer than make test's: CHAOS_KILLS (100) SIGKILLs of the manager during discovery, claims, releases and maintenance; CHAOS_SEED replays a run.
	CHAOS_KILLS=$(CHAOS_KILLS) go test $(GO_TEST_FLAGS) -run '^TestCrashConsistency$$' -timeout 60m -v ./test/chaos/

BENCH_SERVERS ?= 1000

.PHONY: bench
bench: envtest vm-deps probe-image tenant-image ## Scale benchmark: BENCH_SERVERS (1000) servers through enrollment, claims, release and 5 idle minutes, each phase against its plain and object-model floors, then 100 claims one at a time; then real VMs' power-on → report (BENCH_VMS, 2), and a VM's claim → OS booted from disk (the 64 MiB tenant image, raw/gz/zst/xz); writes docs/bench/ from a clean tree (the scale figures only at 1000 or 10000, the boot figures only with 2 VMs), else a scratch directory (BENCH_OUT overrides).
	IRONFLEET_BENCH=1 BENCH_SERVERS=$(BENCH_SERVERS) go test -count=1 -run '^TestBench$$' -timeout 4h -v ./test/bench/
	IRONFLEET_BENCH=1 go test -count=1 -run '^TestBenchBoot$$' -timeout 30m -v ./test/bench/
	IRONFLEET_BENCH=1 go test -count=1 -run '^TestBenchInstall$$' -timeout 60m -v ./test/bench/

##@ Packaging

VERSION ?= 0.1.0
BUNDLE_CHANNELS ?= --channels=alpha --default-channel=alpha

# The images' names, set here only: `make bundle` stamps IMG into config/ and the CSV, and
# `make images` builds each under its name (docs/install.md).
IMAGE_REGISTRY ?= ghcr.io/ironfleet
IMG ?= $(IMAGE_REGISTRY)/ironfleet:v$(VERSION)
BOOT_IMG ?= $(IMAGE_REGISTRY)/boot-service:v$(VERSION)
# The Cluster API infrastructure provider (cmd/capi-provider): make capi-release stamps it.
CAPI_IMG ?= $(IMAGE_REGISTRY)/capi-provider:v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_REGISTRY)/ironfleet-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_REGISTRY)/ironfleet-catalog:v$(VERSION)
# The pod sandbox image of the test node's containerd (test/node), never pulled.
PAUSE_IMG ?= ironfleet.dev/test/pause:v$(VERSION)
# OLM, as the install tests run it (its operators and cpb, built from the pinned module).
OLM_IMG ?= ironfleet.dev/test/olm:$(OLM_VERSION)
IMAGES_DIR ?= $(LOCALBIN)/images
IMAGE_PACKAGES := ca-certificates busybox-static

.PHONY: images
images: image-deps probe-image ## Build the manager, capi-provider, boot-service and bundle images without a container engine, reproducibly, into bin/images/ (OCI layouts, their tars, images.json with each digest).
	go run ./internal/ociimage/cmd/build-images -out $(IMAGES_DIR) -probe-dir $(PROBE_IMAGE_DIR) \
		-manager-ref $(IMG) -capi-provider-ref $(CAPI_IMG) -boot-service-ref $(BOOT_IMG) -bundle-ref $(BUNDLE_IMG)

.PHONY: test-images
test-images: image-deps olm-tools ## Build the images the install tests need besides Ironfleet's: the test node's pause image and OLM's, into bin/images/.
	go run ./internal/ociimage/cmd/build-images -images pause,olm -out $(IMAGES_DIR) -pause-ref $(PAUSE_IMG) -olm-ref $(OLM_IMG) -olm-dir $(OLM_DIR)

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate the OLM bundle (bundle/) from config/, with IMG and BOOT_IMG stamped in, and validate it.
	$(OPERATOR_SDK) generate kustomize manifests -q --apis-dir apis
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	cd config/boot-service && $(KUSTOMIZE) edit set image boot-service=$(BOOT_IMG)
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) --package ironfleet $(BUNDLE_CHANNELS)
	@# createdAt would change on every run; a bundle must be reproducible from config/.
	sed -i '/^    createdAt: /d' bundle/manifests/ironfleet.clusterserviceversion.yaml
	@# The bundle image is built by make images (its labels are bundle/metadata's annotations).
	rm -f bundle.Dockerfile
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

# The Cluster API provider as clusterctl installs it: a local repository (docs/capi.md) of
# infrastructure-ironfleet, with CAPI_IMG stamped into config/capi.
CAPI_REPOSITORY ?= $(LOCALBIN)/capi-repository
CAPI_RELEASE_DIR := $(CAPI_REPOSITORY)/infrastructure-ironfleet/v$(VERSION)

.PHONY: capi-release
capi-release: $(KUSTOMIZE) ## Write the Cluster API provider's clusterctl repository into bin/capi-repository/infrastructure-ironfleet/v$(VERSION)/: infrastructure-components.yaml (config/capi, CAPI_IMG stamped), metadata.yaml, cluster-template.yaml.
	mkdir -p $(CAPI_RELEASE_DIR)
	cd config/capi && $(KUSTOMIZE) edit set image capi-provider=$(CAPI_IMG)
	$(KUSTOMIZE) build config/capi > $(CAPI_RELEASE_DIR)/infrastructure-components.yaml
	cp metadata.yaml templates/cluster-template.yaml $(CAPI_RELEASE_DIR)/
	@echo "clusterctl repository: $(CAPI_RELEASE_DIR) (docs/capi.md: its clusterctl.yaml providers entry)"

# The probe's boot image: Debian's kernel (pinned in metalprobe/image/kernel.version) and an
# initramfs with metalprobe's /init, the metalprobe binary and the NIC and storage modules.
PROBE_IMAGE_DIR ?= $(LOCALBIN)/probe
# The lab and the VM tests boot the probe from here (test/lab.ProbeDir).
export IRONFLEET_PROBE_DIR := $(PROBE_IMAGE_DIR)
# internal/ociimage/cmd/build-images compares its own build of every image with make's, here.
export IRONFLEET_IMAGES_DIR := $(IMAGES_DIR)
PROBE_VERSION ?= $(VERSION)

.PHONY: probe-image
probe-image: ## Build metalprobe's boot image (vmlinuz, initramfs.cpio.gz, manifest.json) into bin/probe/, reproducibly; kept as it is when its sources have not changed.
	go run ./metalprobe/image/cmd/build-probe-image -out $(PROBE_IMAGE_DIR) -version $(PROBE_VERSION)

# A tenant OS image for tests and the lab's tour (test/tenantimage): a raw disk that SeaBIOS
# boots with Debian's syslinux into the probe's kernel and an initramfs whose /init reads the
# config drive.
TENANT_IMAGE_DIR ?= $(LOCALBIN)/tenant
# The tests and the lab that install and boot a tenant OS find it here (test/tenantimage.Dir).
export IRONFLEET_TENANT_DIR := $(abspath $(TENANT_IMAGE_DIR))
TENANT_IMAGE_PACKAGES := syslinux syslinux-common mtools dosfstools

.PHONY: tenant-image
tenant-image: ## Build the tenant test image (disk.raw and its .gz/.zst/.xz, SHA256SUMS, manifest.json) into bin/tenant/, reproducibly; installs syslinux, mtools and dosfstools with apt-get if missing (as root); kept as it is when its sources have not changed.
	@missing=$$(for p in $(TENANT_IMAGE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -eq 0 ]; then apt-get update && apt-get install -y --no-install-recommends $$missing; \
		else echo "tenant-image: not root, not installing $$missing"; fi; \
	fi
	go run ./test/tenantimage/cmd/build-tenant-image -out $(TENANT_IMAGE_DIR)

.PHONY: verify-bundle
verify-bundle: $(KUSTOMIZE) $(OPERATOR_SDK) ## Fail when bundle/ is not what config/ generates, or does not validate.
	hack/verify-bundle.sh

##@ Tools (pinned in hack/tools, built into TOOLS_DIR, cached by version)

.PHONY: tools
tools: $(CONTROLLER_GEN) $(KUSTOMIZE) $(OPERATOR_SDK) $(OPM) $(GRPC_HEALTH_PROBE) $(CLUSTERCTL) envtest node-tools olm-tools ## Build every tool.

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/kubectl $(ENVTEST_ASSETS)/etcd ## Build the test control plane (kube-apiserver, etcd, kubectl).

NODE_BINARIES := kubelet kube-controller-manager kube-scheduler kube-proxy

.PHONY: node-tools
node-tools: envtest $(addprefix $(NODE_ASSETS)/,$(NODE_BINARIES)) $(COREDNS) ## Build the rest of a real node (kubelet, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS; kubelet takes about 5 minutes once).

$(COREDNS):
	cd hack/tools/coredns && CGO_ENABLED=0 go build -o $@ github.com/coredns/coredns

$(addprefix $(NODE_ASSETS)/,$(NODE_BINARIES)) &:
	@echo "Building $(NODE_BINARIES) $(K8S_VERSION) from source (kubelet takes about 5 minutes on first run)"
	cd hack/tools/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o $(NODE_ASSETS)/ $(addprefix k8s.io/kubernetes/cmd/,$(NODE_BINARIES))
	@touch $(addprefix $(NODE_ASSETS)/,$(NODE_BINARIES))

# A tool is built once per version (its name says which): no go.mod prerequisite, whose time in
# a fresh clone is always newer than the cache's.
$(CONTROLLER_GEN):
	cd hack/tools && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE):
	cd hack/tools && go build -o $@ sigs.k8s.io/kustomize/kustomize/v5

$(OPERATOR_SDK):
	cd hack/tools/operator-sdk && go build -o $@ github.com/operator-framework/operator-sdk/cmd/operator-sdk

$(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/kubectl &:
	@echo "Building kube-apiserver and kubectl $(K8S_VERSION) from source (several minutes on first run)"
	cd hack/tools/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o $(ENVTEST_ASSETS)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
	@touch $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/kubectl

$(OPM):
	cd hack/tools/olm && $(STATIC_BUILD) -tags=json1,containers_image_openpgp -o $@ github.com/operator-framework/operator-registry/cmd/opm

$(GRPC_HEALTH_PROBE):
	cd hack/tools/olm && $(STATIC_BUILD) -o $@ github.com/grpc-ecosystem/grpc-health-probe

$(HELM):
	cd hack/tools/helm && CGO_ENABLED=0 go build -o $@ helm.sh/helm/v3/cmd/helm

# clusterctl reports the version it is (not an empty one), as Cluster API's release builds it.
CLUSTERCTL_LDFLAGS := -X sigs.k8s.io/cluster-api/version.gitVersion=$(CLUSTERCTL_VERSION) \
	-X sigs.k8s.io/cluster-api/version.gitMajor=$(word 1,$(subst ., ,$(patsubst v%,%,$(CLUSTERCTL_VERSION)))) \
	-X sigs.k8s.io/cluster-api/version.gitMinor=$(word 2,$(subst ., ,$(CLUSTERCTL_VERSION))) \
	-X sigs.k8s.io/cluster-api/version.gitTreeState=clean

$(CLUSTERCTL):
	cd hack/tools/clusterctl && CGO_ENABLED=0 go build -ldflags "$(CLUSTERCTL_LDFLAGS)" -o $@ sigs.k8s.io/cluster-api/cmd/clusterctl

.PHONY: clusterctl
clusterctl: $(CLUSTERCTL) ## Build clusterctl (Cluster API's command line, the pinned version) into the tools cache: test/capi runs it.

.PHONY: olm-tools
olm-tools: $(addprefix $(OLM_DIR)/,$(OLM_BINARIES)) $(HELM) ## Build OLM's olm and catalog operators, package-server and cpb, and helm to render OLM's chart (about 5 minutes once).

$(addprefix $(OLM_DIR)/,$(OLM_BINARIES)) &:
	@echo "Building OLM $(OLM_VERSION) from source (about 4 minutes on first run)"
	cd hack/tools/olm && $(STATIC_BUILD) -o $(OLM_DIR)/ github.com/operator-framework/operator-lifecycle-manager/cmd/olm \
		github.com/operator-framework/operator-lifecycle-manager/cmd/catalog github.com/operator-framework/operator-lifecycle-manager/util/cpb \
		github.com/operator-framework/operator-lifecycle-manager/cmd/package-server
	@touch $(addprefix $(OLM_DIR)/,$(OLM_BINARIES))

$(ENVTEST_ASSETS)/etcd:
	@echo "Building etcd $(ETCD_VERSION) from source"
	cd hack/tools/etcd && go build -o $@ .

##@ Lab

ARGS ?=

.PHONY: lab
lab: envtest vm-deps probe-image tenant-image ## Run the local lab: control plane, simulated fleet, real VMs (as root; ARGS=--vms 0 for none), boot service, operator (ARGS=--scenario=tour to run the tour and exit).
	go run ./cmd/metal-lab $(ARGS)
