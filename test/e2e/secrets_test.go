package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/lab"
)

// TestNoSecretInLogsEventsOrStatus runs the tour, collecting every registry token the probes
// booted with, then looks for each BMC password and token in the operator's log, in every
// event, and in the status of every Ironfleet object. None may appear.
func TestNoSecretInLogsEventsOrStatus(t *testing.T) {
	ctx := context.Background()
	l := startLab(t, 3)

	// Tokens live in ignition Secrets only while a probe boot is pending: collect them as the
	// tour goes.
	tokens := map[string]bool{}
	var tokensMu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var secrets corev1.SecretList
			if l.Client.List(ctx, &secrets, client.InNamespace(lab.Namespace)) == nil {
				for _, s := range secrets.Items {
					if cfg, err := ignition.Parse(s.Data[ignition.SecretKey]); err == nil {
						tokensMu.Lock()
						tokens[cfg.Token] = true
						tokensMu.Unlock()
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	require.NoError(t, l.Tour(ctx, &testWriter{t: t}))
	close(stop)
	<-done

	secrets := []string{lab.Password, lab.WrongPassword}
	tokensMu.Lock()
	for tok := range tokens {
		secrets = append(secrets, tok)
	}
	tokensMu.Unlock()
	require.Greater(t, len(secrets), 2, "the tour booted probes with tokens")

	var evs eventsv1.EventList
	require.NoError(t, l.Client.List(ctx, &evs))
	var statuses []string
	for _, list := range []client.ObjectList{&m.EndpointList{}, &m.BMCList{}, &m.BMCSecretList{}, &m.ServerList{}, &m.ServerClaimList{}, &m.ServerBootConfigurationList{}, &m.ServerMaintenanceList{}} {
		require.NoError(t, l.Client.List(ctx, list))
		data, err := json.Marshal(list)
		require.NoError(t, err)
		var items struct {
			Items []struct {
				Status json.RawMessage `json:"status"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(data, &items))
		for _, it := range items.Items {
			statuses = append(statuses, string(it.Status))
		}
	}
	logText := operatorLog.String()
	require.NotEmpty(t, logText)
	for i, secret := range secrets {
		what := "token"
		if i < 2 {
			what = "BMC password"
		}
		require.NotContains(t, logText, secret, "a %s appears in the operator's log", what)
		for _, e := range evs.Items {
			require.NotContains(t, e.Note, secret, "a %s appears in event %s", what, e.Name)
		}
		for _, s := range statuses {
			require.False(t, strings.Contains(s, secret), "a %s appears in an object's status", what)
		}
	}
	t.Logf("scanned %d log bytes, %d events and %d statuses for %d secrets", len(logText), len(evs.Items), len(statuses), len(secrets))
}
