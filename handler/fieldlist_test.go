package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
)

// listedNote is a notification whose every element and map value can fail
// validation, so one body can fail on as many fields as it has values.
type listedNote struct {
	ID    string         `json:"id" validate:"required"`
	Items []listedItem   `json:"items" validate:"dive"`
	M     map[string]int `json:"m" validate:"dive,gt=0"`
}

type listedItem struct {
	Qty int `json:"qty" validate:"gt=0"`
}

func (n listedNote) DedupeKey() string { return n.ID }

// listedReceiver serves a Receiver[listedNote] on a real SQLite inbox with
// the default body limit (1 MiB), and counts the function's calls.
func listedReceiver(t *testing.T) (*receiverBundle, *atomic.Int32) {
	t.Helper()
	s := anyStore(t)
	keys := couriertest.StandardWebhooksKeys("cms-host")
	var calls atomic.Int32
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier}, func(context.Context, *sqlx.Tx, listedNote) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &receiverBundle{store: s, server: hostileServe(t, rcv), signer: keys.Signer}, &calls
}

// listedProblem is a 400's problem body with its detail and field list.
type listedProblem struct {
	Status int          `json:"status"`
	Code   courier.Code `json:"code"`
	Detail string       `json:"detail"`
	Errors []struct {
		Field string `json:"field"`
		Rule  string `json:"rule"`
	} `json:"errors"`
}

// maxListedAnswer bounds the answer to a body that fails on any number of
// fields: 100 fields of at most 256 bytes, with their JSON around them.
const maxListedAnswer = 100*(256+64) + 512

// TestValidationAnswerIsBounded: a body that fails on 100,000 values, or
// carries 60,000 unknown members, or one member whose name is 900 KB long,
// is refused 400 validation_failed as before, with nothing stored, but
// its answer names at most 100 fields, each path at most 256 bytes (a cut
// one its beginning and end around "…"), and says how many failed when it names fewer: the
// answer stays small whatever the body holds.
func TestValidationAnswerIsBounded(t *testing.T) {
	t.Parallel()
	var unknowns, items strings.Builder
	unknowns.WriteString(`{"id":"n1"`)
	for i := range 60000 {
		fmt.Fprintf(&unknowns, `,"u%d":1`, i)
	}
	unknowns.WriteString("}")
	items.WriteString(`{"id":"n1","items":[`)
	for i := range 100000 {
		if i > 0 {
			items.WriteString(",")
		}
		items.WriteString(`{"qty":0}`)
	}
	items.WriteString("]}")
	for _, tc := range []struct {
		name   string
		body   string
		failed int    // how many fields failed
		first  string // the first field listed
		rule   string
	}{
		{"one long member name", `{"id":"n1","` + strings.Repeat("k", 900000) + `":1}`, 1, strings.Repeat("k", 126) + "…" + strings.Repeat("k", 127), "unknown"},
		{"60k unknown members", unknowns.String(), 60000, "u0", "unknown"},
		{"100k invalid items", items.String(), 100000, "items[0].qty", "gt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, calls := listedReceiver(t)
			resp, out := b.post(t, "n1", []byte(tc.body), time.Now(), nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %.300s", resp.StatusCode, out)
			}
			if len(out) > maxListedAnswer {
				t.Errorf("the answer to a %d-byte body is %d bytes, over %d: %.300s", len(tc.body), len(out), maxListedAnswer, out)
			}
			var p listedProblem
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatalf("%v: %.300s", err, out)
			}
			if p.Status != http.StatusBadRequest || p.Code != courier.CodeValidation {
				t.Errorf("problem %d %s, want 400 %s", p.Status, p.Code, courier.CodeValidation)
			}
			if want := min(tc.failed, 100); len(p.Errors) != want {
				t.Errorf("%d fields listed, want %d", len(p.Errors), want)
			}
			for _, f := range p.Errors {
				if len(f.Field) > 256 || !utf8.ValidString(f.Field) {
					t.Errorf("a field path of %d bytes (valid UTF-8: %t), over 256", len(f.Field), utf8.ValidString(f.Field))
					break
				}
			}
			if len(p.Errors) > 0 && (p.Errors[0].Field != tc.first || p.Errors[0].Rule != tc.rule) {
				t.Errorf("first field %.80q (%s), want %.80q (%s)", p.Errors[0].Field, p.Errors[0].Rule, tc.first, tc.rule)
			}
			if tc.failed > 100 {
				if want := fmt.Sprintf("first 100 of %d", tc.failed); !strings.Contains(p.Detail, want) {
					t.Errorf("detail %q does not say %q", p.Detail, want)
				}
			}
			if n := inboxRows(t, b.store); n != 0 || calls.Load() != 0 {
				t.Errorf("stored %d inbox rows, called the function %d times; want neither", n, calls.Load())
			}
		})
	}
}

// TestValidationAnswerIsDeterministic: the same body refused twice is
// answered with the same bytes, though the fields that failed are a map's
// values, which Go ranges over in no fixed order; and the list is cut to
// the same first fields.
func TestValidationAnswerIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, entries := range []int{5, 500} {
		t.Run(fmt.Sprint(entries, " map values"), func(t *testing.T) {
			t.Parallel()
			var body strings.Builder
			body.WriteString(`{"id":"n1","items":[{"qty":1},{"qty":0}],"m":{`)
			for i := range entries {
				if i > 0 {
					body.WriteString(",")
				}
				fmt.Fprintf(&body, `"k%d":0`, i)
			}
			body.WriteString("}}")
			b, _ := listedReceiver(t)
			var first []byte
			for range 5 {
				resp, out := b.post(t, "n1", []byte(body.String()), time.Now(), nil)
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("status %d: %.300s", resp.StatusCode, out)
				}
				if first == nil {
					first = out
					continue
				}
				if !bytes.Equal(out, first) {
					t.Fatalf("the same body answered\n%.400s\nthen\n%.400s", first, out)
				}
			}
			var p listedProblem
			if err := json.Unmarshal(first, &p); err != nil {
				t.Fatal(err)
			}
			// The struct's fields in their order, a slice's elements and a
			// map's values in the order of their index or key.
			want := []string{"items[1].qty", "m[k0]", "m[k1]", "m[k2]"}
			for i, w := range want {
				if i >= len(p.Errors) || p.Errors[i].Field != w {
					t.Fatalf("fields %+v, want them to begin %q", p.Errors[:min(len(p.Errors), 6)], want)
				}
			}
		})
	}
}
