package client_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryLogLineIsInThePackageDoc: the package doc's Logs lists every
// line the worker logs, by level. The list Config.Logger kept in prose
// had fallen behind the code; this keeps the table whole.
func TestEveryLogLineIsInThePackageDoc(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	message := regexp.MustCompile(`"(worker: [^"\n]+)"`)
	var found int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range message.FindAllSubmatch(src, -1) {
			msg := string(m[1])
			found++
			if !strings.Contains(string(doc), msg) {
				t.Errorf("%s logs %q, which the package doc's Logs does not list", f, msg)
			}
		}
	}
	if found < 20 {
		t.Fatalf("found %d log messages in the package's files; the pattern no longer finds them", found)
	}
}
