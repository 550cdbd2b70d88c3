// Package lldp reads what lldpd heard on each interface: the switch, its port and VLAN.
//
// lldpd's JSON (`lldpctl -f json`) changes shape with the data: one interface is an object
// keyed by its name, several are an array of such objects; one management address is a string,
// two are an array; a chassis that announces a system name is keyed by it, one that does not
// is not. The stable `-f json0` format wraps every scalar in [{"value": ...}]. Parse accepts all
// of these by treating "one" and "a list of one" alike and by unwrapping {"value": ...}.
package lldp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Neighbors maps an interface name to what was heard on it, in the order lldpd listed it.
type Neighbors map[string][]metalv1alpha1.LLDPNeighbor

// DefaultTimeout bounds one lldpctl run when the caller's context has no earlier deadline.
const DefaultTimeout = 10 * time.Second

// Query runs `lldpctl -f json` and returns its output. lldpctl is the path of the binary.
func Query(ctx context.Context, lldpctl string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, lldpctl, "-f", "json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg != "" {
			return nil, fmt.Errorf("running %s -f json: %w: %s", lldpctl, err, msg)
		}
		return nil, fmt.Errorf("running %s -f json: %w", lldpctl, err)
	}
	return stdout.Bytes(), nil
}

// Parse decodes lldpctl's JSON (json or json0 format). An empty document (no neighbours) is
// not an error; a document that is not lldpctl's is.
func Parse(data []byte) (Neighbors, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parsing lldpctl JSON: %w", err)
	}
	top, ok := doc["lldp"]
	if !ok {
		return nil, errors.New(`parsing lldpctl JSON: no "lldp" key`)
	}
	out := Neighbors{}
	for _, section := range objects(top) {
		for _, entry := range objects(section["interface"]) {
			for _, iface := range interfaces(entry) {
				out[iface.name] = append(out[iface.name], neighbor(iface.body))
			}
		}
	}
	return out, nil
}

type namedInterface struct {
	name string
	body map[string]any
}

// interfaces reads one element of the "interface" list. In json format it is an object keyed
// by interface name ({"eth0": {...}}, possibly several keys); in json0 format it carries its
// name inside ({"name": "eth0", "chassis": [...]}).
func interfaces(entry map[string]any) []namedInterface {
	if _, json0 := entry["chassis"]; json0 || entry["port"] != nil {
		if name := str(entry["name"]); name != "" {
			return []namedInterface{{name: name, body: entry}}
		}
		return nil
	}
	var out []namedInterface
	for _, name := range sortedKeys(entry) {
		// A name that maps to a list is the same interface heard several times.
		for _, body := range objects(entry[name]) {
			out = append(out, namedInterface{name: name, body: body})
		}
	}
	return out
}

func neighbor(body map[string]any) metalv1alpha1.LLDPNeighbor {
	var n metalv1alpha1.LLDPNeighbor
	if chassis := first(objects(body["chassis"])); chassis != nil {
		name := str(chassis["name"])
		// json format keys the chassis by its system name when it announced one.
		if _, hasID := chassis["id"]; !hasID && len(chassis) == 1 {
			for key, inner := range chassis {
				if obj := first(objects(inner)); obj != nil {
					name, chassis = key, obj
				}
			}
		}
		n.SystemName = name
		n.ChassisID = str(chassis["id"])
		n.SystemDescription = str(chassis["descr"])
		n.ManagementAddress = str(chassis["mgmt-ip"])
	}
	if port := first(objects(body["port"])); port != nil {
		n.PortID = str(port["id"])
		n.PortDescription = str(port["descr"])
	}
	n.VLANID = vlanID(objects(body["vlan"]))
	return n
}

// vlanID picks the port VLAN (pvid) when lldpd marks one, else the first VLAN listed.
func vlanID(vlans []map[string]any) int32 {
	chosen := first(vlans)
	for _, v := range vlans {
		if truthy(v["pvid"]) {
			chosen = v
			break
		}
	}
	if chosen == nil {
		return 0
	}
	id, err := strconv.ParseInt(str(chosen["vlan-id"]), 10, 32)
	if err != nil || id < 0 {
		return 0
	}
	return int32(id)
}

// objects returns v as a list of objects: an object is a list of one, an array keeps its
// object elements, anything else is empty.
func objects(v any) []map[string]any {
	switch t := v.(type) {
	case map[string]any:
		return []map[string]any{t}
	case []any:
		var out []map[string]any
		for _, e := range t {
			out = append(out, objects(e)...)
		}
		return out
	}
	return nil
}

// str returns the text of a scalar, of {"value": scalar}, or of the first non-empty element
// of a list of those.
func str(v any) string {
	switch t := v.(type) {
	case string:
		return strings.TrimSpace(t)
	case json.Number:
		return t.String()
	case map[string]any:
		return str(t["value"])
	case []any:
		for _, e := range t {
			if s := str(e); s != "" {
				return s
			}
		}
	}
	return ""
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		b, _ := strconv.ParseBool(t)
		return b || t == "yes"
	case []any, map[string]any:
		return truthy(firstValue(t))
	}
	return false
}

func firstValue(v any) any {
	switch t := v.(type) {
	case []any:
		if len(t) > 0 {
			return firstValue(t[0])
		}
	case map[string]any:
		return t["value"]
	}
	return nil
}

func first(list []map[string]any) map[string]any {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
