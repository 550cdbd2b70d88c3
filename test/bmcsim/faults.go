package bmcsim

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Faults makes a BMC misbehave the way overloaded or flaky BMCs do. Rates are shares of
// requests in [0, 1]; one random draw per request picks at most one of drop, timeout,
// unauthorized and error, in that order, so rates summing past 1 starve the later ones.
type Faults struct {
	Latency          time.Duration // added before every answer
	ErrorRate        float64       // answered 500 or 503 (with Retry-After)
	TimeoutRate      float64       // hang until the client gives up (at most maxHang), then close the connection
	UnauthorizedRate float64       // answered 401 whatever the credentials
	DropRate         float64       // connection closed without an answer
	Seed             int64         // seeds the draw, so a failing run can be replayed

	// Hostile answers, what a compromised BMC could send to exhaust its client (hostile.go);
	// unlike the rates they apply to every request they concern.
	//
	// HugeSystem, when above 0, answers each ComputerSystem's GET with a JSON body of this many
	// bytes, generated as it is written, never held. HugeSystemChunked leaves out its
	// Content-Length, so a client learns its size only by reading it.
	HugeSystem        int64
	HugeSystemChunked bool
	// ExtraSystems lists this many more systems in the Systems collection, each answered as a
	// minimal ComputerSystem made up on request.
	ExtraSystems int
}

// maxHang bounds a TimeoutRate hang for clients that never give up (gofish's default client
// has no timeout); a real BMC's web server also gives up eventually.
const maxHang = 30 * time.Second

// faultState is one Faults setting with its own random source, replaced as a whole by
// SetFaults so the per-request path needs no lock when faults are off.
type faultState struct {
	f   Faults
	mu  sync.Mutex
	rng *rand.Rand
}

// SetFaults replaces the fault settings; the zero Faults turns injection off.
func (b *BMC) SetFaults(f Faults) {
	for _, r := range []*float64{&f.ErrorRate, &f.TimeoutRate, &f.UnauthorizedRate, &f.DropRate} {
		*r = min(max(*r, 0), 1)
	}
	f.Latency = max(f.Latency, 0)
	f.HugeSystem, f.ExtraSystems = max(f.HugeSystem, 0), max(f.ExtraSystems, 0)
	if f == (Faults{Seed: f.Seed}) {
		b.faults.Store(nil)
		return
	}
	seed := uint64(f.Seed)
	b.faults.Store(&faultState{f: f, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))})
}

// draw returns a uniform number in [0, 1) and a coin flip under the state's lock.
func (fs *faultState) draw() (float64, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.rng.Float64(), fs.rng.IntN(2) == 0
}

// injectFault applies the configured faults to one request and reports whether it answered
// the request. Dropped and timed-out requests abort the connection by panicking with
// http.ErrAbortHandler, which net/http turns into a silent close.
func (b *BMC) injectFault(w http.ResponseWriter, r *http.Request) bool {
	fs := b.faults.Load()
	if fs == nil {
		return false
	}
	f := fs.f
	if f.Latency > 0 && !b.wait(r, f.Latency) {
		panic(http.ErrAbortHandler) // the client left or the BMC is closing
	}
	u, coin := fs.draw()
	switch {
	case u < f.DropRate:
		panic(http.ErrAbortHandler)
	case u < f.DropRate+f.TimeoutRate:
		b.wait(r, maxHang)
		panic(http.ErrAbortHandler)
	case u < f.DropRate+f.TimeoutRate+f.UnauthorizedRate:
		writeUnauthorized(w, r)
	case u < f.DropRate+f.TimeoutRate+f.UnauthorizedRate+f.ErrorRate:
		if coin {
			writeError(w, r, http.StatusInternalServerError, msgInternalError,
				"The request failed due to an internal service error.  The service is still operational.")
		} else {
			w.Header().Set("Retry-After", "1")
			writeError(w, r, http.StatusServiceUnavailable, msgUnavailable,
				"The service is temporarily unavailable.  Retry in 1 seconds.", "1")
		}
	default:
		return false
	}
	return true
}

// wait sleeps for d unless the client goes away or the BMC closes first; it reports whether
// the full time passed.
func (b *BMC) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-b.closing:
		return false
	}
}
