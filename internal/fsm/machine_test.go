package fsm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every machine the docs are generated from is well formed: states and events listed and used,
// every state reachable, no two guarded rows that could both hold.
func TestEveryMachineChecks(t *testing.T) {
	for _, g := range Generated {
		assert.NoError(t, g.Machine.Check(), g.Path)
	}
}

// Check catches the mistakes it is there for; a table that has them must fail it.
func TestCheckFindsBrokenTables(t *testing.T) {
	type st string
	type ev string
	type facts struct{ x bool }
	yes := Guard[facts]{Name: "x", Holds: func(f facts) bool { return f.x }}
	base := func() Machine[st, ev, facts] {
		return Machine[st, ev, facts]{
			Kind: "T", Initial: "A", States: []st{"A", "B"}, Events: []ev{"go", "back"},
			Rows:  []Row[st, ev, facts]{{Event: "go", From: []st{"A"}, To: "B"}, {Event: "back", From: []st{"B"}, To: "A"}},
			Cases: []facts{{false}, {true}},
		}
	}
	good := base()
	require.NoError(t, good.Check())

	for name, tc := range map[string]struct {
		edit func(*Machine[st, ev, facts])
		want string
	}{
		"unlisted state":    {func(m *Machine[st, ev, facts]) { m.Rows[0].To = "C" }, "state C not listed"},
		"unused state":      {func(m *Machine[st, ev, facts]) { m.States = append(m.States, "D") }, "state D is in no row"},
		"unlisted event":    {func(m *Machine[st, ev, facts]) { m.Rows[1].Event = "jump" }, "event not listed"},
		"unused event":      {func(m *Machine[st, ev, facts]) { m.Events = append(m.Events, "idle") }, "event idle is in no row"},
		"unreachable state": {func(m *Machine[st, ev, facts]) { m.Rows[0].From = []st{"B"} }, "state B cannot be reached"},
		"overlapping guards": {func(m *Machine[st, ev, facts]) {
			m.Rows = append(m.Rows, Row[st, ev, facts]{Event: "go", From: []st{"A"}, To: "A", Guard: yes})
		}, "both hold"},
	} {
		m := base()
		tc.edit(&m)
		err := m.Check()
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), tc.want, name)
		}
	}
}

// A row from a state to itself is allowed and leaves the state as it is; looplab calls that
// "no transition", which must not read as a refusal.
func TestSelfLoopIsAllowed(t *testing.T) {
	type st string
	m := Machine[st, string, struct{}]{Kind: "T", Initial: "A", States: []st{"A"}, Events: []string{"stay"},
		Rows: []Row[st, string, struct{}]{{Event: "stay", From: []st{"A"}, To: "A"}}}
	got, err := m.Next(context.Background(), "A", "stay", struct{}{})
	require.NoError(t, err)
	assert.Equal(t, st("A"), got)
	_, err = m.Next(context.Background(), "A", "leave", struct{}{})
	assert.ErrorIs(t, err, ErrRefused)
}
