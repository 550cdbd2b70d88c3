package bmcsim

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// staticTree is a DMTF "tall" mockup held in memory: every resource directory's index.json
// (or $metadata's index.xml) keyed by its normalised Redfish path. Loading it once at start
// means requests never touch the file system, so no request path can escape the mockup.
type staticTree struct {
	files map[string]staticFile
}

type staticFile struct {
	body        []byte
	contentType string
}

// loadStaticTree reads a mockup whose directory is /redfish/v1.
func loadStaticTree(dir string) (*staticTree, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return nil, fmt.Errorf("%s is not a Redfish mockup (no index.json for /redfish/v1): %w", dir, err)
	}
	t := &staticTree{files: map[string]staticFile{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if base := path.Base(rel); base == "index.json" || base == "index.xml" {
			rel = path.Dir(rel) // a resource is its directory
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		key := staticKey(path.Join("/redfish/v1", rel))
		if _, dup := t.files[key]; !dup { // paths differing only in case: the first wins
			t.files[key] = staticFile{body: body, contentType: ctype}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read mockup %s: %w", dir, err)
	}
	return t, nil
}

// staticKey normalises a path as the live router does: case, trailing and double slashes.
func staticKey(p string) string { return strings.Join(splitPath(p), "/") }

// StaticHandler serves a DMTF mockup directory (the directory is /redfish/v1) read-only. No
// credentials are needed but Basic and session headers are accepted, and a POST to
// SessionService/Sessions answers a fake session so session-based clients can log in.
func StaticHandler(dir string) (http.Handler, error) {
	b, err := newStaticBMC(dir)
	if err != nil {
		return nil, err
	}
	return b.Handler(), nil
}

// StartStatic serves a mockup directory on a random loopback port. Stats and faults work;
// the power and boot methods report nothing, since a mockup has no state to change.
func StartStatic(dir string, tls bool) (*BMC, error) { return StartStaticAt(dir, "", tls) }

// StartStaticAt is StartStatic on a chosen address ("" for a random loopback port).
func StartStaticAt(dir, addr string, tls bool) (*BMC, error) {
	b, err := newStaticBMC(dir)
	if err != nil {
		return nil, err
	}
	if err := b.listen(addr, tls); err != nil {
		return nil, err
	}
	return b, nil
}

func newStaticBMC(dir string) (*BMC, error) {
	t, err := loadStaticTree(dir)
	if err != nil {
		return nil, err
	}
	return newBMC(nil, t, newAuth("", "")), nil
}

func (b *BMC) serveStatic(w http.ResponseWriter, r *http.Request) {
	key := staticKey(r.URL.Path)
	if key == "redfish" {
		writeJSON(w, r, http.StatusOK, obj{"v1": rootPath})
		return
	}
	if strings.HasPrefix(key, staticKey(sessionsPath)) {
		if b.serveStaticSession(w, r, strings.TrimPrefix(key, staticKey(sessionsPath))) {
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeMethodNotAllowed(w, r, "GET, HEAD") // a mockup is read-only, actions included
		return
	}
	f, ok := b.static.files[key]
	if !ok {
		writeNotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("OData-Version", "4.0")
	h.Set("Content-Length", strconv.Itoa(len(f.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(f.body)
	}
}

// serveStaticSession fakes the session life cycle (login, read, logout) on top of a mockup,
// and reports whether it answered; other session paths fall through to the mockup's files.
func (b *BMC) serveStaticSession(w http.ResponseWriter, r *http.Request, rest string) bool {
	id := strings.TrimPrefix(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		var body struct{ UserName string }
		_ = json.NewDecoder(r.Body).Decode(&body) // any credentials will do
		s := b.auth.create(body.UserName, time.Now())
		b.stats.sessionsCreated.Add(1)
		w.Header().Set("X-Auth-Token", s.token)
		w.Header().Set("Location", sessionPath(s.id))
		writeJSON(w, r, http.StatusCreated, sessionBody(sessionPath(s.id), *s))
		return true
	case id == "" || strings.Contains(id, "/"):
		return false
	}
	s, ok := b.auth.lookup(id)
	if !ok {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, r, http.StatusOK, sessionBody(sessionPath(s.id), s))
	case http.MethodDelete:
		b.auth.remove(id)
		b.stats.sessionsDeleted.Add(1)
		writeNoContent(w)
	default:
		writeMethodNotAllowed(w, r, "GET, HEAD, DELETE")
	}
	return true
}
