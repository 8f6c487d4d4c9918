package readme_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sampleFiles are where the README's samples live: this package's, and
// the contrib modules' (compiled by their own builds).
var sampleFiles = []string{"samples_test.go", "../../contrib/*/*_test.go"}

// TestREADMESamplesCompile: every ```go block of README.md is marked with
// the region it shows, and is that region's text exactly, so that every
// Go sample in the README is code the build compiles; every region is
// shown.
func TestREADMESamplesCompile(t *testing.T) {
	regions := map[string]string{}
	for _, pattern := range sampleFiles {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no sample files match %s (%v)", pattern, err)
		}
		for _, f := range files {
			for name, text := range readRegions(t, f) {
				if _, dup := regions[name]; dup {
					t.Fatalf("region %q is defined twice (again in %s)", name, f)
				}
				regions[name] = text
			}
		}
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go samples")
	}
	shown := map[string]bool{}
	for _, b := range blocks {
		if b.name == "" {
			t.Errorf("README.md line %d: a ```go block without a <!-- sample: name --> line before it", b.line)
			continue
		}
		want, ok := regions[b.name]
		switch {
		case !ok:
			t.Errorf("README.md line %d: sample %q has no region in %v", b.line, b.name, sampleFiles)
		case b.text != want:
			t.Errorf("README.md line %d: sample %q differs from its region; the region reads:\n%s", b.line, b.name, want)
		}
		shown[b.name] = true
	}
	for name := range regions {
		if !shown[name] {
			t.Errorf("region %q is not shown in README.md", name)
		}
	}
}

// TestREADMESamplesReturnTheirErrors: a sample hands an error back, as an
// application does, rather than panicking on it: the promcourier sample
// alone wrote panic(err) and registry.MustRegister, which a reader copies
// into a server. A Must on a literal (netip.MustParsePrefix("…")) stays:
// it cannot fail at run time.
func TestREADMESamplesReturnTheirErrors(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	panics := regexp.MustCompile(`\bpanic\(|\blog\.Fatal|\.Must[A-Za-z]*\([^"]`)
	for _, b := range readmeBlocks(t, string(readme)) {
		for i, line := range strings.Split(b.text, "\n") {
			if panics.MatchString(line) {
				t.Errorf("README.md line %d, in sample %q: %s: return the error", b.line+1+i, b.name, strings.TrimSpace(line))
			}
		}
	}
}

var regionLine = regexp.MustCompile(`^\s*// readme:([a-z0-9-]+)$`)

// readRegions returns the regions of file by name, each unindented by
// the indentation of its first line.
func readRegions(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var name string
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		m := regionLine.FindStringSubmatch(line)
		switch {
		case m != nil && m[1] == "end":
			if name == "" {
				t.Fatalf("%s: readme:end without a region", file)
			}
			out[name] = unindent(lines)
			name, lines = "", nil
		case m != nil:
			if name != "" {
				t.Fatalf("%s: region %q opens inside %q", file, m[1], name)
			}
			name = m[1]
		case name != "":
			lines = append(lines, line)
		}
	}
	if name != "" {
		t.Fatalf("%s: region %q never ends", file, name)
	}
	return out
}

// unindent removes the first line's leading tabs from every line, and the
// blank lines at either end.
func unindent(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	indent := lines[0][:len(lines[0])-len(strings.TrimLeft(lines[0], "\t"))]
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

type block struct {
	name string
	line int
	text string
}

var sampleMark = regexp.MustCompile(`^<!-- sample: ([a-z0-9-]+) -->$`)

// readmeBlocks returns the ```go blocks of readme with the sample name
// marked on the line before each.
func readmeBlocks(t *testing.T, readme string) []block {
	t.Helper()
	lines := strings.Split(readme, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := block{line: i + 1}
		if i > 0 {
			if m := sampleMark.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.name = m[1]
			}
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		if j == len(lines) {
			t.Fatalf("README.md line %d: a ```go block never closes", i+1)
		}
		b.text = strings.Join(lines[i+1:j], "\n")
		out = append(out, b)
		i = j
	}
	return out
}
