package ack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/courier-go/courier/ack"
)

// reportWithUnknowns is an envelope whose result is a valid delivery
// report with n members of the application's own besides.
func reportWithUnknowns(n int) ack.Reporting {
	var b strings.Builder
	b.WriteString(`{"notification_type":"final","reporting_period":{"start":"2026-01-02T03:04:05Z","end":"2026-01-03T03:04:05Z"},"currency":"USD",` +
		`"media_buy_deliveries":[{"media_buy_id":"mb_1","status":"active","totals":{"spend":1},"by_package":[{"spend":2}]}]`)
	for i := range n {
		fmt.Fprintf(&b, `,"u%d":1`, i)
	}
	b.WriteString("}")
	return ack.Reporting{Result: json.RawMessage(b.String())}
}

// TestReportingCheckSpendsNothingOnUnknownMembers: the members of a
// report that are the application's are allowed, and Check neither names
// nor keeps them: a report with 100,000 of them costs it no more
// allocations than one with ten. Not parallel: testing.AllocsPerRun
// counts every goroutine's.
func TestReportingCheckSpendsNothingOnUnknownMembers(t *testing.T) {
	few, many := reportWithUnknowns(10), reportWithUnknowns(100000)
	for _, r := range []ack.Reporting{few, many} {
		if err := r.Check(); err != nil {
			t.Fatalf("Check = %v, want nil", err)
		}
	}
	base := testing.AllocsPerRun(3, func() { _ = few.Check() })
	got := testing.AllocsPerRun(3, func() { _ = many.Check() })
	t.Logf("%.0f allocations with 100,000 members of its own, %.0f with 10", got, base)
	if got > base+100 {
		t.Fatalf("Check allocated %.0f times for a report with 100,000 members of its own, %.0f for one with 10", got, base)
	}
}

func BenchmarkReportingCheckUnknownMembers(b *testing.B) {
	r := reportWithUnknowns(100000)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
