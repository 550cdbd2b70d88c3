// Package v1alpha1 is Ironfleet's Cluster API infrastructure provider API
// (infrastructure.cluster.x-k8s.io/v1alpha1): IronfleetCluster, IronfleetMachine and
// IronfleetMachineTemplate, following Cluster API's v1beta2 provider contract. An
// IronfleetMachine is served by a ServerClaim (metal.ironfleet.dev) named after it; see
// docs/capi.md.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// ContractLabel is the label Cluster API reads on each of the provider's CRDs to learn which of
// its versions implement which contract (cluster.x-k8s.io/<contract>: <versions>). The CRDs
// carry it themselves (a controller-gen marker on each kind), so every loader of them does.
const ContractLabel = "cluster.x-k8s.io/v1beta2"

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&IronfleetCluster{}, &IronfleetClusterList{},
		&IronfleetMachine{}, &IronfleetMachineList{},
		&IronfleetMachineTemplate{}, &IronfleetMachineTemplateList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
