// Command gendocs writes the documentation that is generated from code: each state machine's
// lifecycle document, drawn from its internal/fsm table by looplab/fsm's Mermaid visualizer.
// `make docs` runs it; `make verify-generated` fails when its output drifts.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ironfleet/ironfleet/internal/fsm"
)

func main() {
	list := flag.Bool("list", false, "print the paths it writes, one per line, and write nothing")
	flag.Parse()
	for _, g := range fsm.Generated {
		if *list {
			fmt.Println(g.Path)
			continue
		}
		if err := write(g.Path, g.Source, g.Machine); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
	}
}

func write(path, source string, m fsm.Document) error {
	if err := m.Check(); err != nil {
		return fmt.Errorf("%s: the table is not well formed: %w", source, err)
	}
	doc, err := m.Markdown(source)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, doc, 0o644)
}
