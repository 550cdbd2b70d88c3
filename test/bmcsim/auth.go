package bmcsim

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sessionTimeout is the idle time after which a session expires, as SessionService reports.
const sessionTimeout = 30 * time.Minute

// auth holds the one account of a simulated BMC and its Redfish sessions. Only hashes of
// the credentials are kept, and they are compared in constant time.
type auth struct {
	mu       sync.Mutex
	user     string // shown in sessions; not secret on a BMC (it is in every session resource)
	userHash [32]byte
	passHash [32]byte
	sessions map[string]*session // by token
	byID     map[string]*session
	nextID   uint64
}

type session struct {
	id, token, user string
	lastUsed        time.Time
}

func newAuth(user, pass string) *auth {
	a := &auth{sessions: map[string]*session{}, byID: map[string]*session{}}
	a.setCredentials(user, pass)
	return a
}

// setCredentials replaces the account and ends every session, as a BMC does when its
// password is changed: clients holding tokens must log in again.
func (a *auth) setCredentials(user, pass string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.user = user
	a.userHash, a.passHash = sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	clear(a.sessions)
	clear(a.byID)
}

// valid compares both credentials in constant time; hashing first hides their lengths.
func (a *auth) valid(user, pass string) bool {
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	a.mu.Lock()
	defer a.mu.Unlock()
	return subtle.ConstantTimeCompare(u[:], a.userHash[:])&subtle.ConstantTimeCompare(p[:], a.passHash[:]) == 1
}

// authenticate accepts a live X-Auth-Token or Basic credentials. A token, when present,
// decides alone, so a stale token is refused even if Basic would pass (as on iDRAC and iLO).
func (a *auth) authenticate(r *http.Request, now time.Time) bool {
	if token := r.Header.Get("X-Auth-Token"); token != "" {
		return a.touch(token, now)
	}
	if user, pass, ok := r.BasicAuth(); ok {
		return a.valid(user, pass)
	}
	return false
}

// touch finds a live session by token and keeps it alive; expired sessions are dropped here.
func (a *auth) touch(token string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[token]
	if s == nil {
		return false
	}
	if now.Sub(s.lastUsed) > sessionTimeout {
		a.dropLocked(s)
		return false
	}
	s.lastUsed = now
	return true
}

func (a *auth) dropLocked(s *session) {
	delete(a.sessions, s.token)
	delete(a.byID, s.id)
}

func (a *auth) create(user string, now time.Time) *session {
	buf := make([]byte, 16)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails on supported platforms
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID++
	s := &session{id: strconv.FormatUint(a.nextID, 10), token: hex.EncodeToString(buf), user: user, lastUsed: now}
	a.sessions[s.token] = s
	a.byID[s.id] = s
	return s
}

func (a *auth) lookup(id string) (session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.byID[id]
	if s == nil {
		return session{}, false
	}
	return *s, true
}

func (a *auth) remove(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.byID[id]
	if s == nil {
		return false
	}
	a.dropLocked(s)
	return true
}

// live lists session Ids in creation order, dropping expired ones so ActiveSessions and the
// Sessions collection agree with what tokens still work.
func (a *auth) live(now time.Time) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(now)
	ids := make([]string, 0, len(a.byID))
	for id := range a.byID {
		ids = append(ids, id)
	}
	// Ids are decimal counters: shorter is older.
	slices.SortFunc(ids, func(x, y string) int {
		if c := cmp.Compare(len(x), len(y)); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return ids
}

// count is the number of live sessions.
func (a *auth) count(now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(now)
	return len(a.byID)
}

func (a *auth) expireLocked(now time.Time) {
	for _, s := range a.byID {
		if now.Sub(s.lastUsed) > sessionTimeout {
			a.dropLocked(s)
		}
	}
}

// login serves POST SessionService/Sessions: the one request that authenticates by body.
func (b *BMC) login(w http.ResponseWriter, r *http.Request) {
	var body struct{ UserName, Password string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, r, http.StatusBadRequest, msgMalformedJSON,
			"The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return
	}
	if !b.auth.valid(body.UserName, body.Password) {
		b.stats.authFailures.Add(1)
		writeUnauthorized(w, r)
		return
	}
	s := b.auth.create(body.UserName, time.Now())
	b.stats.sessionsCreated.Add(1)
	w.Header().Set("X-Auth-Token", s.token)
	w.Header().Set("Location", b.model.uri(sessionPath(s.id)))
	writeJSON(w, r, http.StatusCreated, b.model.sessionResource(*s))
}

// logout serves DELETE on a session; any authenticated caller may end any session, as with
// the single administrator account the simulator has.
func (b *BMC) logout(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !b.auth.remove(id) {
			writeNotFound(w, r)
			return
		}
		b.stats.sessionsDeleted.Add(1)
		writeNoContent(w)
	}
}

// SetCredentials changes the account mid-run; existing sessions stop working at once.
func (b *BMC) SetCredentials(user, pass string) { b.auth.setCredentials(user, pass) }
