package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

var env *testenv.Env

func TestMain(main *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := main.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

const ns = "default"

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
func nsMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns}
}

func validEndpoint(name string) *m.Endpoint {
	return &m.Endpoint{ObjectMeta: meta(name), Spec: m.EndpointSpec{MACAddress: "3c:ec:ef:01:02:03", IP: "10.0.0.5"}}
}

func validBMC(name string) *m.BMC {
	return &m.BMC{ObjectMeta: meta(name), Spec: m.BMCSpec{
		Access:       &m.BMCAccess{Address: "redfish+https://10.0.0.5/redfish/v1"},
		BMCSecretRef: m.LocalObjectReference{Name: "bmc-creds"},
	}}
}

func validClaim(name string) *m.ServerClaim {
	return &m.ServerClaim{ObjectMeta: nsMeta(name), Spec: m.ServerClaimSpec{
		ServerRef:   &m.LocalObjectReference{Name: "server-a"},
		MinCPUCores: ptr.To[int32](8),
		MinMemory:   ptr.To(resource.MustParse("64Gi")),
		Power:       m.PowerOn,
		Image:       "oci://ghcr.io/example/os:1.0",
	}}
}

func TestEveryKindAcceptsAValidSpec(t *testing.T) {
	ctx := context.Background()
	objects := []client.Object{
		validEndpoint("valid-endpoint"),
		validBMC("valid-bmc"),
		&m.BMC{ObjectMeta: meta("valid-bmc-from-endpoint"), Spec: m.BMCSpec{
			EndpointRef: &m.LocalObjectReference{Name: "valid-endpoint"}, BMCSecretRef: m.LocalObjectReference{Name: "bmc-creds"},
		}},
		&m.BMCSecret{ObjectMeta: meta("valid-bmcsecret"), Spec: m.BMCSecretSpec{Username: "admin", Password: "s3cret"}},
		&m.Server{ObjectMeta: meta("valid-server"), Spec: m.ServerSpec{
			SystemUUID: "38947555-7742-3448-3784-823347823834", SystemURI: "/redfish/v1/Systems/1",
			BMCRef: &m.LocalObjectReference{Name: "valid-bmc"}, Power: m.PowerOff,
		}},
		validClaim("valid-claim"),
		&m.ServerBootConfiguration{ObjectMeta: nsMeta("valid-sbc"), Spec: m.ServerBootConfigurationSpec{
			ServerRef: m.LocalObjectReference{Name: "valid-server"}, Image: "metalprobe:latest", Purpose: m.BootPurposeDiscovery,
		}},
		&m.ServerMaintenance{ObjectMeta: nsMeta("valid-maint"), Spec: m.ServerMaintenanceSpec{
			ServerRef: m.LocalObjectReference{Name: "valid-server"}, Reason: "replace DIMM",
		}},
	}
	for _, obj := range objects {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			require.NoError(t, env.Client.Create(ctx, obj))
		})
	}

	t.Run("defaults are applied", func(t *testing.T) {
		var bmc m.BMC
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "valid-bmc"}, &bmc))
		assert.False(t, bmc.Spec.InsecureSkipVerify, "TLS verification is on unless a BMC opts out")
		var server m.Server
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "valid-server"}, &server))
		assert.Equal(t, m.WipeErase, server.Spec.WipePolicy, "the default wipe leaves nothing readable")
		var maint m.ServerMaintenance
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "valid-maint"}, &maint))
		assert.Equal(t, m.MaintenanceOwnerApproval, maint.Spec.Policy)
		assert.Equal(t, m.PowerOff, maint.Spec.Power)
		claim := &m.ServerClaim{ObjectMeta: nsMeta("defaulted-claim")}
		require.NoError(t, env.Client.Create(ctx, claim))
		assert.Equal(t, m.PowerOn, claim.Spec.Power)
	})
}

// requireInvalid asserts that err is an Invalid error whose message contains every fragment.
func requireInvalid(t *testing.T, err error, fragments ...string) {
	t.Helper()
	require.Error(t, err, "the apiserver must reject this object")
	assert.True(t, apierrors.IsInvalid(err), "want an Invalid error, got %v", err)
	for _, f := range fragments {
		assert.Contains(t, err.Error(), f)
	}
}

func TestInvalidObjectsAreRejectedWithAReadableMessage(t *testing.T) {
	ctx := context.Background()

	t.Run("bad MAC", func(t *testing.T) {
		for _, mac := range []string{"not-a-mac", "3c:ec:ef:01:02", "3c-ec-ef-01-02-03", "3c:ec:ef:01:02:zz"} {
			ep := validEndpoint("bad-mac")
			ep.Spec.MACAddress = mac
			requireInvalid(t, env.Client.Create(ctx, ep), "macAddress must be six colon-separated hex octets")
		}
	})

	t.Run("bad IP", func(t *testing.T) {
		ep := validEndpoint("bad-ip")
		ep.Spec.IP = "10.0.0.300"
		requireInvalid(t, env.Client.Create(ctx, ep), "ip must be an IPv4 or IPv6 address")
	})

	t.Run("MAC is immutable", func(t *testing.T) {
		ep := validEndpoint("immutable-mac")
		require.NoError(t, env.Client.Create(ctx, ep))
		ep.Spec.MACAddress = "3c:ec:ef:0a:0b:0c"
		requireInvalid(t, env.Client.Update(ctx, ep), "macAddress is immutable")
	})

	t.Run("BMC with both endpointRef and access", func(t *testing.T) {
		bmc := validBMC("both")
		bmc.Spec.EndpointRef = &m.LocalObjectReference{Name: "ep"}
		requireInvalid(t, env.Client.Create(ctx, bmc), "exactly one of endpointRef or access must be set, never both")
	})

	t.Run("tolerations that cannot match as written", func(t *testing.T) {
		for name, tc := range map[string]struct {
			toleration m.Toleration
			want       string
		}{
			"Exists with a value": {m.Toleration{Key: "example.com/retire", Operator: m.TolerationExists, Value: "rack-7"}, "a toleration with operator Exists matches any value: value must be empty"},
			"Equal without a key": {m.Toleration{Value: "rack-7"}, "a toleration without a key must have operator Exists"},
			"a bad key":           {m.Toleration{Key: "not a key", Operator: m.TolerationExists}, "spec.tolerations[0].key"},
			"a bad effect":        {m.Toleration{Key: "k", Operator: m.TolerationExists, Effect: "NoSchedule"}, "spec.tolerations[0].effect"},
		} {
			t.Run(name, func(t *testing.T) {
				claim := validClaim("toleration")
				claim.Spec.Tolerations = []m.Toleration{tc.toleration}
				requireInvalid(t, env.Client.Create(ctx, claim), tc.want)
			})
		}
		claim := validClaim("tolerations")
		claim.Spec.Tolerations = []m.Toleration{{Operator: m.TolerationExists}, {Key: "example.com/retire", Value: "rack-7", Effect: m.TaintNoClaim}}
		require.NoError(t, env.Client.Create(ctx, claim), "every key, and one by value")
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		assert.Equal(t, m.TolerationEqual, claim.Spec.Tolerations[1].Operator, "Equal by default")
	})

	t.Run("BMC with neither endpointRef nor access", func(t *testing.T) {
		bmc := validBMC("neither")
		bmc.Spec.Access = nil
		requireInvalid(t, env.Client.Create(ctx, bmc), "exactly one of endpointRef or access")
	})

	t.Run("wipe exclusions that name no device, or one that may move", func(t *testing.T) {
		for name, tc := range map[string]struct {
			exclusion m.WipeExclusion
			want      string
		}{
			"neither":     {m.WipeExclusion{Reason: "r"}, "a wipe exclusion names its device by serialNumber or by path: one of them, not both"},
			"both":        {m.WipeExclusion{SerialNumber: "S1", Path: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1", Reason: "r"}, "one of them, not both"},
			"kernel name": {m.WipeExclusion{Path: "/dev/sdb", Reason: "r"}, "a kernel name such as /dev/sdb may name another device on the next boot"},
			"no reason":   {m.WipeExclusion{SerialNumber: "S1"}, "reason"},
		} {
			s := &m.Server{ObjectMeta: meta("wipe-exclusion-" + strings.ReplaceAll(name, " ", "-")), Spec: m.ServerSpec{WipeExclusions: []m.WipeExclusion{tc.exclusion}}}
			requireInvalid(t, env.Client.Create(ctx, s), tc.want)
		}
		ok := &m.Server{ObjectMeta: meta("wipe-exclusions-ok"), Spec: m.ServerSpec{WipeExclusions: []m.WipeExclusion{
			{SerialNumber: "4C530001230512113245", Reason: "IDSDM holding the hypervisor"},
			{Path: "/dev/disk/by-path/pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0", Reason: "vendor recovery stick"}}}}
		require.NoError(t, env.Client.Create(ctx, ok))
	})

	t.Run("probe networks the probe could not use", func(t *testing.T) {
		for name, tc := range map[string]struct {
			network m.ProbeNetwork
			want    string
		}{
			"no prefix":         {m.ProbeNetwork{Address: "10.0.0.21"}, "address must be an address with a prefix length"},
			"gateway elsewhere": {m.ProbeNetwork{Address: "10.0.0.21/24", Gateway: "10.0.1.1"}, "gateway must be inside address's subnet"},
			"gateway is itself": {m.ProbeNetwork{Address: "10.0.0.21/24", Gateway: "10.0.0.21"}, "gateway must not be the probe's own address"},
			"gateway not an IP": {m.ProbeNetwork{Address: "10.0.0.21/24", Gateway: "router"}, "gateway must be an IPv4 or IPv6 address"},
			"DNS not an IP":     {m.ProbeNetwork{Address: "10.0.0.21/24", DNS: []string{"dns.example"}}, "every dns entry must be an IP address"},
			"bad MAC":           {m.ProbeNetwork{Address: "10.0.0.21/24", InterfaceMAC: "3c-ec-ef-01-02-03"}, "interfaceMAC must be six colon-separated hex octets"},
			"VLAN too high":     {m.ProbeNetwork{Address: "10.0.0.21/24", VLANID: 4095}, "vlanID"},
		} {
			bmc := validBMC("probe-net-" + strings.ReplaceAll(name, " ", "-"))
			bmc.Spec.ProbeNetwork = &tc.network
			requireInvalid(t, env.Client.Create(ctx, bmc), tc.want)
		}
		for _, ok := range []m.ProbeNetwork{
			{Address: "10.0.0.21/24", Gateway: "10.0.0.1", DNS: []string{"10.0.0.2"}, VLANID: 42, InterfaceMAC: "3c:ec:ef:01:02:03"},
			{Address: "10.0.0.7/32"}, {Address: "2001:db8::21/64", Gateway: "2001:db8::1"},
		} {
			bmc := validBMC("probe-net-ok")
			bmc.Spec.ProbeNetwork = &ok
			require.NoError(t, env.Client.Create(ctx, bmc), "%+v", ok)
			require.NoError(t, env.Client.Delete(ctx, bmc))
		}
	})

	t.Run("unknown boot method", func(t *testing.T) {
		bmc := validBMC("bad-boot-method")
		bmc.Spec.BootMethod = "USB"
		requireInvalid(t, env.Client.Create(ctx, bmc), "spec.bootMethod", `Unsupported value: "USB"`)
	})

	t.Run("BMC address without a scheme", func(t *testing.T) {
		bmc := validBMC("no-scheme")
		bmc.Spec.Access.Address = "10.0.0.5"
		requireInvalid(t, env.Client.Create(ctx, bmc), "address must be a BMC URL")
	})

	t.Run("malformed boot MAC address", func(t *testing.T) {
		server := &m.Server{ObjectMeta: meta("bad-boot-mac"), Spec: m.ServerSpec{BootMACAddress: "52:54:00:zz:01:02"}}
		requireInvalid(t, env.Client.Create(ctx, server), "spec.bootMACAddress", "six colon-separated hex octets")
	})

	t.Run("unknown power value", func(t *testing.T) {
		claim := validClaim("bad-power")
		claim.Spec.Power = "Maybe"
		requireInvalid(t, env.Client.Create(ctx, claim), "spec.power", `Unsupported value: "Maybe"`, `"On"`, `"Off"`)

		server := &m.Server{ObjectMeta: meta("bad-power"), Spec: m.ServerSpec{Power: "Standby"}}
		requireInvalid(t, env.Client.Create(ctx, server), "spec.power", `Unsupported value: "Standby"`)
	})

	t.Run("unknown wipe policy", func(t *testing.T) {
		server := &m.Server{ObjectMeta: meta("bad-wipe"), Spec: m.ServerSpec{WipePolicy: "shred"}}
		requireInvalid(t, env.Client.Create(ctx, server), "spec.wipePolicy", `Unsupported value: "shred"`)
	})

	t.Run("claim reference without the claim's UID", func(t *testing.T) {
		server := &m.Server{ObjectMeta: meta("hand-bound"), Spec: m.ServerSpec{
			ServerClaimRef: &m.ObjectReference{Namespace: ns, Name: "web"}}}
		requireInvalid(t, env.Client.Create(ctx, server), "spec.serverClaimRef", "must carry the claim's uid", "create a ServerClaim")
		server.Spec.ServerClaimRef.UID = "0b4d3c2a-0000-4000-8000-000000000001"
		require.NoError(t, env.Client.Create(ctx, server), "pinned, as the claim controller binds")
	})

	t.Run("BMCSecret credentials are immutable", func(t *testing.T) {
		secret := &m.BMCSecret{ObjectMeta: meta("immutable-creds"), Spec: m.BMCSecretSpec{Username: "admin", Password: "one"}}
		require.NoError(t, env.Client.Create(ctx, secret))
		secret.Spec.Password = "two"
		requireInvalid(t, env.Client.Update(ctx, secret), "BMCSecret credentials are immutable")
	})

	t.Run("boot configuration purpose", func(t *testing.T) {
		sbc := &m.ServerBootConfiguration{ObjectMeta: nsMeta("bad-purpose"), Spec: m.ServerBootConfigurationSpec{
			ServerRef: m.LocalObjectReference{Name: "s"}, Purpose: "Fun"}}
		requireInvalid(t, env.Client.Create(ctx, sbc), "spec.purpose", `Unsupported value: "Fun"`)
	})

	t.Run("selector expression without values", func(t *testing.T) {
		claim := validClaim("in-without-values")
		claim.Spec.ServerSelector = &m.ServerSelector{MatchExpressions: []m.ServerSelectorRequirement{{Key: "rack", Operator: metav1.LabelSelectorOpIn}}}
		requireInvalid(t, env.Client.Create(ctx, claim), "In and NotIn need at least one value")
		claim.Spec.ServerSelector.MatchExpressions[0] = m.ServerSelectorRequirement{Key: "rack", Operator: metav1.LabelSelectorOpExists, Values: []string{"r1"}}
		requireInvalid(t, env.Client.Create(ctx, claim), "Exists and DoesNotExist take none")
		claim.Spec.ServerSelector.MatchExpressions[0] = m.ServerSelectorRequirement{Key: "rack", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"r1"}}
		require.NoError(t, env.Client.Create(ctx, claim), "a valid expression is taken")
	})

	t.Run("firmware baseline", func(t *testing.T) {
		valid := func(name string) *m.FirmwareBaseline {
			return &m.FirmwareBaseline{ObjectMeta: meta(name), Spec: m.FirmwareBaselineSpec{
				Components: []m.BaselineComponent{{Component: "BIOS", Version: "2.19.1", Image: m.FirmwareImage{URL: "https://fw.example/bios.exe"}}}}}
		}
		b := valid("fwb-valid")
		require.NoError(t, env.Client.Create(ctx, b), "a valid baseline is taken")
		assert.Equal(t, m.MaintenanceOwnerApproval, b.Spec.Rollout.Policy, "claimed servers wait for their owners by default")
		assert.Equal(t, int32(1), b.Spec.Rollout.MaxFailures)
		assert.Equal(t, intstr.FromInt32(1), *b.Spec.Rollout.MaxUnavailable, "one server at a time by default")

		empty := &m.FirmwareBaseline{ObjectMeta: meta("fwb-empty")}
		requireInvalid(t, env.Client.Create(ctx, empty), "a baseline wants components, settings, or both")
		b = valid("fwb-ftp")
		b.Spec.Components[0].Image.URL = "ftp://fw.example/bios.exe"
		requireInvalid(t, env.Client.Create(ctx, b), "image url must be http:// or https://")
		b = valid("fwb-userinfo")
		b.Spec.Components[0].Image.URL = "https://admin:hunter2@fw.example/bios.exe"
		requireInvalid(t, env.Client.Create(ctx, b), "image url must not carry credentials")
		b = valid("fwb-md5")
		b.Spec.Components[0].Image.Checksum = "md5:0123"
		requireInvalid(t, env.Client.Create(ctx, b), "checksum must be sha256: followed by 64 lower-case hex digits")
		for _, bad := range []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("0%"), intstr.FromString("150%"), intstr.FromString("half")} {
			b = valid("fwb-unavailable")
			b.Spec.Rollout.MaxUnavailable = &bad
			requireInvalid(t, env.Client.Create(ctx, b), "maxUnavailable must be a number of at least 1 or a percentage from 1% to 100%")
		}
		b = valid("fwb-percent")
		b.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		require.NoError(t, env.Client.Create(ctx, b), "a percentage is taken")
	})

	t.Run("claim asks for zero cores", func(t *testing.T) {
		claim := validClaim("zero-cores")
		claim.Spec.MinCPUCores = ptr.To[int32](0)
		requireInvalid(t, env.Client.Create(ctx, claim), "spec.minCPUCores")
	})
}

func TestBoundClaimKeepsItsServerRefAndSelector(t *testing.T) {
	ctx := context.Background()

	claim := validClaim("bind-me")
	require.NoError(t, env.Client.Create(ctx, claim))

	// While Pending, the user may still change their mind.
	claim.Spec.ServerRef = &m.LocalObjectReference{Name: "server-b"}
	require.NoError(t, env.Client.Update(ctx, claim), "a pending claim's serverRef may change")

	claim.Status.Phase = m.ClaimPhaseBound
	claim.Status.ServerRef = &m.LocalObjectReference{Name: "server-b"}
	require.NoError(t, env.Client.Status().Update(ctx, claim))

	claim.Spec.ServerRef = &m.LocalObjectReference{Name: "server-c"}
	requireInvalid(t, env.Client.Update(ctx, claim), "serverRef cannot change once the claim is bound")

	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	claim.Spec.ServerRef = nil
	requireInvalid(t, env.Client.Update(ctx, claim), "cannot change once the claim is bound")

	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	claim.Spec.ServerSelector = &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"rack": "r1"}}
	requireInvalid(t, env.Client.Update(ctx, claim), "cannot change once the claim is bound")

	// Other fields of a bound claim remain editable: power is how users switch servers off.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	claim.Spec.Power = m.PowerOff
	require.NoError(t, env.Client.Update(ctx, claim), "power of a bound claim may change")
}

// table fetches a kind's list as a server-side Table, the way kubectl get renders it.
func table(t *testing.T, path string) metav1.Table {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(env.Config)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	// A resource's storage answers 429 "(re)initializing" for a moment after its CRD is
	// established: asked again, as the answer says.
	var status int
	var body []byte
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			return false, err
		}
		status = resp.StatusCode
		return status != http.StatusTooManyRequests, nil
	})
	require.NoError(t, err, "the last answer: %d %s", status, body)
	require.Equal(t, http.StatusOK, status, string(body))
	var tbl metav1.Table
	require.NoError(t, json.Unmarshal(body, &tbl))
	return tbl
}

func TestPrinterColumns(t *testing.T) {
	base := "/apis/metal.ironfleet.dev/v1alpha1/"
	want := map[string]string{
		"endpoints":                "Name MAC IP Manufacturer Protocol Matched BMC Age",
		"bmcs":                     "Name State Protocol Address Manufacturer Model Firmware Boot Ready Serial Last Seen Age",
		"bmcsecrets":               "Name Age",
		"servers":                  "Name State Power Health Claim Wipe CPUs Memory Disk Model Boot UUID BMC Reason Age",
		"serverclaims":             "Name Phase Server Power Provisioned Progress Image Reason Age",
		"serverbootconfigurations": "Name Server Purpose State Image Age",
		"servermaintenances":       "Name Server Policy State Power Reason Age",
		"serverfirmwares":          "Name BIOS BMC Baseline Compliant Update Read Age",
		"firmwarebaselines":        "Name Matched Compliant Updating Failed Rollout Valid Age",
	}
	for resource, columns := range want {
		t.Run(resource, func(t *testing.T) {
			tbl := table(t, base+resource)
			var got []string
			for _, c := range tbl.ColumnDefinitions {
				got = append(got, c.Name)
			}
			assert.Equal(t, columns, strings.Join(got, " "))
		})
	}
}

func TestBMCSecretColumnsNeverShowCredentials(t *testing.T) {
	ctx := context.Background()
	secret := &m.BMCSecret{ObjectMeta: meta("columns-creds"), Spec: m.BMCSecretSpec{Username: "root-user-xyz", Password: "hunter2-pass"}}
	require.NoError(t, env.Client.Create(ctx, secret))
	tbl := table(t, "/apis/metal.ironfleet.dev/v1alpha1/bmcsecrets/columns-creds")
	raw, err := json.Marshal(tbl.Rows[0].Cells)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "hunter2-pass")
	assert.NotContains(t, string(raw), "root-user-xyz")
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 64 << 20: "64.0 MiB",
		32246310297600: "29.3 TiB", 1 << 60: "1.0 EiB",
	} {
		assert.Equal(t, want, m.HumanBytes(n), "%d bytes", n)
	}
	assert.Nil(t, m.SummarizeInventory(nil))
	assert.Equal(t, &m.HardwareSummary{CPUs: 4}, m.SummarizeInventory(&m.Inventory{CPU: m.CPUSummary{Cores: 4}}), "no sizes: none shown")
}

// TestKubectlGetShowsTheStory runs the real kubectl against the control plane, as a user would.
func TestKubectlGetShowsTheStory(t *testing.T) {
	ctx := context.Background()
	kubectl := filepath.Join(env.Assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is built with the control plane by `make envtest`: %v", err)
	}

	claim := &m.ServerClaim{ObjectMeta: nsMeta("kubectl-claim"), Spec: m.ServerClaimSpec{Image: "oci://registry.example/os:1"}}
	require.NoError(t, env.Client.Create(ctx, claim))
	server := &m.Server{ObjectMeta: meta("kubectl-server"), Spec: m.ServerSpec{
		SystemUUID: "4c4c4544-0042-4a10-8039-b4c04f4d3732", ServerClaimRef: &m.ObjectReference{Namespace: ns, Name: "kubectl-claim", UID: string(claim.UID)}}}
	require.NoError(t, env.Client.Create(ctx, server))
	// Sizes as real disks have them: 8 × 3.84 TB is no whole number of KiB's powers, which a
	// Quantity prints as 30000000000Ki.
	inv := &m.Inventory{CPU: m.CPUSummary{Cores: 32}, Memory: m.MemorySummary{Total: ptr.To(resource.MustParse("256Gi"))},
		TotalStorage: resource.NewQuantity(8*3_840_000_000_000, resource.BinarySI)}
	server.Status = m.ServerStatus{State: m.ServerStateReserved, PowerState: m.PowerStateOn, Model: "PowerEdge R650",
		Inventory: inv, Hardware: m.SummarizeInventory(inv)}
	require.NoError(t, env.Client.Status().Update(ctx, server))
	claim.Status = m.ServerClaimStatus{Phase: m.ClaimPhaseBound, ServerRef: &m.LocalObjectReference{Name: "kubectl-server"}}
	require.NoError(t, env.Client.Status().Update(ctx, claim))

	kubeconfig, err := env.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kubeconfig, 0o600))

	out, err := exec.Command(kubectl, "--kubeconfig", path, "get", "servers,serverclaims", "-A").CombinedOutput()
	require.NoError(t, err, string(out))
	text := string(out)
	t.Logf("kubectl get servers,serverclaims -A:\n%s", text)
	for _, header := range []string{"STATE", "POWER", "CLAIM", "WIPE", "CPUS", "MEMORY", "DISK", "MODEL", "PHASE", "SERVER"} {
		assert.Contains(t, text, header)
	}
	assert.Regexp(t, `kubectl-server\s+Reserved\s+On\s+kubectl-claim\s+erase\s+32\s+256\.0 GiB\s+27\.9 TiB\s+PowerEdge R650`, text)
	assert.Regexp(t, `default\s+serverclaim\.metal\.ironfleet\.dev/kubectl-claim\s+Bound\s+kubectl-server\s+On`, text)

	out, err = exec.Command(kubectl, "--kubeconfig", path, "get", "metal").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "server.metal.ironfleet.dev/kubectl-server", "the metal category lists Servers")

	out, err = exec.Command(kubectl, "--kubeconfig", path, "get", "srv", "kubectl-server").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "kubectl-server", "the short name resolves")
}

// TestSamplesAreAccepted creates every sample in config/samples, so the shipped examples can
// never drift from the schema.
func TestSamplesAreAccepted(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "metal_*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 8, "one sample per kind people make (ServerFirmwares are the operator's)")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			obj := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal(data, &obj.Object))
			obj.SetName("sample-" + obj.GetName())
			require.NoError(t, env.Client.Create(context.Background(), obj))
		})
	}
}
