package bmcsim_test

import (
	"sync"
	"testing"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// actionRecorder collects power actions as a host behind the BMC would receive them.
type actionRecorder struct {
	mu      sync.Mutex
	actions []bmcsim.PowerAction
}

func (r *actionRecorder) record(a bmcsim.PowerAction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.actions = append(r.actions, a)
}

// summary is each action as "ResetType From>To Boot", which reads well in a failed assertion.
func (r *actionRecorder) summary() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.actions))
	for i, a := range r.actions {
		out[i] = a.ResetType + " " + a.From + ">" + a.To + " " + string(a.Boot)
	}
	return out
}

func TestPowerActionHooksSeeEveryResetAndTransition(t *testing.T) {
	b := start(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0)}})
	var rec actionRecorder
	b.OnPowerAction(rec.record)
	sys := firstSystem(t, b)

	require.NoError(t, sys.SetBoot(redfish.Boot{
		BootSourceOverrideTarget:  redfish.PxeBootSourceOverrideTarget,
		BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}))
	for _, rt := range []redfish.ResetType{redfish.OnResetType, redfish.OnResetType, redfish.ForceRestartResetType,
		redfish.NmiResetType, redfish.GracefulShutdownResetType, redfish.PowerCycleResetType, redfish.ForceOffResetType} {
		require.NoError(t, sys.Reset(rt), "reset %s", rt)
	}
	b.SetPowerState("1", "On")
	b.SetPowerState("1", "On") // no transition, no action
	b.SetPowerState("1", "Off")

	assert.Equal(t, []string{
		"On Off>On Pxe",
		"On On>On ",
		"ForceRestart On>On Hdd",
		"Nmi On>On ",
		"GracefulShutdown On>Off ",
		"PowerCycle Off>On Hdd",
		"ForceOff On>Off ",
		" Off>On Hdd",
		" On>Off ",
	}, rec.summary())
	rec.mu.Lock()
	assert.Equal(t, bmcsim.DefaultSystem(0).UUID, rec.actions[0].UUID)
	assert.Equal(t, "1", rec.actions[0].SystemID)
	rec.mu.Unlock()
}

func TestGracefulShutdownWaitsForAHostThatShutsDownItself(t *testing.T) {
	b := start(t, bmcsim.Options{Profile: bmcsim.ProfileDell})
	var rec actionRecorder
	b.OnPowerAction(rec.record)
	sys := firstSystem(t, b)
	require.False(t, b.SetHostShutsDown("nope", true), "unknown system")
	require.True(t, b.SetHostShutsDown(sys.ID, true))

	require.NoError(t, sys.Reset(redfish.OnResetType))
	require.NoError(t, sys.Reset(redfish.GracefulShutdownResetType))
	assert.Equal(t, "On", b.PowerState(sys.ID), "the host has not stopped yet")
	require.NoError(t, sys.Reset(redfish.PushPowerButtonResetType))
	assert.Equal(t, "On", b.PowerState(sys.ID), "a short press only asks the host")
	b.SetPowerState(sys.ID, "Off") // the host stopped
	assert.Equal(t, "Off", b.PowerState(sys.ID))
	require.NoError(t, sys.Reset(redfish.PushPowerButtonResetType))
	assert.Equal(t, "On", b.PowerState(sys.ID), "pressing the button of an off host powers it on")

	assert.Equal(t, []string{
		"On Off>On Hdd",
		"GracefulShutdown On>On ",
		"PushPowerButton On>On ",
		" On>Off ",
		"PushPowerButton Off>On Hdd",
	}, rec.summary())
}

// firstSystem reads the BMC's first system through gofish.
func firstSystem(t *testing.T, b *bmcsim.BMC) *redfish.ComputerSystem {
	t.Helper()
	systems, err := connect(t, b, true).Service.Systems()
	require.NoError(t, err)
	require.NotEmpty(t, systems)
	return systems[0]
}
