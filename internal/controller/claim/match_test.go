package claim

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func TestMatches(t *testing.T) {
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", Labels: map[string]string{"rack": "r1", "gpu": "h100"}},
		Status: m.ServerStatus{State: m.ServerStateAvailable, Inventory: &m.Inventory{
			CPU:          m.CPUSummary{Cores: 32},
			Memory:       m.MemorySummary{Total: ptr.To(resource.MustParse("256Gi"))},
			TotalStorage: ptr.To(resource.MustParse("4Ti")),
		}}}
	cases := map[string]struct {
		spec m.ServerClaimSpec
		want bool
	}{
		"anything":          {m.ServerClaimSpec{}, true},
		"by name":           {m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "s1"}}, true},
		"other name":        {m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "s2"}}, false},
		"labels":            {m.ServerClaimSpec{ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"rack": "r1"}}}, true},
		"other labels":      {m.ServerClaimSpec{ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"rack": "r2"}}}, false},
		"expression":        {m.ServerClaimSpec{ServerSelector: &m.ServerSelector{MatchExpressions: []m.ServerSelectorRequirement{{Key: "gpu", Operator: metav1.LabelSelectorOpExists}}}}, true},
		"enough cores":      {m.ServerClaimSpec{MinCPUCores: ptr.To[int32](32)}, true},
		"too many cores":    {m.ServerClaimSpec{MinCPUCores: ptr.To[int32](33)}, false},
		"enough memory":     {m.ServerClaimSpec{MinMemory: ptr.To(resource.MustParse("128Gi"))}, true},
		"too much memory":   {m.ServerClaimSpec{MinMemory: ptr.To(resource.MustParse("512Gi"))}, false},
		"enough disk":       {m.ServerClaimSpec{MinTotalDisk: ptr.To(resource.MustParse("4Ti"))}, true},
		"too much disk":     {m.ServerClaimSpec{MinTotalDisk: ptr.To(resource.MustParse("5Ti"))}, false},
		"name and selector": {m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "s1"}, ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"rack": "r2"}}}, false},
	}
	for name, c := range cases {
		got, err := matches(&m.ServerClaim{Spec: c.spec}, server)
		require.NoError(t, err, name)
		assert.Equal(t, c.want, got, name)
	}

	noInventory := server.DeepCopy()
	noInventory.Status.Inventory = nil
	got, _ := matches(&m.ServerClaim{Spec: m.ServerClaimSpec{MinCPUCores: ptr.To[int32](1)}}, noInventory)
	assert.False(t, got, "a requirement the inventory cannot answer is not met")
}

// TestMatchesBootMode: a claim's bootMode takes a server found booting that mode whose own
// spec.bootMode does not ask for another; a server found in a mode its spec does not ask for
// (BootMode=False) goes to no claim that names a mode.
func TestMatchesBootMode(t *testing.T) {
	server := func(spec, found m.BootMode) *m.Server {
		return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, Spec: m.ServerSpec{BootMode: spec},
			Status: m.ServerStatus{State: m.ServerStateAvailable, BootMode: found, BootModeSource: m.BootModeSourceProbe}}
	}
	cases := []struct {
		name        string
		claim       m.BootMode
		spec, found m.BootMode
		want        bool
	}{
		{"no mode asked: any server", "", m.BootModeUEFI, m.BootModeLegacy, true},
		{"no mode asked, none known", "", "", "", true},
		{"found so", m.BootModeUEFISecureBoot, "", m.BootModeUEFISecureBoot, true},
		{"found so, and asked so", m.BootModeUEFISecureBoot, m.BootModeUEFISecureBoot, m.BootModeUEFISecureBoot, true},
		{"found with Secure Boot off", m.BootModeUEFISecureBoot, "", m.BootModeUEFI, false},
		{"Secure Boot asked of the server, found off (mismatch)", m.BootModeUEFISecureBoot, m.BootModeUEFISecureBoot, m.BootModeUEFI, false},
		{"found with Secure Boot, the server asked not to (mismatch)", m.BootModeUEFISecureBoot, m.BootModeUEFI, m.BootModeUEFISecureBoot, false},
		{"found Legacy", m.BootModeUEFI, "", m.BootModeLegacy, false},
		{"UEFI is not UEFISecureBoot", m.BootModeUEFI, "", m.BootModeUEFISecureBoot, false},
		{"not known yet", m.BootModeLegacy, "", "", false},
		{"known only as asked", m.BootModeLegacy, m.BootModeLegacy, "", false},
		{"Legacy found so", m.BootModeLegacy, "", m.BootModeLegacy, true},
	}
	for _, c := range cases {
		got, err := matches(&m.ServerClaim{Spec: m.ServerClaimSpec{BootMode: c.claim}}, server(c.spec, c.found))
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}

	pool := []*m.Server{server("", m.BootModeUEFI), server(m.BootModeUEFISecureBoot, m.BootModeUEFI)}
	reqs, err := requirements(&m.ServerClaim{Spec: m.ServerClaimSpec{BootMode: m.BootModeUEFISecureBoot}})
	require.NoError(t, err)
	assert.Equal(t, "no Available server boots UEFISecureBoot (spec.bootMode); the claim binds as soon as one does", noMatchMessage(reqs, pool))
}

func TestBindable(t *testing.T) {
	s := &m.Server{Status: m.ServerStatus{State: m.ServerStateAvailable}}
	assert.True(t, bindable(s))
	claimed := s.DeepCopy()
	claimed.Spec.ServerClaimRef = &m.ObjectReference{Namespace: "a", Name: "b"}
	assert.False(t, bindable(claimed))
	maint := s.DeepCopy()
	maint.Spec.MaintenanceRef = &m.ObjectReference{Namespace: "a", Name: "b"}
	assert.False(t, bindable(maint))
	cleanup := s.DeepCopy()
	cleanup.Status.State = m.ServerStateCleanup
	assert.False(t, bindable(cleanup))
}

func TestSpecPatchOpsChangeOnlyWhatChanged(t *testing.T) {
	held := &m.ServerSpec{SystemUUID: "u", Power: m.PowerOn,
		ServerClaimRef:       &m.ObjectReference{Namespace: "default", Name: "c", UID: "1"},
		BootConfigurationRef: &m.ObjectReference{Namespace: "default", Name: "c", UID: "2"}}
	released := held.DeepCopy()
	released.ServerClaimRef, released.BootConfigurationRef, released.Power = nil, nil, ""
	ops, err := specPatchOps(held, released)
	require.NoError(t, err)
	data, err := json.Marshal(ops)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"remove","path":"/spec/bootConfigurationRef"},{"op":"remove","path":"/spec/power"},{"op":"remove","path":"/spec/serverClaimRef"}]`, string(data))

	off := held.DeepCopy()
	off.Power = m.PowerOff
	ops, err = specPatchOps(held, off)
	require.NoError(t, err)
	data, err = json.Marshal(ops)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/spec/power","value":"Off"}]`, string(data))

	ops, err = specPatchOps(held, held.DeepCopy())
	require.NoError(t, err)
	assert.Empty(t, ops, "no change, no patch")
}

func TestNoMatchMessageNamesWhatNoServerHas(t *testing.T) {
	small := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "small", Labels: map[string]string{"rack": "r1"}},
		Status: m.ServerStatus{Inventory: &m.Inventory{CPU: m.CPUSummary{Cores: 8}, Memory: m.MemorySummary{Total: ptr.To(resource.MustParse("32Gi"))}}}}
	big := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{"rack": "r2"}},
		Status: m.ServerStatus{Inventory: &m.Inventory{CPU: m.CPUSummary{Cores: 64}, Memory: m.MemorySummary{Total: ptr.To(resource.MustParse("512Gi"))}}}}
	pool := []*m.Server{small, big}
	message := func(spec m.ServerClaimSpec, pool []*m.Server) string {
		reqs, err := requirements(&m.ServerClaim{Spec: spec})
		require.NoError(t, err)
		for _, s := range pool {
			require.False(t, meetsAll(reqs, s), "the case needs a claim no server matches")
		}
		return noMatchMessage(reqs, pool)
	}

	assert.Equal(t, "no server is Available; the claim binds as soon as one is", message(m.ServerClaimSpec{MinCPUCores: ptr.To[int32](1)}, nil))
	assert.Equal(t, "no Available server has 1Ti of memory or more (spec.minMemory); the claim binds as soon as one does",
		message(m.ServerClaimSpec{MinMemory: ptr.To(resource.MustParse("1Ti"))}, pool))
	assert.Equal(t, "no Available server is server s9 (spec.serverRef), and none has 100 CPU cores or more (spec.minCPUCores); the claim binds as soon as one does",
		message(m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "s9"}, MinCPUCores: ptr.To[int32](100), MinMemory: ptr.To(resource.MustParse("16Gi"))}, pool))
	assert.Equal(t, "no Available server has 1Ti of disk or more (spec.minTotalDisk); the claim binds as soon as one does",
		message(m.ServerClaimSpec{MinTotalDisk: ptr.To(resource.MustParse("1Ti"))}, pool), "a server without the figure does not meet it")
	assert.Equal(t, "each requirement is met by an Available server, but none meets them all: it has labels rack=r1 (spec.serverSelector), has 64 CPU cores or more (spec.minCPUCores); the claim binds as soon as one does",
		message(m.ServerClaimSpec{ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"rack": "r1"}}, MinCPUCores: ptr.To[int32](64)}, pool))

	// A taint is named once it keeps a server off the claim.
	retired := big.DeepCopy()
	retired.Spec.Taints = []m.Taint{{Key: "example.com/retire", Effect: m.TaintNoClaim}}
	assert.Equal(t, "each requirement is met by an Available server, but none meets them all: it has 64 CPU cores or more (spec.minCPUCores), is free of NoClaim taints the claim does not tolerate (spec.tolerations); the claim binds as soon as one does",
		message(m.ServerClaimSpec{MinCPUCores: ptr.To[int32](64)}, []*m.Server{small, retired}))
	assert.Equal(t, "no Available server is free of NoClaim taints the claim does not tolerate (spec.tolerations); the claim binds as soon as one does",
		message(m.ServerClaimSpec{}, []*m.Server{retired}))
}

func TestRendezvousSpreadsClaimsAndKeepsTheirChoice(t *testing.T) {
	servers := make([]string, 100)
	for i := range servers {
		servers[i] = fmt.Sprintf("server-%03d", i)
	}
	first := func(claim string, among []string) string {
		best, score := "", uint64(0)
		for _, s := range among {
			if h := rendezvous(claim, s); best == "" || h > score {
				best, score = s, h
			}
		}
		return best
	}
	chosen := map[string]bool{}
	for i := range 100 {
		claim := fmt.Sprintf("uid-%d", i)
		pick := first(claim, servers)
		chosen[pick] = true
		// Taking away servers the claim did not choose leaves its choice alone.
		var others []string
		for j, s := range servers {
			if s == pick || j%3 != i%3 {
				others = append(others, s)
			}
		}
		assert.Less(t, len(others), len(servers)-30)
		assert.Equal(t, pick, first(claim, others), claim)
	}
	// 100 claims over 100 servers: uniform choices would leave about 63 distinct; all on a few
	// servers would mean racing claims start at the same one.
	assert.Greater(t, len(chosen), 45, "claims should start at different servers")
	assert.NotEqual(t, rendezvous("a", "bc"), rendezvous("ab", "c"), "the separator keeps claim and server apart")
}

// TestANoClaimTaintKeepsClaimsOff: a NoClaim taint, whoever set it, keeps off every claim that
// does not tolerate it, matched as Kubernetes matches tolerations (key, value by operator,
// effect); a PreferNoClaim taint keeps none off; Ironfleet's own taints are tolerated only by
// name, and its firmware-update taint by no claim.
func TestANoClaimTaintKeepsClaimsOff(t *testing.T) {
	server := func(taints ...m.Taint) *m.Server {
		return &m.Server{Spec: m.ServerSpec{Taints: taints}, Status: m.ServerStatus{State: m.ServerStateAvailable}}
	}
	claim := func(tolerations ...m.Toleration) *m.ServerClaim {
		return &m.ServerClaim{Spec: m.ServerClaimSpec{Tolerations: tolerations}}
	}
	takes := func(c *m.ServerClaim, s *m.Server) bool {
		ok, err := matches(c, s)
		require.NoError(t, err)
		return ok && bindable(s)
	}
	retire := m.Taint{Key: "example.com/retire", Value: "rack-7", Effect: m.TaintNoClaim}
	firmware := m.Taint{Key: m.TaintFirmwareUpdate, Effect: m.TaintNoClaim}
	unhealthy := m.Taint{Key: "metal.ironfleet.dev/unhealthy", Value: "Critical", Effect: m.TaintNoClaim}
	assert.True(t, takes(claim(), server()))
	assert.False(t, takes(claim(), server(firmware)))
	assert.False(t, takes(claim(), server(retire)))
	assert.True(t, takes(claim(), server(m.Taint{Key: "example.com/trial", Effect: m.TaintPreferNoClaim})))

	for _, tc := range []struct {
		toleration m.Toleration
		taint      m.Taint
		tolerated  bool
	}{
		{m.Toleration{Key: "example.com/retire", Operator: m.TolerationEqual, Value: "rack-7"}, retire, true},
		{m.Toleration{Key: "example.com/retire", Operator: m.TolerationEqual, Value: "rack-8"}, retire, false},
		{m.Toleration{Key: "example.com/retire", Operator: m.TolerationExists}, retire, true},
		{m.Toleration{Key: "example.com/retire", Operator: m.TolerationExists, Effect: m.TaintPreferNoClaim}, retire, false},
		{m.Toleration{Key: "example.com/retire", Operator: m.TolerationExists, Effect: m.TaintNoClaim}, retire, true},
		{m.Toleration{Key: "example.com/other", Operator: m.TolerationExists}, retire, false},
		{m.Toleration{Operator: m.TolerationExists}, retire, true},
		{m.Toleration{Operator: m.TolerationExists}, unhealthy, false},
		{m.Toleration{Key: "metal.ironfleet.dev/unhealthy", Operator: m.TolerationExists}, unhealthy, true},
		{m.Toleration{Operator: m.TolerationExists}, firmware, false},
		{m.Toleration{Key: m.TaintFirmwareUpdate, Operator: m.TolerationExists}, firmware, false},
	} {
		assert.Equal(t, tc.tolerated, takes(claim(tc.toleration), server(tc.taint)), "%+v tolerates %+v", tc.toleration, tc.taint)
	}
	assert.False(t, takes(claim(m.Toleration{Key: "example.com/retire", Operator: m.TolerationExists}), server(retire, unhealthy)),
		"every NoClaim taint must be tolerated")
}
