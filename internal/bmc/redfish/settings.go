package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// maxRegistryFiles bounds the registries a BMC may list (each may be read to find the one a
// Bios names): real BMCs list a few dozen message and attribute registries.
const maxRegistryFiles = 256

// BIOSSettings reads the system's Bios resource (gofish), its settings object's pending
// attributes, and the attribute registry the Bios names (settingsOf). A system that links no
// Bios answers ErrUnsupported.
func (c *Client) BIOSSettings(ctx context.Context, systemURI string) (bmc.Settings, error) {
	if err := ctx.Err(); err != nil {
		return bmc.Settings{}, err
	}
	biosURI, err := c.biosOf(systemURI)
	if err != nil {
		return bmc.Settings{}, err
	}
	return c.settingsOf(biosURI, "the Bios")
}

// ManagerSettings reads the attributes of the system's Manager where its vendor exposes them
// (managerAttributesOf: iDRAC's), with the registry they name, as BIOSSettings reads the Bios.
// A Manager that exposes none answers ErrUnsupported.
func (c *Client) ManagerSettings(ctx context.Context, systemURI string) (bmc.Settings, error) {
	if err := ctx.Err(); err != nil {
		return bmc.Settings{}, err
	}
	uri, err := c.managerAttributesOf(systemURI)
	if err != nil {
		return bmc.Settings{}, err
	}
	return c.settingsOf(uri, "the Manager's attributes")
}

// biosOf is the system's Bios resource; ErrUnsupported when it links none.
func (c *Client) biosOf(systemURI string) (string, error) {
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return "", classify("reading system "+systemURI, err)
	}
	biosURI := privateLink(system, "bios")
	if biosURI == "" {
		return "", unsupported("system %s links no Bios resource", systemURI)
	}
	return biosURI, nil
}

// managerAttributesOf finds the attributes resource of the system's Manager (its Links.ManagedBy,
// else the service's Managers): Redfish defines no settings of a Manager, and Dell lists its
// iDRAC's, with its System's and Lifecycle Controller's, in the Manager's
// Links.Oem.Dell.DellAttributes. The one whose last segment is the Manager's Id is the
// Manager's own (iDRAC.Embedded.1's). ErrUnsupported when no Manager lists one.
func (c *Client) managerAttributesOf(systemURI string) (string, error) {
	var sys struct{ Links struct{ ManagedBy []link } }
	if _, err := c.getJSON(systemURI, &sys); err != nil {
		return "", classify("reading system "+systemURI, err)
	}
	var managers []string
	for _, m := range sys.Links.ManagedBy {
		if m.ID != "" {
			managers = append(managers, m.ID)
		}
	}
	if len(managers) == 0 && c.root.managers != "" {
		var coll struct{ Members []link }
		if _, err := c.getJSON(c.root.managers, &coll); err != nil && !missing(err) {
			return "", classify("listing managers", err)
		}
		for _, m := range coll.Members {
			managers = append(managers, m.ID)
		}
	}
	for _, uri := range managers {
		var mgr struct {
			ID    string `json:"Id"`
			Links struct {
				Oem struct {
					Dell struct{ DellAttributes []link }
				}
			}
		}
		if _, err := c.getJSON(uri, &mgr); err != nil {
			if missing(err) {
				continue
			}
			return "", classify("reading manager "+uri, err)
		}
		for _, l := range mgr.Links.Oem.Dell.DellAttributes {
			if segs := linkSegments(l.ID); mgr.ID != "" && len(segs) > 0 && segs[len(segs)-1] == strings.ToLower(mgr.ID) {
				return l.ID, nil
			}
		}
	}
	return "", unsupported("the managers of system %s expose no attributes (only Dell's iDRAC lists them, in Links.Oem.Dell.DellAttributes)", systemURI)
}

// settingsOf reads an attributes resource (a Bios, or a Manager's attributes, which have its
// shape: Attributes, AttributeRegistry, @Redfish.Settings), its settings object's pending
// attributes, and the attribute registry it names. A missing registry (not named, not listed
// under /redfish/v1/Registries, or answering 404) is not an error: Registry is nil. An attribute
// the registry types Password reads "" whatever the BMC sent.
func (c *Client) settingsOf(uri, what string) (bmc.Settings, error) {
	res, err := redfish.GetBios(c.api, uri)
	if err != nil {
		return bmc.Settings{}, classify("reading "+what+" "+uri, err)
	}
	settings := bmc.Settings{Current: attributeTexts(res.Attributes)}
	// gofish takes the resource's own URI as its settings target when it names no settings object.
	if target := privateLink(res, "settingsTarget"); target != "" && !sameLink(target, res.ODataID) {
		if settings.Pending, err = c.pendingAttributes(target, settings.Current); err != nil {
			return bmc.Settings{}, err
		}
	}
	if settings.Registry, err = c.attributeRegistry(res.AttributeRegistry); err != nil {
		return bmc.Settings{}, err
	}
	// The schema has a Password attribute read as null; a BMC that echoes one is not copied out,
	// nor anything whose name says it is a password (a hash or salt typed String, as on some
	// BMCs, or any attribute of a BMC without a registry).
	secret := func(name string) bool {
		if settings.Registry != nil && settings.Registry.Attributes[name].Type == bmc.AttributePassword {
			return true
		}
		lower := strings.ToLower(name)
		return strings.Contains(lower, "password") || strings.Contains(lower, "passwd")
	}
	for _, values := range []map[string]string{settings.Current, settings.Pending} {
		for name := range values {
			if secret(name) {
				values[name] = ""
			}
		}
	}
	return settings, nil
}

// pendingAttributes reads a settings object's attributes and keeps those that differ from
// current: some BMCs list only what is staged there, others every attribute (the DMTF mockup).
// nil when nothing differs, or the object answers 404 (nothing staged, on some).
func (c *Client) pendingAttributes(uri string, current map[string]string) (map[string]string, error) {
	staged, err := redfish.GetBios(c.api, uri)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("reading the settings object "+uri, err)
	}
	var pending map[string]string
	for name, value := range attributeTexts(staged.Attributes) {
		if now, ok := current[name]; ok && now == value {
			continue
		}
		if pending == nil {
			pending = map[string]string{}
		}
		pending[name] = value
	}
	return pending, nil
}

// attributeTexts renders attribute values as bmc.Settings holds them: a string as it is, a
// number in decimal (an integer without a fraction), a boolean true or false, null as "".
// Anything else (no registry type has it) is its JSON.
func attributeTexts(attrs redfish.SettingsAttributes) map[string]string {
	out := make(map[string]string, len(attrs))
	for name, v := range attrs {
		out[name] = attributeText(v)
	}
	return out
}

func attributeText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		// encoding/json decodes every number as a float64: integers are exact up to 2^53.
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// attributeRegistry finds the registry a Bios names under /redfish/v1/Registries: the registry
// file (a MessageRegistryFile, read with gofish) whose Registry or Id is the name, tried first
// among the files whose last path segment is the name or its part before the version; then
// the registry at the file's Location[].Uri (English first), or at the file's own URI when it
// gives none, as some BMCs serve it. nil when the Bios names none or the BMC lists none.
func (c *Client) attributeRegistry(name string) (*bmc.SettingsRegistry, error) {
	name = strings.TrimSpace(name)
	if name == "" || c.root.registries == "" {
		return nil, nil
	}
	links, err := c.memberLinks(c.root.registries, maxRegistryFiles)
	var tooMany *tooManyMembers
	var failed *pageError
	switch {
	case errors.As(err, &failed) && isNotFound(failed.err):
		return nil, nil
	case errors.As(err, &tooMany):
		return nil, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "the Registries collection %s lists %s, more than the %d read", c.root.registries, tooMany.count("registries"), maxRegistryFiles)
	case errors.As(err, &failed):
		return nil, classify("listing the registries: reading "+failed.page, failed.err)
	case err != nil:
		return nil, classify("listing the registries "+c.root.registries, err)
	}
	base, _, _ := strings.Cut(name, ".")
	likely := func(link string) bool {
		segs := linkSegments(link)
		return len(segs) > 0 && (segs[len(segs)-1] == strings.ToLower(name) || segs[len(segs)-1] == strings.ToLower(base))
	}
	// Stable: the likely files first, the rest in the BMC's order.
	slices.SortStableFunc(links, func(a, b string) int {
		switch la, lb := likely(a), likely(b); {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return 0
	})
	for _, link := range links {
		file, err := redfish.GetMessageRegistryFile(c.api, link)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, classify("reading the registry file "+link, err)
		}
		if !strings.EqualFold(file.Registry, name) && !strings.EqualFold(file.ID, name) {
			continue
		}
		return c.readRegistry(name, registryLocation(file, link))
	}
	return nil, nil
}

// registryLocation is where a registry file says its registry is: the Uri of its English
// location, else of its first with one; the file's own URI when none has one (only DMTF's
// PublicationUri, which is not fetched: the BMC's own copy is the one its Bios follows).
func registryLocation(file *redfish.MessageRegistryFile, self string) string {
	uri := ""
	for _, l := range file.Location {
		if l.URI == "" {
			continue
		}
		if strings.EqualFold(l.Language, "en") {
			return l.URI
		}
		if uri == "" {
			uri = l.URI
		}
	}
	if uri == "" {
		return self
	}
	return uri
}

// registryDocument is the part of an AttributeRegistry the client reads. gofish has the type
// (redfish.AttributeRegistry), but its bounds are int64 and big.Int, which read an absent bound
// as 0: no bound cannot be told from a bound of 0. Each attribute is decoded on its own, so one
// a vendor got wrong is skipped rather than costing the registry.
type registryDocument struct {
	RegistryEntries struct {
		Attributes []json.RawMessage
	}
}

type registryAttribute struct {
	AttributeName                      string
	Type                               string
	ReadOnly, Immutable, ResetRequired bool
	Value                              []struct{ ValueName string }
	LowerBound, UpperBound             json.RawMessage
	MinLength, MaxLength               json.RawMessage
	ValueExpression                    string
}

// readRegistry reads and parses an attribute registry. It can run to megabytes: the response
// bound (Options.MaxResponseBytes) applies, and one over it fails the read, saying so. 404 is
// no registry.
func (c *Client) readRegistry(name, uri string) (*bmc.SettingsRegistry, error) {
	resp, err := c.api.Get(uri)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("reading the attribute registry "+uri, err)
	}
	defer drain(resp.Body)
	var doc registryDocument
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, classify("reading the attribute registry "+uri, fmt.Errorf("decoding it: %w", err))
	}
	reg := &bmc.SettingsRegistry{Name: name, Attributes: make(map[string]bmc.AttributeDefinition, len(doc.RegistryEntries.Attributes))}
	for _, raw := range doc.RegistryEntries.Attributes {
		var a registryAttribute
		if json.Unmarshal(raw, &a) != nil || a.AttributeName == "" {
			continue
		}
		def := bmc.AttributeDefinition{
			Name:            a.AttributeName,
			Type:            bmc.AttributeType(a.Type),
			ReadOnly:        a.ReadOnly || a.Immutable,
			LowerBound:      bound(a.LowerBound),
			UpperBound:      bound(a.UpperBound),
			MinLength:       bound(a.MinLength),
			MaxLength:       bound(a.MaxLength),
			ValueExpression: a.ValueExpression,
			ResetRequired:   a.ResetRequired,
		}
		for _, v := range a.Value {
			def.AllowedValues = append(def.AllowedValues, v.ValueName)
		}
		reg.Attributes[a.AttributeName] = def
	}
	return reg, nil
}

// bound reads a registry's bound: nil when absent or null; a number, or a number in a string as
// some vendors write it; one beyond int64 is held at its end (a bound that wide bounds nothing
// an int64 can hold); anything else is no bound.
func bound(raw json.RawMessage) *int64 {
	text := strings.TrimSpace(string(bytes.Trim(raw, `"`)))
	if text == "" || text == "null" {
		return nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || math.IsNaN(f) || f != math.Trunc(f) {
			return nil
		}
		switch {
		case f >= math.MaxInt64:
			n = math.MaxInt64
		case f <= math.MinInt64:
			n = math.MinInt64
		default:
			n = int64(f)
		}
	}
	return &n
}

// isNotFound says whether err is the BMC's 404.
func isNotFound(err error) bool {
	var redfishErr *common.Error
	return errors.As(err, &redfishErr) && redfishErr.HTTPReturnedStatusCode == http.StatusNotFound
}

// sameLink says whether two links name one resource, whatever their case and trailing slash.
func sameLink(a, b string) bool {
	return slices.Equal(linkSegments(a), linkSegments(b))
}
