// Package macdb is the MAC-prefix database: which vendor's BMCs sit behind which OUI, how to
// talk to them, and the credentials they ship with. The manager loads it from the file given by
// --mac-prefixes-file; a malformed file stops the manager at start-up with an error naming the
// entry and the field.
package macdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Protocol a BMC is driven with.
type Protocol string

const (
	ProtocolRedfish Protocol = "Redfish"
	// ProtocolIPMI: BMCs found by the entry are driven over IPMI v2.0 / RMCP+ at
	// ipmi://<ip>:<port> (623 by default; scheme is not used).
	ProtocolIPMI Protocol = "IPMI"
)

// Credential is one username/password a vendor ships BMCs with.
type Credential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Entry is one MAC prefix and what it says about the BMCs behind it.
type Entry struct {
	MACPrefix          string       `json:"macPrefix"`
	Manufacturer       string       `json:"manufacturer"`
	Protocol           Protocol     `json:"protocol"`
	Scheme             string       `json:"scheme"`
	Port               int32        `json:"port,omitempty"`
	DefaultCredentials []Credential `json:"defaultCredentials"`
}

// file is the on-disk shape. Entries are decoded one by one so that errors name the entry.
type file struct {
	MACPrefixes []json.RawMessage `json:"macPrefixes"`
}

// DB is a loaded, validated database. The zero value is empty and matches nothing.
type DB struct {
	// byPrefix maps a normalised prefix (lower case, colon-separated octets) to its entry.
	byPrefix map[string]*Entry
	entries  []Entry
}

var prefixPattern = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){0,5}$`)

// Load reads and validates a database file.
func Load(path string) (*DB, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading MAC-prefix database: %w", err)
	}
	db, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("MAC-prefix database %s: %w", path, err)
	}
	return db, nil
}

// Parse validates a database from its YAML (or JSON) text. Unknown fields are errors, so a
// misspelt field is reported rather than silently ignored.
func Parse(data []byte) (*DB, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("not a valid database (want a top-level macPrefixes list): %w", err)
	}
	db := &DB{byPrefix: make(map[string]*Entry, len(f.MACPrefixes))}
	for i, raw := range f.MACPrefixes {
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		given := e.MACPrefix
		if err := normalise(&e); err != nil {
			return nil, fmt.Errorf("entry %d (macPrefix %q): %w", i, given, err)
		}
		if prev, dup := db.byPrefix[e.MACPrefix]; dup {
			return nil, fmt.Errorf("entry %d (macPrefix %q): field macPrefix: duplicates the entry for %s", i, e.MACPrefix, prev.Manufacturer)
		}
		db.entries = append(db.entries, e)
		db.byPrefix[e.MACPrefix] = &db.entries[len(db.entries)-1]
	}
	// append may have moved the entries; point the index at their final home.
	for i := range db.entries {
		db.byPrefix[db.entries[i].MACPrefix] = &db.entries[i]
	}
	return db, nil
}

// normalise validates an entry in place, filling defaults. Errors name the field.
func normalise(e *Entry) error {
	e.MACPrefix = strings.ToLower(strings.TrimSpace(e.MACPrefix))
	if !prefixPattern.MatchString(e.MACPrefix) {
		return fmt.Errorf("field macPrefix: %q is not one to six colon-separated hex octets (e.g. 3c:ec:ef)", e.MACPrefix)
	}
	if strings.TrimSpace(e.Manufacturer) == "" {
		return fmt.Errorf("field manufacturer: required")
	}
	switch e.Protocol {
	case ProtocolRedfish, ProtocolIPMI:
	case "":
		return fmt.Errorf("field protocol: required (Redfish or IPMI)")
	default:
		return fmt.Errorf("field protocol: %q is not Redfish or IPMI", e.Protocol)
	}
	switch e.Scheme {
	case "http", "https":
	case "":
		if e.Protocol == ProtocolRedfish {
			return fmt.Errorf("field scheme: required for Redfish (http or https)")
		}
	default:
		return fmt.Errorf("field scheme: %q is not http or https", e.Scheme)
	}
	if e.Port == 0 {
		e.Port = defaultPort(e)
	}
	if e.Port < 1 || e.Port > 65535 {
		return fmt.Errorf("field port: %d is not between 1 and 65535", e.Port)
	}
	if len(e.DefaultCredentials) == 0 {
		return fmt.Errorf("field defaultCredentials: at least one username/password is required")
	}
	for j, c := range e.DefaultCredentials {
		if c.Username == "" {
			return fmt.Errorf("field defaultCredentials[%d].username: required", j)
		}
		if c.Password == "" {
			return fmt.Errorf("field defaultCredentials[%d].password: required", j)
		}
	}
	return nil
}

func defaultPort(e *Entry) int32 {
	switch {
	case e.Protocol == ProtocolIPMI:
		return 623
	case e.Scheme == "http":
		return 80
	default:
		return 443
	}
}

// Lookup returns the entry with the longest prefix of mac, or false when none matches.
func (db *DB) Lookup(mac string) (Entry, bool) {
	if db == nil {
		return Entry{}, false
	}
	octets := strings.Split(strings.ToLower(strings.TrimSpace(mac)), ":")
	for n := min(len(octets), 6); n > 0; n-- {
		if e, ok := db.byPrefix[strings.Join(octets[:n], ":")]; ok {
			return *e, true
		}
	}
	return Entry{}, false
}

// Len is the number of entries.
func (db *DB) Len() int {
	if db == nil {
		return 0
	}
	return len(db.entries)
}

// Address is the BMC URL for an endpoint IP by this entry.
func (e Entry) Address(ip string) string {
	return Address(e.Protocol, e.Scheme, ip, e.Port)
}

// Address renders a BMC URL in the form hardwareutils/bmc parses:
// redfish+https://10.0.0.5:443/redfish/v1, or ipmi://10.0.0.5:623.
func Address(protocol Protocol, scheme, ip string, port int32) string {
	host := ip
	if strings.Contains(ip, ":") { // IPv6
		host = "[" + ip + "]"
	}
	if protocol == ProtocolIPMI {
		return fmt.Sprintf("ipmi://%s:%d", host, port)
	}
	return fmt.Sprintf("redfish+%s://%s:%d/redfish/v1", scheme, host, port)
}
