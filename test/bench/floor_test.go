package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
)

// floorStates are the plain floor's lifecycle: create the Server, then one status write per
// transition the operator makes on the way to Available (→ Initial → Discovery → Available).
var floorStates = []metalv1alpha1.ServerState{metalv1alpha1.ServerStateInitial, metalv1alpha1.ServerStateDiscovery, metalv1alpha1.ServerStateAvailable}

const floorLabel = "bench.ironfleet.dev/floor"

// floors are the least a plain client needs for each phase, with the manager's QPS, burst and
// workers: what any operator would have to write, and nothing else.
type floors struct {
	enrollment, claims, release time.Duration
	// cpu is where the machine's CPU went during each, by phase.
	cpu map[string]PhaseCPU
}

// Writes per item of each floor: enrollment creates the Server and writes its status once per
// transition (floorStates); binding a claim writes the server's claim reference and the claim's
// status; releasing it writes the server's spec (reference gone, power off), its status with
// the wipe's report, and its status Available again.
const (
	floorClaimWrites   = 2
	floorReleaseWrites = 3
)

// runFloor performs the minimum writes of enrollment, of binding n/2 claims and of releasing
// them, with the manager's client limits and as many workers as each of its controllers has,
// then removes what it made. Only the floor's own writes are timed: the claims it binds are
// made before its clock starts and deleted after it stops, as a user would.
func runFloor(ctx context.Context, base *rest.Config, admin client.Client, cfg config, n int) (floors, error) {
	// Each floor starts with a client of its own: a full burst, as a manager that was idle has.
	// One client for all three would start each floor with what the one before left in its
	// rate limiter's bucket.
	var c client.Client
	fresh := func() error {
		rc := rest.CopyConfig(base)
		rc.QPS, rc.Burst = float32(cfg.qps), cfg.burst
		var err error
		c, err = client.New(rc, client.Options{Scheme: admin.Scheme()})
		return err
	}
	f := floors{cpu: map[string]PhaseCPU{}}
	timed := func(phase string, d *time.Duration, items int, work func(i int) error) error {
		if err := fresh(); err != nil {
			return err
		}
		before, err := sampleCPU(0)
		if err != nil {
			return err
		}
		start := time.Now()
		err = lab.Parallel(cfg.concurrency, items, work)
		*d = time.Since(start)
		after, cpuErr := sampleCPU(0)
		f.cpu[phase] = after.since(before)
		return errors.Join(err, cpuErr)
	}
	server := func(i int) *metalv1alpha1.Server {
		return &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%06d", i), Labels: map[string]string{floorLabel: "true"}},
			Spec: metalv1alpha1.ServerSpec{SystemUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}}
	}
	claim := func(i int) *metalv1alpha1.ServerClaim {
		return &metalv1alpha1.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("floor-%06d", i), Labels: map[string]string{floorLabel: "true"}},
			Spec: metalv1alpha1.ServerClaimSpec{Power: metalv1alpha1.PowerOn}}
	}
	merge := func(obj client.Object, patch string) error {
		return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	mergeStatus := func(obj client.Object, patch string) error {
		return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	claims := n / 2
	made := make([]*metalv1alpha1.ServerClaim, claims) // as created, with their UIDs
	err := timed(phaseEnrollment, &f.enrollment, n, func(i int) error {
		s := server(i)
		if err := c.Create(ctx, s); err != nil {
			return err
		}
		for _, state := range floorStates {
			s.Status.State = state
			if err := c.Status().Update(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = lab.Parallel(64, claims, func(i int) error { made[i] = claim(i); return admin.Create(ctx, made[i]) })
	}
	if err == nil {
		err = timed(phaseClaims, &f.claims, claims, func(i int) error {
			cl := made[i]
			ref := fmt.Sprintf(`{"spec":{"serverClaimRef":{"namespace":%q,"name":%q,"uid":%q},"power":"On"}}`, cl.Namespace, cl.Name, cl.UID)
			if err := merge(server(i), ref); err != nil {
				return err
			}
			return mergeStatus(cl, fmt.Sprintf(`{"status":{"phase":"Bound","serverRef":{"name":%q}}}`, server(i).Name))
		})
	}
	if err == nil {
		err = timed(phaseRelease, &f.release, claims, func(i int) error {
			s := server(i)
			if err := merge(s, `{"spec":{"serverClaimRef":null,"power":"Off"}}`); err != nil {
				return err
			}
			if err := mergeStatus(s, `{"status":{"state":"Cleanup","conditions":[{"type":"Wiped","status":"True","reason":"Wiped","message":"every disk wiped and verified","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`); err != nil {
				return err
			}
			return mergeStatus(s, `{"status":{"state":"Available"}}`)
		})
	}
	if err != nil {
		return floors{}, err
	}
	if err := admin.DeleteAllOf(ctx, &metalv1alpha1.ServerClaim{}, client.InNamespace("default"), client.MatchingLabels{floorLabel: "true"}); err != nil {
		return floors{}, err
	}
	if err := admin.DeleteAllOf(ctx, &metalv1alpha1.Server{}, client.MatchingLabels{floorLabel: "true"}); err != nil {
		return floors{}, err
	}
	return f, waitFor(ctx, time.Minute+time.Duration(n)*10*time.Millisecond, "floor servers and claims deleted", func() (bool, string) {
		var servers metalv1alpha1.ServerList
		var claims metalv1alpha1.ServerClaimList
		if err := admin.List(ctx, &servers, client.MatchingLabels{floorLabel: "true"}, client.Limit(1)); err != nil {
			return false, err.Error()
		}
		if err := admin.List(ctx, &claims, client.MatchingLabels{floorLabel: "true"}, client.Limit(1)); err != nil {
			return false, err.Error()
		}
		return len(servers.Items)+len(claims.Items) == 0, "some left"
	})
}
