package wire

import (
	"strings"
	"testing"
)

func TestParseAttempt(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"1": 1, "20": 20, "1000": 1000, "0": 0, "01": 0, "1001": 0, "": 0, "-1": 0, "x": 0, "+1": 0} {
		got, ok := ParseAttempt(s)
		if ok != (want != 0) || got != want {
			t.Errorf("ParseAttempt(%q) = %d, %v", s, got, ok)
		}
	}
}

func TestIsCode(t *testing.T) {
	t.Parallel()
	long := "a" + strings.Repeat("b", 127) // 128 bytes: the longest code
	for s, want := range map[string]bool{
		"not_found": true, "webhook_signature_key_revoked": true, "a": true, "a.b-c_9": true, long: true,
		"": false, "Not_found": false, "9lives": false, "_x": false, "a b": false, "a/b": false, long + "c": false,
	} {
		if IsCode(s) != want {
			t.Errorf("IsCode(%q) = %v, want %v", s, !want, want)
		}
	}
}
