package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/cli"
	"github.com/ironfleet/ironfleet/metalprobe/collect"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/test/lab"
)

// objectModelRequests are, per phase, the requests the object model needs for one item of it
// (a server enrolled, a claim bound, a server released), in the order the object-model floor
// sends them, as the apiserver counts them ("VERB resource[/subresource]"). What a user sends
// (the Endpoint, the claim and its deletion) is in the list: the operator's phases are timed
// from them too. docs/bench/README.md lists them with the object each one makes or changes.
var objectModelRequests = map[string][]string{
	phaseEnrollment: {
		"POST endpoints", "PATCH endpoints/status", // the user's Endpoint; its vendor and BMC
		"POST bmcsecrets", "POST bmcs", "PATCH bmcs/status", // the BMC's credentials, the BMC, its first look
		"POST servers", "PATCH servers/status", // the Server; Discovery, naming its probe boot
		"POST secrets", "POST serverbootconfigurations", // the probe boot's ignition and configuration
		"PATCH serverbootconfigurations/status", // the boot service: Ready
		"PATCH servers/status",                  // the probe's report: inventory, Available
		"DELETE serverbootconfigurations", "DELETE secrets",
	},
	phaseClaims: {
		"POST serverclaims", "PUT serverclaims", // the user's claim; the operator's finalizer
		"PATCH servers", "PATCH servers/status", // the server's claim reference and power; Reserved
		"PATCH serverclaims/status", // Bound, its server
	},
	phaseRelease: {
		"DELETE serverclaims",                   // the user's
		"PATCH servers", "PATCH servers/status", // reference gone, power off; Cleanup
		"POST secrets", "POST serverbootconfigurations", // the wipe boot
		"PATCH serverbootconfigurations/status", // the boot service: Ready
		"PATCH servers/status",                  // the wipe's report, Available
		"DELETE serverbootconfigurations", "DELETE secrets",
		"PATCH serverclaims", // the claim's finalizer gone: the claim goes
	},
}

// objectModelItems is how many items a phase of a run at n servers has: every server enrolls,
// half of them are claimed and released.
func objectModelItems(phase string, n int) int {
	if phase == phaseEnrollment {
		return n
	}
	return n / 2
}

// expectedObjectModelCounts is what the apiserver should count for a phase of the object-model
// floor at n servers: its list times its items.
func expectedObjectModelCounts(phase string, n int) map[string]float64 {
	out := map[string]float64{}
	for _, r := range objectModelRequests[phase] {
		out[r] += float64(objectModelItems(phase, n))
	}
	return out
}

// countMismatch says how counted requests differ from expected ones ("" when they do not):
// the floor is to make exactly its list, and nothing else may have sent these while it ran.
func countMismatch(expected, counted map[string]float64) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(expected)) {
		if counted[k] != expected[k] {
			diffs = append(diffs, fmt.Sprintf("%s %g (want %g)", k, counted[k], expected[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(counted)) {
		if _, ok := expected[k]; !ok && counted[k] != 0 {
			diffs = append(diffs, fmt.Sprintf("%s %g (want 0)", k, counted[k]))
		}
	}
	return strings.Join(diffs, ", ")
}

// objectModelFloor is the object-model floor's measurement: its time per phase, where the CPU
// went, and the apiserver's count of its requests (per server of the fleet, like the
// operator's phases) with how they differ from objectModelRequests, if they do.
type objectModelFloor struct {
	seconds  map[string]float64
	cpu      map[string]PhaseCPU
	requests map[string]map[string]float64
	mismatch map[string]string
}

// objectModelFloorPhase is the key of a phase's object-model floor in Result.CPU and
// Result.APIServerRequestsPerServer.
func objectModelFloorPhase(phase string) string { return "object-model floor " + phase }

// objectModelEnv is what the object-model floor needs of the lab.
type objectModelEnv struct {
	base  *rest.Config
	admin client.Client // the user's requests, as the benchmark's client sends them in the operator's phases
	// claim is the claim a user makes (the lab's sample claim), named.
	claim func(name string) *metalv1alpha1.ServerClaim
	// probeImage and caPEM are what a probe boot's configuration and ignition carry.
	probeImage, caPEM string
}

// runObjectModelFloor makes, for each phase, exactly the object model's requests
// (objectModelRequests) for n servers, with the manager's QPS, burst and workers, before the
// operator runs, then removes what it made. Its boot configurations carry lab.LabelUnserved:
// the floor plays the boot service too, so the lab's own leaves them alone.
func runObjectModelFloor(ctx context.Context, env objectModelEnv, cfg config, n int) (objectModelFloor, error) {
	inventories, err := fixtureInventories(ctx)
	if err != nil {
		return objectModelFloor{}, err
	}
	f := objectModelFloor{seconds: map[string]float64{}, cpu: map[string]PhaseCPU{}, requests: map[string]map[string]float64{}, mismatch: map[string]string{}}
	var c client.Client
	timed := func(phase string, work func(i int) error) error {
		// A client of its own per phase, as the plain floor's: a full burst.
		rc := rest.CopyConfig(env.base)
		rc.QPS, rc.Burst = float32(cfg.qps), cfg.burst
		if c, err = client.New(rc, client.Options{Scheme: env.admin.Scheme()}); err != nil {
			return err
		}
		// Its kinds' discovery, which a manager does once at start, before the clock.
		for _, obj := range []client.Object{&metalv1alpha1.Endpoint{}, &metalv1alpha1.BMCSecret{}, &metalv1alpha1.BMC{}, &metalv1alpha1.Server{},
			&metalv1alpha1.ServerBootConfiguration{}, &metalv1alpha1.ServerClaim{}, &corev1.Secret{}} {
			if _, err := c.IsObjectNamespaced(obj); err != nil {
				return err
			}
		}
		countsBefore, err := apiserverCounts(ctx, env.base)
		if err != nil {
			return err
		}
		before, err := sampleCPU(0)
		if err != nil {
			return err
		}
		start := time.Now()
		err = lab.Parallel(cfg.concurrency, objectModelItems(phase, n), work)
		f.seconds[phase] = time.Since(start).Seconds()
		after, cpuErr := sampleCPU(0)
		f.cpu[phase] = after.since(before)
		countsAfter, countErr := apiserverCounts(ctx, env.base)
		if err = errors.Join(err, cpuErr, countErr); err != nil {
			return err
		}
		f.requests[phase] = perServer(countsBefore, countsAfter, n)
		counted := map[string]float64{}
		for k, v := range countsAfter {
			if d := v - countsBefore[k]; d != 0 {
				counted[k] = d
			}
		}
		f.mismatch[phase] = countMismatch(expectedObjectModelCounts(phase, n), counted)
		return nil
	}
	name := func(i int) string { return fmt.Sprintf("floor-om-%06d", i) }
	labels := map[string]string{floorLabel: "true"}
	sbcLabels := map[string]string{floorLabel: "true", lab.LabelUnserved: "true"}
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	status := func(obj client.Object, v any) error {
		data, err := json.Marshal(map[string]any{"status": v})
		if err != nil {
			return err
		}
		return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	}
	ready := func(reason string) []map[string]any {
		return []map[string]any{{"type": "Ready", "status": "True", "reason": reason, "message": reason, "lastTransitionTime": now()}}
	}
	// probeBoot makes a probe boot's ignition Secret and configuration, and marks it Ready as
	// the boot service would (3 requests).
	probeBoot := func(server string, purpose metalv1alpha1.BootPurpose, mode ignition.Mode) error {
		ic := ignition.Config{RegistryURL: "https://registry.ironfleet-system.svc:8443", RegistryCA: env.caPEM,
			Token: strings.Repeat("t", 64), Server: server, Mode: mode}
		if mode == ignition.ModeWipe {
			ic.WipePolicy = metalv1alpha1.DefaultWipePolicy
		}
		ign, err := ignition.Render(ic)
		if err != nil {
			return err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: lab.Namespace, Name: server + "-ignition", Labels: labels},
			Data: map[string][]byte{ignition.SecretKey: ign}}
		if err := c.Create(ctx, secret); err != nil {
			return err
		}
		sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: lab.Namespace, Name: server, Labels: sbcLabels,
			Annotations: map[string]string{metalv1alpha1.AnnotationProbeBoot: server + "-1"}},
			Spec: metalv1alpha1.ServerBootConfigurationSpec{ServerRef: metalv1alpha1.LocalObjectReference{Name: server}, Image: env.probeImage,
				IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name}, Purpose: purpose}}
		if err := c.Create(ctx, sbc); err != nil {
			return err
		}
		return status(sbc, map[string]any{"state": "Ready", "conditions": ready("Served")})
	}
	endProbeBoot := func(server string) error {
		if err := c.Delete(ctx, &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: lab.Namespace, Name: server}}); err != nil {
			return err
		}
		return c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: lab.Namespace, Name: server + "-ignition"}})
	}
	serverRef := func(i int) *metalv1alpha1.Server {
		return &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name(i)}}
	}

	claims := make([]*metalv1alpha1.ServerClaim, n/2)
	err = timed(phaseEnrollment, func(i int) error {
		ep := &metalv1alpha1.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: labels},
			Spec: metalv1alpha1.EndpointSpec{MACAddress: fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", i>>24&0xff, i>>16&0xff, i>>8&0xff, i&0xff),
				IP: fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}}
		if err := env.admin.Create(ctx, ep); err != nil {
			return err
		}
		if err := status(ep, map[string]any{"macPrefix": "02:00:00", "manufacturer": "Supermicro", "protocol": "Redfish", "scheme": "https", "port": 443,
			"bmcRef": map[string]any{"name": name(i)}, "observedGeneration": 1, "conditions": ready("BMCCreated")}); err != nil {
			return err
		}
		secret := &metalv1alpha1.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: labels},
			Spec: metalv1alpha1.BMCSecretSpec{Username: "ADMIN", Password: "ADMIN"}}
		if err := c.Create(ctx, secret); err != nil {
			return err
		}
		b := &metalv1alpha1.BMC{ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: labels}, Spec: metalv1alpha1.BMCSpec{
			EndpointRef: &metalv1alpha1.LocalObjectReference{Name: name(i)}, BMCSecretRef: metalv1alpha1.LocalObjectReference{Name: name(i)}}}
		if err := c.Create(ctx, b); err != nil {
			return err
		}
		if err := status(b, map[string]any{"state": "Enabled", "address": "redfish+https://" + ep.Spec.IP + "/redfish/v1", "protocol": "Redfish",
			"manufacturer": "Supermicro", "model": "X12", "serialNumber": name(i), "macAddress": ep.Spec.MACAddress, "firmwareVersion": "1.0",
			"powerState": "Off", "lastSeen": now(), "observedGeneration": 1, "conditions": ready("Connected")}); err != nil {
			return err
		}
		server := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: labels}, Spec: metalv1alpha1.ServerSpec{
			SystemUUID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i), SystemURI: "/redfish/v1/Systems/1",
			BMCRef: &metalv1alpha1.LocalObjectReference{Name: name(i)}}}
		if err := c.Create(ctx, server); err != nil {
			return err
		}
		if err := status(server, map[string]any{"state": "Discovery", "probeBoot": name(i) + "-1", "lastTransitionTime": now()}); err != nil {
			return err
		}
		if err := probeBoot(name(i), metalv1alpha1.BootPurposeDiscovery, ignition.ModeDiscovery); err != nil {
			return err
		}
		if err := status(server, map[string]any{"state": "Available", "probeBoot": nil, "inventory": inventories[i%len(inventories)],
			"lastTransitionTime": now()}); err != nil {
			return err
		}
		return endProbeBoot(name(i))
	})
	if err == nil {
		err = timed(phaseClaims, func(i int) error {
			cl := env.claim(name(i))
			cl.Labels = labels
			if err := env.admin.Create(ctx, cl); err != nil {
				return err
			}
			cl.Finalizers = append(cl.Finalizers, "metal.ironfleet.dev/claim")
			if err := c.Update(ctx, cl); err != nil {
				return err
			}
			claims[i] = cl
			ref, err := json.Marshal(map[string]any{"spec": map[string]any{"power": "On",
				"serverClaimRef": map[string]any{"namespace": cl.Namespace, "name": cl.Name, "uid": cl.UID}}})
			if err != nil {
				return err
			}
			if err := c.Patch(ctx, serverRef(i), client.RawPatch(types.MergePatchType, ref)); err != nil {
				return err
			}
			if err := status(serverRef(i), map[string]any{"state": "Reserved", "lastTransitionTime": now()}); err != nil {
				return err
			}
			return status(cl, map[string]any{"phase": "Bound", "serverRef": map[string]any{"name": name(i)}, "boundAt": now(),
				"conditions": []map[string]any{{"type": "Bound", "status": "True", "reason": "Bound", "message": "bound to server " + name(i), "lastTransitionTime": now()}}})
		})
	}
	if err == nil {
		err = timed(phaseRelease, func(i int) error {
			if err := env.admin.Delete(ctx, claims[i]); err != nil {
				return err
			}
			if err := c.Patch(ctx, serverRef(i), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"serverClaimRef":null,"power":"Off"}}`))); err != nil {
				return err
			}
			if err := status(serverRef(i), map[string]any{"state": "Cleanup", "lastTransitionTime": now()}); err != nil {
				return err
			}
			if err := probeBoot(name(i), metalv1alpha1.BootPurposeCleanup, ignition.ModeWipe); err != nil {
				return err
			}
			wipe := metalv1alpha1.WipeReport{Policy: metalv1alpha1.DefaultWipePolicy}
			for _, d := range inventories[i%len(inventories)].Storage {
				wipe.Disks = append(wipe.Disks, metalv1alpha1.DiskWipe{Name: d.Name, SerialNumber: d.SerialNumber, Method: "zero", Succeeded: true})
			}
			wipe.ReportedAt = &metav1.Time{Time: time.Now()}
			if err := status(serverRef(i), map[string]any{"state": "Available", "lastWipe": wipe, "lastTransitionTime": now()}); err != nil {
				return err
			}
			if err := endProbeBoot(name(i)); err != nil {
				return err
			}
			return c.Patch(ctx, claims[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		})
	}
	return f, errors.Join(err, removeFloorObjects(ctx, env.admin, n))
}

// removeFloorObjects deletes what the object-model floor made (all of it, had it failed part
// way), and waits until it is gone: the operator must never see it.
func removeFloorObjects(ctx context.Context, c client.Client, n int) error {
	match := client.MatchingLabels{floorLabel: "true"}
	deleteAll := func(obj client.Object, opts ...client.DeleteAllOfOption) error {
		return persist(func() error { return c.DeleteAllOf(ctx, obj, append(opts, match)...) })
	}
	for _, obj := range []client.Object{&metalv1alpha1.Endpoint{}, &metalv1alpha1.BMC{}, &metalv1alpha1.BMCSecret{}, &metalv1alpha1.Server{}} {
		if err := deleteAll(obj); err != nil {
			return err
		}
	}
	if err := deleteAll(&metalv1alpha1.ServerBootConfiguration{}, client.InNamespace(lab.Namespace)); err != nil {
		return err
	}
	if err := deleteAll(&corev1.Secret{}, client.InNamespace(lab.Namespace)); err != nil {
		return err
	}
	lists := []client.ObjectList{&metalv1alpha1.EndpointList{}, &metalv1alpha1.BMCList{}, &metalv1alpha1.BMCSecretList{}, &metalv1alpha1.ServerList{},
		&metalv1alpha1.ServerBootConfigurationList{}, &metalv1alpha1.ServerClaimList{}}
	return waitFor(ctx, time.Minute+time.Duration(n)*10*time.Millisecond, "object-model floor's objects deleted", func() (bool, string) {
		for _, list := range lists {
			if err := c.List(ctx, list, match, client.Limit(1)); err != nil {
				return false, err.Error()
			}
			if meta.LenList(list) > 0 {
				return false, fmt.Sprintf("%T not empty", list)
			}
		}
		return true, ""
	})
}

// fixtureInventories are the lab's hosts' inventories (the fixtures they are made from), as
// their probes report them: the Available write carries one, as the registry's does.
func fixtureInventories(ctx context.Context) ([]metalv1alpha1.Inventory, error) {
	var out []metalv1alpha1.Inventory
	for _, fixture := range lab.HostFixtures() {
		root, err := fixtures.Root(fixture)
		if err != nil {
			return nil, err
		}
		rep, err := collect.Collect(ctx, collect.Options{Root: root, ProbeVersion: cli.Version})
		if err != nil {
			return nil, fmt.Errorf("collecting fixture %s: %w", fixture, err)
		}
		out = append(out, rep.Inventory)
	}
	return out, nil
}

// readCA is a PEM file's content, for the ignition's registry CA.
func readCA(path string) (string, error) {
	data, err := os.ReadFile(path)
	return string(data), err
}
