package vm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"time"
)

// ansiEscape matches the terminal escapes firmware writes to a serial console: CSI
// sequences (colours, cursor moves, clears), OSC strings, charset selections and two-byte
// escapes (SeaBIOS starts with ESC c, a terminal reset).
var ansiEscape = regexp.MustCompile(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[0-~])`)

// StripANSI removes terminal escapes and control characters other than tabs from one line.
func StripANSI(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if r == '\t' || (r >= ' ' && r != 0x7f) {
			return r
		}
		return -1
	}, s)
}

// ConsoleLines splits serial console output into the lines a person would read. SeaBIOS,
// iPXE and Linux end lines with "\r\n", "\n\r" or a bare "\r" (progress redrawn in place),
// so a line ends at either byte; escapes are stripped, trailing blanks trimmed and empty
// lines dropped. A last line without an end is included.
func ConsoleLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			i = len(data)
		}
		if line := cleanLine(data[:i]); line != "" {
			lines = append(lines, line)
		}
		if i == len(data) {
			break
		}
		data = data[i+1:]
	}
	return lines
}

func cleanLine(raw []byte) string {
	return strings.TrimRight(StripANSI(string(raw)), " \t")
}

// ReadConsole reads a console log into lines (see ConsoleLines); a log not written yet has
// none.
func ReadConsole(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ConsoleLines(data), nil
}

// consolePoll is how often TailConsole looks for new output: fast enough for a person
// watching boot stages, cheap for a file that grows by a few kilobytes per boot.
const consolePoll = 100 * time.Millisecond

// TailConsole follows a console log from its start, sending each complete line (see
// ConsoleLines) as it is written, until ctx ends; then it closes the channel. It waits for a
// log that does not exist yet, and starts over when the log is truncated. A line is sent
// once its end arrives, so iPXE's "Configuring ......" appears when it finishes.
func TailConsole(ctx context.Context, path string) <-chan string {
	out := make(chan string, 64)
	go func() {
		defer close(out)
		var offset int64
		var partial []byte
		tick := time.NewTicker(consolePoll)
		defer tick.Stop()
		buf := make([]byte, 64<<10)
		for {
			f, err := os.Open(path)
			if err == nil {
				if st, statErr := f.Stat(); statErr == nil && st.Size() < offset {
					offset, partial = 0, nil // truncated: a new log
				}
				for {
					n, readErr := f.ReadAt(buf, offset)
					offset += int64(n)
					partial = append(partial, buf[:n]...)
					if readErr != nil || n == 0 { // io.EOF: caught up; other errors: retry at the next tick
						break
					}
				}
				_ = f.Close()
				for {
					i := bytes.IndexAny(partial, "\r\n")
					if i < 0 {
						break
					}
					line := cleanLine(partial[:i])
					partial = partial[i+1:]
					if line == "" {
						continue
					}
					select {
					case out <- line:
					case <-ctx.Done():
						return
					}
				}
				partial = append([]byte(nil), partial...) // do not pin what was already sent
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return out
}
