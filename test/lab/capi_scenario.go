package lab

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// CAPIDemo is a workload cluster the lab makes through Cluster API: a Cluster on an
// IronfleetCluster, and a MachineDeployment of IronfleetMachines on the lab's simulated
// servers, whose bootstrap data (set by the lab, as a bootstrap provider would) becomes each
// server's ignition.
type CAPIDemo struct {
	Namespace, Cluster, Deployment string
	// BootstrapSecret holds BootstrapData under "value", as a bootstrap provider writes it.
	BootstrapSecret string
	BootstrapData   []byte
	// Zones are the failure domains: the lab labels its simulated servers with them in turn.
	Zones []string
	// Machine, when set, is the IronfleetMachineTemplate's machine spec; by default the lab's
	// SimImage on a simulated server (off the VMs) with at least 2 CPU cores.
	Machine *infrav1.IronfleetMachineSpec
}

// NewCAPIDemo describes the demo cluster the capi scenario makes.
func NewCAPIDemo(name string) *CAPIDemo {
	return &CAPIDemo{
		Namespace: "default", Cluster: name, Deployment: name + "-workers", BootstrapSecret: name + "-bootstrap",
		BootstrapData: []byte("#cloud-config\n# bootstrap data of cluster " + name + ", as a bootstrap provider writes it\nruncmd:\n- echo joined\n"),
		Zones:         []string{"zone-a", "zone-b"},
	}
}

// CreateCAPIDemo labels the simulated servers with the demo's zones and creates its objects:
// the bootstrap data Secret, IronfleetCluster, Cluster, IronfleetMachineTemplate and a
// MachineDeployment of replicas. The control plane endpoint is the lab's own apiserver.
func (l *Lab) CreateCAPIDemo(ctx context.Context, d *CAPIDemo, replicas int32) error {
	if err := l.labelZones(ctx, d.Zones); err != nil {
		return err
	}
	host, port, err := l.apiserverEndpoint()
	if err != nil {
		return err
	}
	image, checksum := l.Images.SimImage()
	spec := infrav1.IronfleetMachineSpec{
		ServerSelector: l.OffVMs(&metalv1alpha1.ServerClaim{}).Spec.ServerSelector,
		MinCPUCores:    ptr.To(int32(2)),
		Image:          image, ImageChecksum: checksum,
	}
	if d.Machine != nil {
		spec = *d.Machine
	}
	tmpl := &infrav1.IronfleetMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Deployment},
		Spec:       infrav1.IronfleetMachineTemplateSpec{Template: infrav1.IronfleetMachineTemplateResource{Spec: spec}},
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: d.Cluster, clusterv1.MachineDeploymentNameLabel: d.Deployment}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.BootstrapSecret, Labels: map[string]string{clusterv1.ClusterNameLabel: d.Cluster}},
			Data: map[string][]byte{infrav1.BootstrapDataKey: d.BootstrapData}},
		&infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Cluster},
			Spec: infrav1.IronfleetClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port}}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Cluster},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "IronfleetCluster", Name: d.Cluster}}},
		tmpl,
		// With the defaults CAPI's webhook would write (selector, template labels, rollout).
		&clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Deployment, Labels: map[string]string{clusterv1.ClusterNameLabel: d.Cluster}},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: d.Cluster, Replicas: ptr.To(replicas),
				Selector: metav1.LabelSelector{MatchLabels: labels},
				Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
					Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
					RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
						MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
					Spec: clusterv1.MachineSpec{
						ClusterName: d.Cluster,
						Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(d.BootstrapSecret)},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{
							APIGroup: infrav1.GroupVersion.Group, Kind: "IronfleetMachineTemplate", Name: tmpl.Name},
					},
				},
			},
		},
	}
	for _, o := range objs {
		if err := l.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// apiserverEndpoint is the lab apiserver's host and port.
func (l *Lab) apiserverEndpoint() (string, int32, error) {
	u, err := url.Parse(l.Env.Config.Host)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return "", 0, fmt.Errorf("apiserver URL %s has no port", l.Env.Config.Host)
	}
	return u.Hostname(), int32(port), nil
}

// labelZones gives the simulated servers (not the VMs) the zones in turn, by name.
func (l *Lab) labelZones(ctx context.Context, zones []string) error {
	var servers metalv1alpha1.ServerList
	if err := l.Client.List(ctx, &servers); err != nil {
		return err
	}
	sort.Slice(servers.Items, func(i, j int) bool { return servers.Items[i].Name < servers.Items[j].Name })
	i := 0
	for _, s := range servers.Items {
		if _, vm := s.Labels[LabelVM]; vm {
			continue
		}
		before := s.DeepCopy()
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[infrav1.DefaultFailureDomainLabel] = zones[i%len(zones)]
		i++
		if err := l.Client.Patch(ctx, &s, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("labelling server %s: %w", s.Name, err)
		}
	}
	return nil
}

// CAPIMachines lists the demo's IronfleetMachines.
func (l *Lab) CAPIMachines(ctx context.Context, d *CAPIDemo) ([]infrav1.IronfleetMachine, error) {
	var list infrav1.IronfleetMachineList
	if err := l.Client.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: d.Cluster}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WaitForCAPIMachines waits until the demo has exactly n IronfleetMachines, each provisioned,
// and n Machines whose infrastructure Cluster API saw provisioned, with their providerIDs.
func (l *Lab) WaitForCAPIMachines(ctx context.Context, d *CAPIDemo, n int, timeout time.Duration) ([]infrav1.IronfleetMachine, error) {
	var machines []infrav1.IronfleetMachine
	err := Poll(ctx, timeout, fmt.Sprintf("%d provisioned Machines of cluster %s", n, d.Cluster), func() (bool, error) {
		var err error
		if machines, err = l.CAPIMachines(ctx, d); err != nil || len(machines) != n {
			return false, err
		}
		for _, m := range machines {
			if !ptr.Deref(m.Status.Initialization.Provisioned, false) {
				return false, nil
			}
		}
		var list clusterv1.MachineList
		if err := l.Client.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: d.Cluster}); err != nil || len(list.Items) != n {
			return false, err
		}
		for _, m := range list.Items {
			if !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) || m.Spec.ProviderID == "" {
				return false, nil
			}
		}
		return true, nil
	})
	return machines, err
}

// ScaleCAPIDemo sets the demo's MachineDeployment's replicas.
func (l *Lab) ScaleCAPIDemo(ctx context.Context, d *CAPIDemo, replicas int32) error {
	var md clusterv1.MachineDeployment
	if err := l.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Deployment}, &md); err != nil {
		return err
	}
	before := md.DeepCopy()
	md.Spec.Replicas = ptr.To(replicas)
	return l.Client.Patch(ctx, &md, client.MergeFrom(before))
}

// CAPIScenario makes the demo cluster with a MachineDeployment of 2 and waits until both
// Machines are provisioned on lab servers, saying what it does.
func (l *Lab) CAPIScenario(ctx context.Context, out io.Writer) error {
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "%s  ▶ %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	n := l.Opts.Servers + len(l.VMs)
	step("enroll and discover %d servers", n)
	if err := l.WaitForServers(ctx, n, metalv1alpha1.ServerStateAvailable, 3*time.Minute); err != nil {
		return fmt.Errorf("enroll and discover: %w", err)
	}
	d := NewCAPIDemo("demo")
	step("Cluster API: Cluster %s/%s on an IronfleetCluster, a MachineDeployment of 2 IronfleetMachines (servers labelled %s in %v)",
		d.Namespace, d.Cluster, infrav1.DefaultFailureDomainLabel, d.Zones)
	if err := l.CreateCAPIDemo(ctx, d, 2); err != nil {
		return err
	}
	machines, err := l.WaitForCAPIMachines(ctx, d, 2, 3*time.Minute)
	if err != nil {
		return err
	}
	for _, m := range machines {
		step("IronfleetMachine %s: %s, failure domain %s, addresses %v", m.Name, m.Spec.ProviderID, m.Status.FailureDomain, m.Status.Addresses)
	}
	step("both Machines provisioned: ./%s get clusters,machines,ironfleetmachines,serverclaims", "lab/kubectl")
	return nil
}
