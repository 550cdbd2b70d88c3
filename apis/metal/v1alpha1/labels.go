package v1alpha1

// Labels Ironfleet puts on Servers, for selectors in claims.
const (
	LabelBMC          = "metal.ironfleet.dev/bmc"
	LabelManufacturer = "metal.ironfleet.dev/manufacturer"
	LabelModel        = "metal.ironfleet.dev/model"
)

// LabelServer, on a boot configuration and on a probe boot's ignition Secret, names its Server.
const LabelServer = "metal.ironfleet.dev/server"

// The boot operator a ServerBootConfiguration is for, as an IngressClass names an ingress
// controller: the manager labels every boot configuration it makes with its --boot-operator,
// and a boot service serves only those labelled with its own name (a configuration without
// the label is Ironfleet's).
const (
	LabelBootOperator     = "metal.ironfleet.dev/boot-operator"
	BootOperatorIronfleet = "ironfleet"
)

// BootOperatorOf is the boot operator a boot configuration is for.
func BootOperatorOf(sbc *ServerBootConfiguration) string {
	if op := sbc.Labels[LabelBootOperator]; op != "" {
		return op
	}
	return BootOperatorIronfleet
}
