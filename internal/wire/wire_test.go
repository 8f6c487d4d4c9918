package wire

import "testing"

func TestParseAttempt(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"1": 1, "20": 20, "1000": 1000, "0": 0, "01": 0, "1001": 0, "": 0, "-1": 0, "x": 0, "+1": 0} {
		got, ok := ParseAttempt(s)
		if ok != (want != 0) || got != want {
			t.Errorf("ParseAttempt(%q) = %d, %v", s, got, ok)
		}
	}
}
