package ack_test

import (
	"bytes"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// TestAckSizeBound: Parse, and so Verify, read an Ack of at most 16 KiB:
// one of exactly 16,384 bytes (whitespace does not matter) verifies, one
// byte more is ack_invalid, as a sender reads no more of an answer.
func TestAckSizeBound(t *testing.T) {
	t.Parallel()
	body := []byte(`{"n":1}`)
	want := ack.New("n-1", body)
	exact := want.Marshal()
	pad := func(n int) []byte { // exact, with spaces before its closing brace up to n bytes
		return append(append(bytes.Clone(exact[:len(exact)-1]), bytes.Repeat([]byte(" "), n-len(exact))...), '}')
	}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{16 << 10, true}, {16<<10 + 1, false}} {
		got := pad(tc.size)
		if len(got) != tc.size {
			t.Fatalf("padded to %d bytes, want %d", len(got), tc.size)
		}
		_, perr := ack.Parse(got)
		verr := want.Verify(got)
		if tc.ok && (perr != nil || verr != nil) {
			t.Errorf("an Ack of %d bytes: Parse %v, Verify %v; want both nil", tc.size, perr, verr)
		}
		if !tc.ok && (courier.CodeOf(perr) != courier.CodeAckInvalid || courier.CodeOf(verr) != courier.CodeAckInvalid) {
			t.Errorf("an Ack of %d bytes: Parse %v, Verify %v; want ack_invalid", tc.size, perr, verr)
		}
	}
}
