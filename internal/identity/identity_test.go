package identity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func TestWhichUUIDsCanIdentifyAMachine(t *testing.T) {
	for uuid, want := range map[string]string{
		"4c4c4544-0042-3510-8052-b7c04f564433":    "",
		" 4C4C4544-0042-3510-8052-B7C04F564433\n": "",
		// Supermicro derives UUIDs from a MAC: mostly zeros, but unique.
		"00000000-0000-0000-0000-0cc47a6b1c2d":   "",
		"":                                       "it has none",
		"   ":                                    "it has none",
		"not-a-uuid":                             "it is not a UUID",
		"4c4c4544004235108052b7c04f564433":       "it is not a UUID",
		"4c4c4544-0042-3510-8052-b7c04f56443g":   "it is not a UUID",
		"{4c4c4544-0042-3510-8052-b7c04f564433}": "it is not a UUID",
		"00000000-0000-0000-0000-000000000000":   "it is all zeros",
		"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF":   "it is all F",
		"fefefefe-fefe-fefe-fefe-fefefefefefe":   "every byte of it is the same",
		"58585858-5858-5858-5858-585858585858":   "every byte of it is the same",
		"12345678-ffff-ffff-ffff-ffffffffffff":   "all of it but the first field is F",
		"03000200-0400-0500-0006-000700080009":   "it is the AMI BIOS default UUID",
		"00020003-0004-0005-0006-000700080009":   "it is the AMI BIOS default UUID (pre-2.6 byte order)",
		"12345678-1234-5678-90AB-CDDEEFAABBCC":   "it is an OEM placeholder UUID",
		"4C4C4544-0000-2010-8020-80C04F202020":   "it is Dell's UUID of a board without a service tag",
	} {
		assert.Equal(t, want, Problem(uuid), "%q", uuid)
		assert.Equal(t, want == "", Usable(uuid), "%q", uuid)
	}
	for _, u := range Placeholders() {
		assert.False(t, Usable(u), u)
		assert.Equal(t, u, Normalize(u), "the list is spelled as Normalize spells UUIDs")
		assert.True(t, wellFormed(u), u)
	}
}

func TestServerUUIDIsTheUUIDOnlyOfAServerNamedByIt(t *testing.T) {
	server := func(name, uuid string) *metalv1alpha1.Server {
		return &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: metalv1alpha1.ServerSpec{SystemUUID: uuid}}
	}
	good := "4c4c4544-0042-3510-8052-b7c04f564433"
	assert.Equal(t, good, ServerUUID(server(good, good)))
	assert.Equal(t, good, ServerUUID(server(good, strings.ToUpper(good))), "case does not matter")
	assert.Empty(t, ServerUUID(server("bmc-1-system-2", good)), "named by BMC and Id: its UUID was shared or taken")
	assert.Empty(t, ServerUUID(server("bmc-1-system-2", "")))
	placeholder := "03000200-0400-0500-0006-000700080009"
	assert.Empty(t, ServerUUID(server(placeholder, placeholder)), "a Server an older Ironfleet named by a placeholder")
}
