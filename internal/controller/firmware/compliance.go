package firmware

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// selecting are the baselines, of all, that select server (not deleted ones), by name.
func selecting(all []metalv1alpha1.FirmwareBaseline, server *metalv1alpha1.Server) []*metalv1alpha1.FirmwareBaseline {
	var out []*metalv1alpha1.FirmwareBaseline
	for i := range all {
		b := &all[i]
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&b.Spec.ServerSelector)
		if err != nil || !sel.Matches(labels.Set(server.Labels)) {
			continue // a selector the API let through but that does not parse selects nothing
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *metalv1alpha1.FirmwareBaseline) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// observed is what the baselines are now, to compare with what the last read was judged by.
func observed(bs []*metalv1alpha1.FirmwareBaseline) []metalv1alpha1.ObservedBaseline {
	var out []metalv1alpha1.ObservedBaseline
	for _, b := range bs {
		out = append(out, metalv1alpha1.ObservedBaseline{Name: b.Name, Generation: b.Generation})
	}
	return out
}

func names(bs []*metalv1alpha1.FirmwareBaseline) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return strings.Join(out, ",")
}

// want is one thing a baseline wants.
type want struct {
	value, baseline string
}

// wants are the baselines' wants merged: a component or attribute two baselines want at
// different values is a conflict, and the server is not judged (nor, later, touched) at all.
type wants struct {
	components map[string]want // by BaselineComponent.Component
	bios, bmc  map[string]want
}

// merge merges the wants of bs; conflicts says, per thing two of them want otherwise, which.
func merge(bs []*metalv1alpha1.FirmwareBaseline) (wants, []string) {
	w := wants{components: map[string]want{}, bios: map[string]want{}, bmc: map[string]want{}}
	var conflicts []string
	add := func(into map[string]want, kind, name, value, baseline string) {
		if had, ok := into[name]; ok && had.value != value {
			conflicts = append(conflicts, fmt.Sprintf("%s %s: %s wants %q, %s wants %q", kind, name, had.baseline, had.value, baseline, value))
			return
		}
		into[name] = want{value: value, baseline: baseline}
	}
	for _, b := range bs {
		for _, c := range b.Spec.Components {
			add(w.components, "component", c.Component, c.Version, b.Name)
		}
		if s := b.Spec.Settings; s != nil {
			for k, v := range s.BIOS {
				add(w.bios, "BIOS setting", k, v, b.Name)
			}
			for k, v := range s.BMC {
				add(w.bmc, "BMC setting", k, v, b.Name)
			}
		}
	}
	slices.Sort(conflicts)
	return w, conflicts
}

// differences are what st (a fresh read) runs otherwise than w wants, components then BIOS
// settings then BMC settings, each sorted; a setting its registry (biosRegistry, bmcRegistry)
// refuses carries why in Invalid.
func differences(w wants, st *metalv1alpha1.ServerFirmwareStatus, biosRegistry, bmcRegistry *bmc.SettingsRegistry) []metalv1alpha1.FirmwareDifference {
	var out []metalv1alpha1.FirmwareDifference
	for _, name := range sortedKeys(w.components) {
		wt := w.components[name]
		for _, have := range componentVersions(name, st) {
			if have != wt.value {
				out = append(out, metalv1alpha1.FirmwareDifference{Kind: metalv1alpha1.FirmwareDifferenceComponent,
					Name: name, Want: wt.value, Have: have, Baseline: wt.baseline})
			}
		}
	}
	out = append(out, settingDifferences(metalv1alpha1.FirmwareDifferenceBIOSSetting, w.bios, st.BIOS, biosRegistry,
		"the BMC exposes no BIOS settings")...)
	return append(out, settingDifferences(metalv1alpha1.FirmwareDifferenceBMCSetting, w.bmc, st.BMC, bmcRegistry,
		"the BMC exposes no settings of its own (of the vendors Ironfleet knows, only Dell's iDRAC does, through its Manager's attributes)")...)
}

// settingDifferences are the wanted settings of one kind that the settings read (have; nil when
// the BMC exposes none, which makes every want Invalid, saying none) do not show, by name; a
// want the registry refuses is one too, Invalid saying why.
func settingDifferences(kind metalv1alpha1.FirmwareDifferenceKind, wanted map[string]want, have *metalv1alpha1.FirmwareSettings, registry *bmc.SettingsRegistry, none string) []metalv1alpha1.FirmwareDifference {
	var out []metalv1alpha1.FirmwareDifference
	for _, name := range sortedKeys(wanted) {
		wt := wanted[name]
		d := metalv1alpha1.FirmwareDifference{Kind: kind, Name: name, Want: wt.value, Baseline: wt.baseline}
		if have == nil {
			d.Invalid = none
		} else {
			d.Have = have.Attributes[name]
			if registry != nil {
				if err := validate(registry, name, wt.value); err != nil {
					d.Invalid = err.Error()
				}
			}
		}
		if d.Invalid != "" || !sameValue(d.Want, d.Have) {
			out = append(out, d)
		}
	}
	return out
}

// componentVersions are the versions st shows of a baseline's component: BIOS and BMC by class,
// anything else by inventory id or id pattern; one empty version when nothing matches (the
// component is wanted, and missing).
func componentVersions(name string, st *metalv1alpha1.ServerFirmwareStatus) []string {
	switch name {
	case "BIOS":
		return []string{st.BIOSVersion}
	case "BMC":
		return []string{st.BMCVersion}
	}
	var out []string
	for _, c := range st.Components {
		if matchID(name, c.ID) {
			out = append(out, c.Version)
		}
	}
	if len(out) == 0 {
		return []string{""}
	}
	return out
}

// matchID says whether a baseline's component name (an id, or a pattern of ids with * and ?)
// names inventory member id.
func matchID(name, id string) bool {
	ok, err := path.Match(name, id)
	return ok || (err != nil && name == id)
}

// sameValue compares an attribute's wanted and current values as the registry types them: an
// integer by value, a boolean by its word, anything else as written.
func sameValue(want, have string) bool {
	if want == have {
		return true
	}
	if a, err := strconv.ParseInt(want, 10, 64); err == nil {
		b, err := strconv.ParseInt(have, 10, 64)
		return err == nil && a == b
	}
	return strings.EqualFold(want, have) && (strings.EqualFold(want, "true") || strings.EqualFold(want, "false"))
}

// validate checks value against the registry's definition of attribute name: an attribute it
// does not define, a read-only or password one, or a value outside what it allows, is an
// error saying so.
func validate(registry *bmc.SettingsRegistry, name, value string) error {
	def, ok := registry.Attributes[name]
	if !ok {
		return fmt.Errorf("registry %s defines no attribute %s", registry.Name, name)
	}
	switch {
	case def.ReadOnly:
		return fmt.Errorf("%s is read-only", name)
	case def.Type == bmc.AttributePassword:
		return fmt.Errorf("%s is a password: baselines do not set credentials", name)
	}
	switch def.Type {
	case bmc.AttributeEnumeration:
		if !slices.Contains(def.AllowedValues, value) {
			return fmt.Errorf("%s allows %s, not %q", name, strings.Join(def.AllowedValues, ", "), value)
		}
	case bmc.AttributeInteger:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s is an integer, not %q", name, value)
		}
		if def.LowerBound != nil && n < *def.LowerBound || def.UpperBound != nil && n > *def.UpperBound {
			return fmt.Errorf("%s must be %s, not %d", name, bounds(def.LowerBound, def.UpperBound), n)
		}
	case bmc.AttributeBoolean:
		if !strings.EqualFold(value, "true") && !strings.EqualFold(value, "false") {
			return fmt.Errorf("%s is true or false, not %q", name, value)
		}
	case bmc.AttributeString:
		n := int64(len(value))
		if def.MinLength != nil && n < *def.MinLength || def.MaxLength != nil && n > *def.MaxLength {
			return fmt.Errorf("%s must be %s characters long, not %d", name, bounds(def.MinLength, def.MaxLength), n)
		}
		if def.ValueExpression != "" {
			re, err := regexp.Compile("^(?:" + def.ValueExpression + ")$")
			if err == nil && !re.MatchString(value) {
				return fmt.Errorf("%s must match %s, not %q", name, def.ValueExpression, value)
			}
		}
	}
	return nil
}

func bounds(lo, hi *int64) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("within %d..%d", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("at least %d", *lo)
	default:
		return fmt.Sprintf("at most %d", *hi)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// judge is the Compliant condition's reason and message for a server its baselines bs select,
// with the differences a fresh read found.
func judge(bs []*metalv1alpha1.FirmwareBaseline, w wants, conflicts []string, diffs []metalv1alpha1.FirmwareDifference) (string, string) {
	if len(bs) == 0 {
		return metalv1alpha1.ReasonNoBaseline, "no FirmwareBaseline selects this server"
	}
	if len(conflicts) > 0 {
		return metalv1alpha1.ReasonConflictingBaselines, "not touched: " + strings.Join(conflicts, "; ")
	}
	var invalid, drifted []string
	for _, d := range diffs {
		if d.Invalid != "" {
			invalid = append(invalid, fmt.Sprintf("%s (baseline %s): %s", d.Name, d.Baseline, d.Invalid))
		} else {
			drifted = append(drifted, fmt.Sprintf("%s %s is %q, baseline %s wants %q", strings.ToLower(string(d.Kind)), d.Name, d.Have, d.Baseline, d.Want))
		}
	}
	switch {
	case len(invalid) > 0:
		return metalv1alpha1.ReasonInvalidSetting, "refused before anything is sent: " + strings.Join(invalid, "; ")
	case len(drifted) > 0:
		return metalv1alpha1.ReasonFirmwareDrifted, fmt.Sprintf("%d differences: %s", len(drifted), strings.Join(drifted, "; "))
	}
	return metalv1alpha1.ReasonFirmwareCompliant, "runs what " + names(bs) + " want"
}
