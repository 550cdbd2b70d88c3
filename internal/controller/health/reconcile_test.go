package health

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// TestSummarizeKeepsTheWorstFirstAndBounded: parts sorted worst first, then by kind and name;
// at most maxParts listed, the rest counted; the message names them.
func TestSummarizeKeepsTheWorstFirstAndBounded(t *testing.T) {
	h := bmc.Health{Rollup: bmc.HealthCritical}
	for i := range 10 {
		h.Components = append(h.Components, bmc.ComponentHealth{Kind: "Fan", Name: fmt.Sprintf("Fan%d", i), Health: bmc.HealthWarning})
	}
	h.Components = append(h.Components, bmc.ComponentHealth{Kind: "Memory", Name: "DIMM7", Health: bmc.HealthCritical})
	s := summarize(h)
	assert.Equal(t, metalv1alpha1.HealthCritical, s.State)
	assert.Len(t, s.Parts, maxParts)
	assert.Equal(t, metalv1alpha1.HealthPart{Kind: "Memory", Name: "DIMM7", Health: metalv1alpha1.HealthCritical}, s.Parts[0])
	assert.Equal(t, "Fan0", s.Parts[1].Name)
	assert.Equal(t, int32(11-maxParts), s.PartsNotShown)
	reason, message := judge(s)
	assert.Equal(t, metalv1alpha1.ReasonHealthCritical, reason)
	assert.Contains(t, message, "Memory DIMM7 is Critical; Fan Fan0 is Warning")
	assert.Contains(t, message, "and 3 more")

	reason, _ = judge(summarize(bmc.Health{Rollup: bmc.HealthOK}))
	assert.Equal(t, metalv1alpha1.ReasonHealthOK, reason)
	reason, _ = judge(summarize(bmc.Health{}))
	assert.Equal(t, metalv1alpha1.ReasonHealthUnsupported, reason, "a BMC that says nothing")
}

func TestWhichHealthTaints(t *testing.T) {
	for _, tc := range []struct {
		at       string
		warning  bool
		critical bool
	}{{"", false, true}, {"Critical", false, true}, {"Warning", true, true}, {"None", false, false}} {
		s := Settings{TaintAt: tc.at}
		assert.Equal(t, tc.warning, s.taints(metalv1alpha1.HealthWarning), tc.at)
		assert.Equal(t, tc.critical, s.taints(metalv1alpha1.HealthCritical), tc.at)
		assert.False(t, s.taints(metalv1alpha1.HealthOK), tc.at)
		assert.False(t, s.taints(""), tc.at)
	}
}
