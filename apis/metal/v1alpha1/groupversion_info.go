// Package v1alpha1 is the metal.ironfleet.dev/v1alpha1 API: the kinds that carry a physical
// server from its BMC's first appearance on the network, through discovery, claims and cleanup.
//
// +kubebuilder:object:generate=true
// +groupName=metal.ironfleet.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "metal.ironfleet.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Endpoint{}, &EndpointList{},
		&BMC{}, &BMCList{},
		&BMCSecret{}, &BMCSecretList{},
		&Server{}, &ServerList{},
		&ServerClaim{}, &ServerClaimList{},
		&ServerBootConfiguration{}, &ServerBootConfigurationList{},
		&ServerMaintenance{}, &ServerMaintenanceList{},
		&ServerFirmware{}, &ServerFirmwareList{},
		&FirmwareBaseline{}, &FirmwareBaselineList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
