package ack

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzJSONInteger holds jsonInteger to math/big's exact reading of the
// same decimal: a JSON number is an integer within int64 exactly when the
// rational it writes is one.
func FuzzJSONInteger(f *testing.F) {
	for _, s := range []string{"31", "31.0", "3.1e1", "0.0310e3", "-0", "-0.0e-5", "1.5", "1e-400", "1E400",
		"31.000000000000001", "4503599627370496.5", "9007199254740993.0", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "922337203685477580.7e1", "1e18", "1e19", "10e-1", "100e-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) || s == "" || s != strings.TrimSpace(s) || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
			return // not a number, as the decoder hands it over
		}
		if _, exp, ok := strings.Cut(strings.ToLower(s), "e"); ok {
			if e, err := strconv.Atoi(exp); err != nil || e > 1000 || e < -1000 {
				return // math/big would spend its time on the power
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("math/big does not read the JSON number %q", s)
		}
		want := r.IsInt() && r.Num().IsInt64()
		n, got := jsonInteger([]byte(s))
		if got != want || got && n != r.Num().Int64() {
			t.Fatalf("jsonInteger(%q) = %d, %v; math/big says integer within int64: %v (%s)", s, n, got, want, r.RatString())
		}
	})
}
