package bmcsim

import "sync"

// MediaRecorder keeps every MediaEvent a BMC reports (RecordMedia), for the tests that check
// which inserts and ejects a client caused.
type MediaRecorder struct {
	mu  sync.Mutex
	evs []MediaEvent
}

// RecordMedia records b's media changes from now on (OnMediaChange).
func RecordMedia(b *BMC) *MediaRecorder {
	r := &MediaRecorder{}
	b.OnMediaChange(func(ev MediaEvent) {
		r.mu.Lock()
		r.evs = append(r.evs, ev)
		r.mu.Unlock()
	})
	return r
}

// Events returns a copy of the events recorded so far, oldest first.
func (r *MediaRecorder) Events() []MediaEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]MediaEvent(nil), r.evs...)
}
