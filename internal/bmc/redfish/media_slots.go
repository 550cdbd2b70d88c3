package redfish

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// slot is one VirtualMedia resource as read now.
type slot struct {
	uri                       string
	mediaTypes                []string
	image                     string
	inserted                  bool
	insertTarget, ejectTarget string
	patch                     bool   // the resource's Allow header lists PATCH
	etag                      string // for If-Match
}

// cd says whether the slot takes CDs or DVDs (Cisco blades offer DVD only).
func (s *slot) cd() bool {
	return slices.ContainsFunc(s.mediaTypes, func(t string) bool { return strings.EqualFold(t, "CD") || strings.EqualFold(t, "DVD") })
}

// usable says whether media can be inserted: through the action or by PATCH.
func (s *slot) usable() bool { return s.insertTarget != "" || s.patch }

// empty says whether the slot holds nothing, as far as the BMC shows.
func (s *slot) empty() bool { return !s.inserted && s.image == "" }

type link struct {
	ID string `json:"@odata.id"`
}

// getJSON GETs uri and decodes its JSON into v, returning the response's headers.
func (c *Client) getJSON(uri string, v any) (http.Header, error) {
	resp, err := c.api.Get(uri)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", uri, err)
	}
	return resp.Header, nil
}

// readSlot reads one VirtualMedia resource, noting the image it holds in seen (which may be nil).
func (c *Client) readSlot(uri string, seen *images) (*slot, error) {
	var raw struct {
		ODataID    string `json:"@odata.id"`
		MediaTypes []string
		Image      *string
		Inserted   *bool
		Actions    struct {
			Insert *struct {
				Target string `json:"target"`
			} `json:"#VirtualMedia.InsertMedia"`
			Eject *struct {
				Target string `json:"target"`
			} `json:"#VirtualMedia.EjectMedia"`
		}
	}
	header, err := c.getJSON(uri, &raw)
	if err != nil {
		return nil, err
	}
	s := &slot{uri: uri, mediaTypes: raw.MediaTypes, etag: header.Get("ETag")}
	if raw.Image != nil {
		s.image = *raw.Image
		seen.add(s.image)
	}
	if raw.Inserted != nil {
		s.inserted = *raw.Inserted
	} else {
		s.inserted = s.image != "" // no Inserted: an image means media
	}
	if raw.Actions.Insert != nil {
		s.insertTarget = raw.Actions.Insert.Target
	}
	if raw.Actions.Eject != nil {
		s.ejectTarget = raw.Actions.Eject.Target
	}
	for m := range strings.SplitSeq(header.Get("Allow"), ",") {
		if strings.EqualFold(strings.TrimSpace(m), http.MethodPatch) {
			s.patch = true
		}
	}
	return s, nil
}

// missing says whether err is a BMC saying a resource is not there (or not readable as
// one): such a place holds no slots, and the search goes on.
func missing(err error) bool {
	var re *common.Error
	if errors.As(err, &re) {
		switch re.HTTPReturnedStatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusBadRequest:
			return true
		}
	}
	return false
}

// sameURI compares two @odata.id values as BMCs spell them (case, trailing slash).
func sameURI(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// findSlot looks for the system's CD/DVD slot: under the System, then under the Managers that
// manage it, then under every Manager (Ironic's order; iDRAC ≥ 6 and DMTF's current model keep
// slots under the System, iLO, XCC, Supermicro and OpenBMC under the Manager). The first slot
// that takes CDs or DVDs and can be filled (an InsertMedia action, or PATCH allowed) wins.
func (c *Client) findSlot(systemURI string) (*slot, error) {
	var sys struct {
		VirtualMedia *link
		Links        struct{ ManagedBy []link }
	}
	if _, err := c.getJSON(systemURI, &sys); err != nil {
		return nil, classify("reading system "+systemURI, err)
	}
	var collections []string
	if sys.VirtualMedia != nil && sys.VirtualMedia.ID != "" {
		collections = append(collections, sys.VirtualMedia.ID)
	}
	var managers []string
	for _, m := range sys.Links.ManagedBy {
		if m.ID != "" {
			managers = append(managers, m.ID)
		}
	}
	var notCD, notUsable []string
	search := func(collection string) (*slot, error) {
		var coll struct{ Members []link }
		if _, err := c.getJSON(collection, &coll); err != nil {
			if missing(err) {
				return nil, nil
			}
			return nil, classify("reading "+collection, err)
		}
		for _, m := range coll.Members {
			s, err := c.readSlot(m.ID, nil)
			if err != nil {
				if missing(err) {
					continue
				}
				return nil, classify("reading "+m.ID, err)
			}
			switch {
			case !s.cd():
				notCD = append(notCD, fmt.Sprintf("%s offers %s", m.ID, strings.Join(s.mediaTypes, "/")))
			case !s.usable():
				notUsable = append(notUsable, m.ID)
			default:
				return s, nil
			}
		}
		return nil, nil
	}
	searched := 0
	for _, coll := range collections {
		searched++
		if s, err := search(coll); s != nil || err != nil {
			return s, err
		}
	}
	// Every Manager, after those of the System: listed only when those had no slot.
	allManagers := func() ([]string, error) {
		var root struct{ Managers *link }
		if _, err := c.getJSON(c.serviceRoot(), &root); err != nil || root.Managers == nil || root.Managers.ID == "" {
			return nil, nil //nolint:nilerr // a root without Managers has none to search
		}
		var coll struct{ Members []link }
		if _, err := c.getJSON(root.Managers.ID, &coll); err != nil && !missing(err) {
			return nil, classify("listing managers", err)
		}
		var more []string
		for _, m := range coll.Members {
			if m.ID != "" && !slices.ContainsFunc(managers, func(seen string) bool { return sameURI(seen, m.ID) }) {
				more = append(more, m.ID)
			}
		}
		return more, nil
	}
	listedAll := false
	for i := 0; ; i++ {
		if i == len(managers) {
			if listedAll {
				break
			}
			listedAll = true
			more, err := allManagers()
			if err != nil {
				return nil, err
			}
			if managers = append(managers, more...); i == len(managers) {
				break
			}
		}
		mgr := managers[i]
		var m struct{ VirtualMedia *link }
		if _, err := c.getJSON(mgr, &m); err != nil {
			if missing(err) {
				continue
			}
			return nil, classify("reading manager "+mgr, err)
		}
		if m.VirtualMedia == nil || m.VirtualMedia.ID == "" {
			continue
		}
		searched++
		if s, err := search(m.VirtualMedia.ID); s != nil || err != nil {
			return s, err
		}
	}

	var found string
	switch {
	case len(notCD) == 0 && len(notUsable) == 0:
		found = fmt.Sprintf("no VirtualMedia under %s or its managers", systemURI)
		if searched > 0 {
			found = fmt.Sprintf("the VirtualMedia collections of %s and its managers are empty", systemURI)
		}
	case len(notUsable) == 0:
		found = fmt.Sprintf("no CD/DVD slot for %s: slots offer only %s", systemURI, onlyTypes(notCD))
	default:
		found = fmt.Sprintf("the CD/DVD slots of %s (%s) have no InsertMedia action and do not allow PATCH (KVM-only slots)", systemURI, strings.Join(notUsable, ", "))
		if len(notCD) > 0 {
			found += "; the others are " + strings.Join(notCD, ", ")
		}
	}
	return nil, bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported, fmt.Errorf("%s: %w", found, bmc.ErrUnsupported))
}

// onlyTypes summarises what non-CD slots offer: "USBStick/Floppy (…/1 offers Floppy/USBStick)".
func onlyTypes(notCD []string) string {
	var types []string
	for _, s := range notCD {
		_, offers, _ := strings.Cut(s, " offers ")
		for t := range strings.SplitSeq(offers, "/") {
			if t != "" && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	if len(types) == 0 {
		types = []string{"no media types"}
	}
	return strings.Join(types, "/") + " (" + strings.Join(notCD, "; ") + ")"
}

// serviceRoot is the service root's path, as gofish found it.
func (c *Client) serviceRoot() string {
	if c.root.self != "" {
		return c.root.self
	}
	return "/redfish/v1/"
}

// slot finds the system's CD/DVD slot, through the one found before when it still reads.
func (c *Client) slot(systemURI string) (*slot, error) {
	c.mediaMu.Lock()
	known := c.slots[systemURI]
	c.mediaMu.Unlock()
	if known != "" {
		if s, err := c.readSlot(known, nil); err == nil && s.cd() && s.usable() {
			return s, nil
		} else if err != nil && !missing(err) {
			return nil, classify("reading "+known, err)
		}
	}
	s, err := c.findSlot(systemURI)
	if err != nil {
		return nil, err
	}
	c.mediaMu.Lock()
	if c.slots == nil {
		c.slots = map[string]string{}
	}
	c.slots[systemURI] = s.uri
	c.mediaMu.Unlock()
	return s, nil
}
