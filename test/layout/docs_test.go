package layout

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docsDir is the documentation, relative to this package's directory.
const docsDir = "../../docs"

// docsIndex is the page that lists every other file of docsDir.
const docsIndex = "README.md"

// mdLink is a Markdown inline link or image: [text](target) or [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode is a code span, whose brackets are not links.
var inlineCode = regexp.MustCompile("`[^`]*`")

// TestDocsIndexListsEveryPage: docs/README.md is the way into the documentation, so every file
// under docs/ is linked from it.
func TestDocsIndexListsEveryPage(t *testing.T) {
	links, err := readLinks(filepath.Join(docsDir, docsIndex))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range links {
		if target, _, ok := localTarget(filepath.Join(docsDir, docsIndex), l.target); ok {
			linked[filepath.Clean(target)] = true
		}
	}
	files, err := docsFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if filepath.Base(f) == docsIndex && filepath.Dir(f) == filepath.Clean(docsDir) {
			continue
		}
		if !linked[filepath.Clean(f)] {
			rel, _ := filepath.Rel(docsDir, f)
			t.Errorf("docs/%s is not linked from docs/%s: add a line for it", filepath.ToSlash(rel), docsIndex)
		}
	}
}

// TestDocsLinksResolve: every relative link in a page under docs/ names a file or directory
// that exists in the repository, and a #fragment on a Markdown page names one of its headings.
// Links with a scheme (https:, mailto:) are not followed.
func TestDocsLinksResolve(t *testing.T) {
	files, err := docsFiles()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range files {
		if filepath.Ext(page) != ".md" {
			continue
		}
		links, err := readLinks(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(docsDir, page)
		where := "docs/" + filepath.ToSlash(rel)
		for _, l := range links {
			target, fragment, ok := localTarget(page, l.target)
			if !ok {
				continue
			}
			checked++
			abs, err := filepath.Abs(target)
			if err != nil {
				t.Fatal(err)
			}
			if abs != repo && !strings.HasPrefix(abs, repo+string(filepath.Separator)) {
				t.Errorf("%s:%d: %s points outside the repository", where, l.line, l.target)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s:%d: %s: no such file", where, l.line, l.target)
				continue
			}
			if fragment == "" || filepath.Ext(target) != ".md" {
				continue
			}
			anchors, err := headingAnchors(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors[fragment] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", where, l.line, l.target, filepath.Base(target), fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found in docs/: the link pattern is stale")
	}
}

// docsFiles lists every file under docsDir.
func docsFiles() ([]string, error) {
	var files []string
	err := filepath.WalkDir(docsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 && err == nil {
		err = fmt.Errorf("no files under %s", docsDir)
	}
	return files, err
}

type link struct {
	target string
	line   int
}

// readLinks returns the Markdown links of a page, outside fenced code blocks and code spans.
func readLinks(path string) ([]link, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var links []link
	fenced := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			links = append(links, link{target: m[1], line: n})
		}
	}
	return links, sc.Err()
}

// localTarget resolves a link of the page at from to a path and a fragment; ok is false for a
// link with a scheme. A link that is only a #fragment names from itself.
func localTarget(from, target string) (path, fragment string, ok bool) {
	if i := strings.Index(target, ":"); i > 0 && !strings.ContainsAny(target[:i], "/#.") {
		return "", "", false // https:, mailto:, …
	}
	path, fragment, _ = strings.Cut(target, "#")
	if path == "" {
		return from, fragment, true
	}
	return filepath.Join(filepath.Dir(from), filepath.FromSlash(path)), fragment, true
}

// headingAnchors are the anchors GitHub gives a page's headings: lower case, everything but
// letters, digits, hyphens and underscores dropped, spaces as hyphens, a repeated one suffixed
// -1, -2, ….
func headingAnchors(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
				return r
			}
			return -1
		}, strings.ToLower(text))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}
