package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The registry's bounds on what a client may make the manager hold (docs/identity.md). A 1 MiB
// body of empty objects decodes into hundreds of MiB of structs, so lists are counted in the
// raw JSON before anything is decoded, and only for a request whose token is good.
const (
	// MaxConcurrentRequests is how many probe requests the registry handles at once; the next
	// one is answered 503 with Retry-After, its body unread.
	MaxConcurrentRequests = 16
	// MaxConnections is how many connections the registry holds open; more wait in the kernel's
	// accept queue.
	MaxConnections = 256
	// MaxHeaderBytes bounds a request's header (a token is under 500 bytes).
	MaxHeaderBytes = 16 << 10
	// MaxNesting bounds how deeply a body's JSON nests (a report nests 5 deep).
	MaxNesting = 16
	// DefaultMaxItems bounds a list the report has no bound of its own for.
	DefaultMaxItems = 256
)

// listBounds bounds each list of a report, by its JSON path ("[]" an element of a list) in lower
// case: encoding/json matches field names without regard to case, and so does checkShape.
var listBounds = map[string]int{
	"inventory.processors":                      256,
	"inventory.processors[].capabilities":       1024, // CPU flags: about 200 on today's x86
	"inventory.memorymodules":                   1024,
	"inventory.storage":                         256, // as a wipe report's disks (the API's bound)
	"inventory.networkinterfaces":               256,
	"inventory.networkinterfaces[].ipaddresses": 64,
	"inventory.pcidevices":                      4096,
	"wipe.disks":                                256, // the API's bound
	"warnings":                                  256, // the first 64 are kept
}

// checkShape refuses a body nested deeper than MaxNesting or with a list longer than its bound,
// walking its tokens without building anything from them. A body that is not JSON passes: the
// strict decoder says what is wrong with it.
func checkShape(data []byte) error {
	type frame struct {
		path  string
		array bool
		items int
		key   string // an object's current key
		inKey bool   // an object's next token is a key
	}
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		delim, _ := tok.(json.Delim)
		path := ""
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			switch {
			case delim == '}' || delim == ']':
				stack = stack[:n-1]
				continue
			case top.array:
				top.items++
				if limit := maxItems(strings.ToLower(top.path)); top.items > limit {
					return fmt.Errorf("%s lists more than %d items", top.path, limit)
				}
				path = top.path + "[]"
			case top.inKey:
				top.key, _ = tok.(string)
				top.inKey = false
				continue
			default:
				path = strings.TrimPrefix(top.path+"."+top.key, ".")
				top.inKey = true
			}
		}
		if delim == '{' || delim == '[' {
			if len(stack) == MaxNesting {
				return fmt.Errorf("the JSON nests deeper than %d levels", MaxNesting)
			}
			stack = append(stack, frame{path: path, array: delim == '[', inKey: delim == '{'})
		}
	}
}

func maxItems(path string) int {
	if n, ok := listBounds[path]; ok {
		return n
	}
	return DefaultMaxItems
}

// concurrencyLimit wraps handlers so that n requests are handled at once, across all of them;
// the next one is answered 503 at once, with Retry-After, and its connection closed rather than
// its body read (the server would otherwise read up to 256 KiB of it to reuse the connection).
func concurrencyLimit(n int) func(http.HandlerFunc) http.Handler {
	slots := make(chan struct{}, n)
	return func(next http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				next(w, r)
			default:
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusServiceUnavailable, "the registry is answering %d requests already; send it again", n)
			}
		})
	}
}
