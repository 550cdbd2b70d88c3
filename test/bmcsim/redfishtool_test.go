package bmcsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// redfishtool runs the DMTF's Python client (Debian package redfishtool) against a BMC over
// HTTPS (-S Always; redfishtool never verifies certificates) and returns its output.
func redfishtool(t *testing.T, b *bmcsim.BMC, password string, args ...string) (string, error) {
	t.Helper()
	tool, err := exec.LookPath("redfishtool")
	if err != nil {
		t.Fatalf("redfishtool is not installed; `make test-deps` installs it (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"-r", b.Host(), "-u", testUser, "-p", password, "-S", "Always"}
	out, err := exec.CommandContext(ctx, tool, append(base, args...)...).CombinedOutput()
	return string(out), err
}

func TestRedfishtoolListsAndPowersSystems(t *testing.T) {
	for _, tc := range []struct {
		profile bmcsim.Profile
		ids     []string
	}{
		{bmcsim.ProfileGeneric, []string{"1", "2"}},
		{bmcsim.ProfileDell, []string{"System.Embedded.1", "System.Embedded.2"}},
		{bmcsim.ProfileHPE, []string{"1", "2"}},                // trailing-slash links
		{bmcsim.ProfileOpenBMC, []string{"system", "system2"}}, // reset types only in ActionInfo
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			t.Parallel()
			b := start(t, bmcsim.Options{TLS: true, Profile: tc.profile,
				Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)}})

			out, err := redfishtool(t, b, testPass, "Systems", "list")
			require.NoError(t, err, out)
			var list struct {
				Members []struct {
					ID      string `json:"Id"`
					ODataID string `json:"@odata.id"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(out), &list), out)
			var ids []string
			for _, m := range list.Members {
				ids = append(ids, m.ID)
			}
			assert.ElementsMatch(t, tc.ids, ids)

			target := tc.ids[1]
			out, err = redfishtool(t, b, testPass, "Systems", "-I", target, "reset", "On")
			require.NoError(t, err, out)
			assert.Equal(t, "On", b.PowerState(target))
			assert.Equal(t, "Off", b.PowerState(tc.ids[0]), "only the chosen system")

			// The same with a session: redfishtool logs in, resets, and logs out again.
			out, err = redfishtool(t, b, testPass, "-A", "Session", "Systems", "-I", target, "reset", "ForceOff")
			require.NoError(t, err, out)
			assert.Equal(t, "Off", b.PowerState(target))
			st := b.Stats()
			assert.EqualValues(t, 1, st.SessionsCreated)
			assert.EqualValues(t, 1, st.SessionsDeleted)
			assert.EqualValues(t, 2, st.Resets)
		})
	}
}

func TestRedfishtoolIsRefusedWithAWrongPassword(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	out, err := redfishtool(t, b, "wrong", "Systems", "-I", "1", "reset", "On")
	require.Error(t, err, out)
	assert.Equal(t, "Off", b.PowerState("1"))
	assert.Positive(t, b.Stats().AuthFailures)
	assert.Zero(t, b.Stats().Resets)
}

// TestRedfishtoolInsertsAndEjectsVirtualMedia drives the CD slot with redfishtool's raw
// requests, following the action targets the BMC links (HPE's under its Manager, with
// trailing slashes).
func TestRedfishtoolInsertsAndEjectsVirtualMedia(t *testing.T) {
	for _, tc := range []struct {
		profile bmcsim.Profile
		slot    string
	}{
		{bmcsim.ProfileGeneric, "/redfish/v1/Systems/1/VirtualMedia/CD"},
		{bmcsim.ProfileHPE, "/redfish/v1/Managers/1/VirtualMedia/2/"},
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			t.Parallel()
			im := imageServer(t)
			b := start(t, bmcsim.Options{TLS: true, Profile: tc.profile})
			events := bmcsim.RecordMedia(b)
			id := b.SystemIDs()[0]

			out, err := redfishtool(t, b, testPass, "raw", "GET", tc.slot)
			require.NoError(t, err, out)
			var slot struct {
				MediaTypes []string
				Actions    map[string]struct {
					Target string `json:"target"`
				}
			}
			require.NoError(t, json.Unmarshal([]byte(out), &slot), out)
			assert.Contains(t, slot.MediaTypes, "CD")

			out, err = redfishtool(t, b, testPass, "raw", "POST", slot.Actions["#VirtualMedia.InsertMedia"].Target, "-d", `{"Image": "`+im.url("a")+`"}`)
			require.NoError(t, err, out)
			require.True(t, b.Media(id).Inserted)
			require.Len(t, events.Events(), 1)
			got, err := os.ReadFile(b.Media(id).Path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(im.data("a"), got))

			out, err = redfishtool(t, b, testPass, "raw", "POST", slot.Actions["#VirtualMedia.EjectMedia"].Target, "-d", `{}`)
			require.NoError(t, err, out)
			assert.False(t, b.Media(id).Inserted)
			assert.Len(t, events.Events(), 2)
		})
	}
}
