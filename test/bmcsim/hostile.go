package bmcsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// hostile is the hostile part of the faults in force; the zero value when there are none.
func (b *BMC) hostile() Faults {
	if fs := b.faults.Load(); fs != nil {
		return fs.f
	}
	return Faults{}
}

// extraSystemPrefix starts the Ids of the systems ExtraSystems makes up: "x0", "x1", …
const extraSystemPrefix = "x"

// systemsCollection is the Systems collection, with the made-up systems listed after the real.
func (b *BMC) systemsCollection() any {
	m, extra := b.model, b.hostile().ExtraSystems
	paths := make([]string, 0, len(m.systems)+extra)
	for _, s := range m.systems {
		paths = append(paths, s.path)
	}
	for i := range extra {
		paths = append(paths, systemsPath+"/"+extraSystemPrefix+strconv.Itoa(i))
	}
	return m.collection(systemsPath, "ComputerSystemCollection", "Computer System Collection", paths)
}

// extraSystem answers a made-up system's GET, when id names one of ExtraSystems.
func (b *BMC) extraSystem(id string) (endpoint, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(id), extraSystemPrefix))
	if !strings.HasPrefix(strings.ToLower(id), extraSystemPrefix) || err != nil || n < 0 || n >= b.hostile().ExtraSystems {
		return endpoint{}, false
	}
	m := b.model
	return get(func() any {
		id := extraSystemPrefix + strconv.Itoa(n)
		body := m.resource(systemsPath+"/"+id, "#ComputerSystem.v1_20_0.ComputerSystem", id, "Made-up system "+id)
		body["UUID"] = hashUUID("ironfleet-bmcsim-extra-system-" + id)
		body["PowerState"] = "Off"
		return body
	}), true
}

// hugeChunk is what a huge body is written from, over and over.
var hugeChunk = []byte(strings.Repeat("x", 64<<10))

// hugeSystem answers a system's GET with a body of size bytes: a JSON object whose Name runs
// on for as long as it takes, written a chunk at a time until done or the client goes.
func (b *BMC) hugeSystem(s *system, size int64, chunked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		head := fmt.Sprintf(`{"@odata.id":%q,"@odata.type":"#ComputerSystem.v1_20_0.ComputerSystem","Id":%q,"Name":"`, s.path, s.spec.ID)
		const tail = `"}`
		size = max(size, int64(len(head)+len(tail)))
		h := w.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("OData-Version", "4.0")
		if !chunked {
			h.Set("Content-Length", strconv.FormatInt(size, 10))
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		if _, err := w.Write([]byte(head)); err != nil {
			return
		}
		for left := size - int64(len(head)+len(tail)); left > 0; {
			n, err := w.Write(hugeChunk[:min(left, int64(len(hugeChunk)))])
			if err != nil {
				return // the client gave up, as it should
			}
			left -= int64(n)
		}
		_, _ = w.Write([]byte(tail))
	}
}
