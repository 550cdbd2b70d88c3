package bmcsim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func TestWhatTheHostReadsInBand(t *testing.T) {
	own := bmcsim.DefaultSystem(3).UUID
	for q, want := range map[bmcsim.Quirks]string{
		{}:                            own,
		{NoSystemUUID: true}:          own, // the BMC hides it; SMBIOS has it
		{SameUUIDEverywhere: true}:    own, // the BMC repeats another's; SMBIOS has its own
		{ZeroSystemUUID: true}:        bmcsim.ZeroUUID,
		{AllFSystemUUID: true}:        bmcsim.AllFUUID,
		{PlaceholderSystemUUID: true}: bmcsim.PlaceholderUUID,
	} {
		assert.Equal(t, want, q.HostUUID(own), "%+v", q)
	}
}

func TestSystemIDsAreTheProfilesNamesInOrder(t *testing.T) {
	b := start(t, bmcsim.Options{Profile: bmcsim.ProfileOpenBMC, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)}})
	assert.Equal(t, []string{"system", "system2"}, b.SystemIDs())
	assert.True(t, b.Quirks().NoSystemUUID, "the profile's quirks")
	q, err := bmcsim.ProfileQuirks(bmcsim.ProfileSupermicro)
	require.NoError(t, err)
	assert.True(t, q.SameUUIDEverywhere, "a caller can add to a profile's quirks")
	_, err = bmcsim.ProfileQuirks("cray")
	assert.Error(t, err)
}
