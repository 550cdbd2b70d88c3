package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/tenantimage"
)

// Watch prints a line per server state transition and a summary whenever the counts change,
// until ctx ends.
func (l *Lab) Watch(ctx context.Context, out io.Writer) {
	seen := map[string]metalv1alpha1.ServerState{}
	var lastSummary string
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var servers metalv1alpha1.ServerList
		if err := l.Client.List(ctx, &servers); err == nil {
			counts := map[metalv1alpha1.ServerState]int{}
			for _, s := range servers.Items {
				state := StateOf(&s)
				counts[state]++
				if prev, ok := seen[s.Name]; !ok || prev != state {
					from := string(prev)
					if !ok {
						from = "—"
					}
					fmt.Fprintf(out, "%s  server %-36s %-11s → %-11s %s\n", time.Now().Format("15:04:05"), s.Name, from, state, s.Status.LastTransitionReason)
					seen[s.Name] = state
				}
			}
			if summary := summarize(counts, len(servers.Items)); summary != lastSummary {
				fmt.Fprintf(out, "%s  ── %s\n", time.Now().Format("15:04:05"), summary)
				lastSummary = summary
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func summarize(counts map[metalv1alpha1.ServerState]int, total int) string {
	states := make([]string, 0, len(counts))
	for s, n := range counts {
		states = append(states, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(states)
	return fmt.Sprintf("%d servers: %s", total, strings.Join(states, ", "))
}

// WaitForServers waits until n servers are in state.
func (l *Lab) WaitForServers(ctx context.Context, n int, state metalv1alpha1.ServerState, timeout time.Duration) error {
	return Poll(ctx, timeout, fmt.Sprintf("%d servers %s", n, state), func() (bool, error) {
		var servers metalv1alpha1.ServerList
		if err := l.Client.List(ctx, &servers); err != nil {
			return false, err
		}
		count := 0
		for _, s := range servers.Items {
			if s.Status.State == state {
				count++
			}
		}
		return count == n, nil
	})
}

// Poll checks cond every 100 ms until it holds, the timeout passes (an error naming what), or
// ctx ends.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SampleClaim is the claim the lab applies once the fleet is Available: the lab's SimImage,
// installed onto the server's disk.
func (l *Lab) SampleClaim(name string) *metalv1alpha1.ServerClaim {
	image, checksum := l.Images.SimImage()
	return &metalv1alpha1.ServerClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: metalv1alpha1.ServerClaimSpec{
			MinCPUCores:   ptrTo(int32(2)),
			Power:         metalv1alpha1.PowerOn,
			Image:         image,
			ImageChecksum: checksum,
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// OffVMs keeps a claim off the lab's VMs, which cannot reach the lab's loopback image server:
// it adds a selector on LabelVM when the lab runs VMs.
func (l *Lab) OffVMs(claim *metalv1alpha1.ServerClaim) *metalv1alpha1.ServerClaim {
	if l.vms == nil {
		return claim
	}
	if claim.Spec.ServerSelector == nil {
		claim.Spec.ServerSelector = &metalv1alpha1.ServerSelector{}
	}
	claim.Spec.ServerSelector.MatchExpressions = append(claim.Spec.ServerSelector.MatchExpressions,
		metalv1alpha1.ServerSelectorRequirement{Key: LabelVM, Operator: metav1.LabelSelectorOpDoesNotExist})
	return claim
}

// ClaimAndWait creates a claim and waits until it is Bound and its image booted.
func (l *Lab) ClaimAndWait(ctx context.Context, claim *metalv1alpha1.ServerClaim, timeout time.Duration) (string, error) {
	if err := l.Client.Create(ctx, claim); err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(claim)
	err := Poll(ctx, timeout, "claim "+key.String()+" Bound and Ready", func() (bool, error) {
		if err := l.Client.Get(ctx, key, claim); err != nil {
			return false, err
		}
		return claim.Status.Phase == metalv1alpha1.ClaimPhaseBound && meta.IsStatusConditionTrue(claim.Status.Conditions, metalv1alpha1.ConditionReady), nil
	})
	if err != nil {
		return "", fmt.Errorf("%w (%s)", err, l.whereClaimStands(ctx, claim))
	}
	return claim.Status.ServerRef.Name, nil
}

// whereClaimStands says where a claim that did not become Ready stopped: its phase and
// conditions, and its server's state, conditions and boot configurations.
func (l *Lab) whereClaimStands(ctx context.Context, claim *metalv1alpha1.ServerClaim) string {
	var b strings.Builder
	fmt.Fprintf(&b, "claim phase %q, conditions %s", claim.Status.Phase, conditionsText(claim.Status.Conditions))
	if claim.Status.ServerRef == nil {
		return b.String()
	}
	var s metalv1alpha1.Server
	if err := l.Client.Get(ctx, client.ObjectKey{Name: claim.Status.ServerRef.Name}, &s); err != nil {
		fmt.Fprintf(&b, "; server %s: %v", claim.Status.ServerRef.Name, err)
		return b.String()
	}
	fmt.Fprintf(&b, "; server %s state %q power %q, conditions %s", s.Name, s.Status.State, s.Status.PowerState, conditionsText(s.Status.Conditions))
	var sbcs metalv1alpha1.ServerBootConfigurationList
	if err := l.Client.List(ctx, &sbcs); err == nil {
		for _, sbc := range sbcs.Items {
			if sbc.Spec.ServerRef.Name == s.Name {
				fmt.Fprintf(&b, "; boot %s/%s state %q, conditions %s", sbc.Namespace, sbc.Name, sbc.Status.State, conditionsText(sbc.Status.Conditions))
			}
		}
	}
	if l.Boots != nil {
		for _, boot := range l.Boots.Boots() {
			if boot.Server == s.Name || (boot.Server == "" && boot.Err != nil) {
				fmt.Fprintf(&b, "; simulated boot at %s: %s %s, error %v", boot.Time.Format("15:04:05.000"), boot.Purpose, boot.Image, boot.Err)
			}
		}
	}
	return b.String()
}

func conditionsText(conds []metav1.Condition) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// Tour runs enroll → discover → claim → release → wipe → available, saying what it does; with
// VMs, one of them also gets the tenant image installed to its disk and boots it from there.
func (l *Lab) Tour(ctx context.Context, out io.Writer) error {
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "%s  ▶ %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	n := l.Opts.Servers + len(l.VMs)
	booted := "network-booted"
	if l.Opts.VirtualMedia {
		booted = "booted from virtual media, each behind a BMC of its own, with DHCP off"
	}
	if ipmi := len(l.IPMIHosts()); ipmi > 0 {
		booted += fmt.Sprintf("; %d behind an IPMI BMC of its own", ipmi)
	}
	step("enroll and discover: %d Endpoints → BMCs → %d Servers (%d of them real VMs, %s) → Available", len(l.BMCs)+len(l.IPMIHosts()), n, len(l.VMs), booted)
	if err := l.WaitForServers(ctx, n, metalv1alpha1.ServerStateAvailable, 3*time.Minute); err != nil {
		return fmt.Errorf("enroll and discover: %w", err)
	}
	step("claim a server with an image")
	claim := l.OffVMs(l.SampleClaim("tour"))
	server, err := l.ClaimAndWait(ctx, claim, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	step("claim bound to %s, image installed", server)
	step("release it: delete the claim")
	if err := l.releaseAndWait(ctx, claim, server, step, 2*time.Minute); err != nil {
		return err
	}
	if len(l.VMs) > 0 {
		if err := l.tourInstall(ctx, step); err != nil {
			return err
		}
	}
	if err := l.WaitForServers(ctx, n, metalv1alpha1.ServerStateAvailable, time.Minute); err != nil {
		return err
	}
	step("tour complete: all %d servers Available", n)
	return nil
}

// tourInstall claims a VM with the tenant image (make tenant-image), which the probe installs to
// its disk with a config drive; the VM boots its disk, and the OS there reports the claim's
// ignition; then the claim is released and the VM wiped.
func (l *Lab) tourInstall(ctx context.Context, step func(string, ...any)) error {
	tenants, err := l.ServeTenants()
	if err != nil {
		return fmt.Errorf("install on a VM: %w", err)
	}
	file := tenantimage.DiskGzFile
	checksum, err := tenants.Checksum(file)
	if err != nil {
		return err
	}
	userData, err := tenants.UserData(map[string]any{"hello": "from the lab tour"}, nil)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tour-vm-ignition"},
		Data: map[string][]byte{metalv1alpha1.IgnitionSecretKey: userData}}
	if err := l.Client.Create(ctx, secret); err != nil {
		return err
	}
	// The first VM (or the first IPMI host, when there are some: the tour covers IPMI then)
	// boots SeaBIOS, as the tenant image does (syslinux), from its first disk, which the hints
	// name: without them the probe would take the smallest disk that holds the image, the NVMe
	// one, which SeaBIOS does not boot.
	vm := l.VMs[0]
	if ipmi := l.IPMIHosts(); len(ipmi) > 0 {
		vm = ipmi[0]
	}
	claim := &metalv1alpha1.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tour-vm"},
		Spec: metalv1alpha1.ServerClaimSpec{
			ServerRef:         &metalv1alpha1.LocalObjectReference{Name: strings.ToLower(vm.Def.SMBIOS.UUID)},
			Power:             metalv1alpha1.PowerOn,
			Image:             tenants.URL(file),
			ImageChecksum:     checksum,
			RootDeviceHints:   &metalv1alpha1.RootDeviceHints{SerialNumber: vm.Def.Disks[0].Serial},
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name},
		}}
	step("claim VM %s (behind %s) with the tenant image %s: the probe writes it to disk with a config drive", vm.Def.Name, vm.BMCKind(), claim.Spec.Image)
	server, err := l.ClaimAndWait(ctx, claim, 8*time.Minute)
	if err != nil {
		return fmt.Errorf("install on a VM: %w", err)
	}
	var s metalv1alpha1.Server
	if err := l.Client.Get(ctx, client.ObjectKey{Name: server}, &s); err != nil {
		return err
	}
	if last := s.Status.LastInstall; last != nil {
		step("installed on %s of VM %s: %d bytes, %s; config drive %s; booting from disk", last.Disk, server, last.Bytes, last.WrittenDigest, last.ConfigDrive)
	}
	rep, err := tenants.Next(ctx, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("install on a VM: %w", err)
	}
	if !bytes.Equal(rep.UserData, userData) {
		return fmt.Errorf("install on a VM: the installed OS read %d bytes of ignition from its config drive, not the claim's %d", len(rep.UserData), len(userData))
	}
	step("the VM's firmware booted its disk (kernel %s, %q) and the OS read the claim's ignition from the config drive on %s", rep.Kernel, rep.Cmdline, rep.ConfigDrive)
	step("release it: delete the claim")
	if err := l.releaseAndWait(ctx, claim, server, step, 6*time.Minute); err != nil {
		return err
	}
	return l.Client.Delete(ctx, secret)
}

// releaseAndWait deletes a claim and waits until its server is wiped and Available.
func (l *Lab) releaseAndWait(ctx context.Context, claim *metalv1alpha1.ServerClaim, server string, step func(string, ...any), timeout time.Duration) error {
	if err := l.Client.Delete(ctx, claim); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	var s metalv1alpha1.Server
	err := Poll(ctx, timeout, "server "+server+" wiped and Available", func() (bool, error) {
		if err := l.Client.Get(ctx, client.ObjectKey{Name: server}, &s); err != nil {
			return false, err
		}
		if s.Status.State == metalv1alpha1.ServerStateError {
			return false, fmt.Errorf("server %s went to Error: %s", server, s.Status.LastTransitionReason)
		}
		return s.Status.State == metalv1alpha1.ServerStateAvailable && meta.IsStatusConditionTrue(s.Status.Conditions, metalv1alpha1.ConditionCleaned), nil
	})
	if err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	step("wiped (%d disks, policy %s) and Available again", len(s.Status.LastWipe.Disks), s.Status.LastWipe.Policy)
	return nil
}

// StateNew is how the lab names the state of a Server the operator has not given one yet.
const StateNew metalv1alpha1.ServerState = "New"

// StateOf is a Server's state as the lab reports it: StateNew until the operator sets one.
func StateOf(s *metalv1alpha1.Server) metalv1alpha1.ServerState {
	if s.Status.State == "" {
		return StateNew
	}
	return s.Status.State
}
