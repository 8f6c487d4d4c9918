package courier_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/logkey"
)

// TestLogKeysAreTheDocumentedOnes: the keys the package documentation
// promises ("Log attributes") are exactly the constants courier's loggers
// use (internal/logkey), in the same order; the packages' own tests fail
// on a logged key outside them.
func TestLogKeysAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "// # Log attributes\n")
	if !ok {
		t.Fatal("doc.go has no Log attributes section")
	}
	var documented []string
	for line := range strings.Lines(section) {
		if rest, ok := strings.CutPrefix(line, "//\t"); ok {
			documented = append(documented, strings.Fields(rest)[0])
		}
	}
	if !slices.Equal(documented, logkey.All()) {
		t.Fatalf("documented keys %v, logkey.All %v", documented, logkey.All())
	}
}
