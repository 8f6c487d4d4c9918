package logkey

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUndocumentedFindsKeysOutsideTheList: a record's keys outside the
// list are reported, group members by their dotted name; courier's own
// are not.
func TestUndocumentedFindsKeysOutsideTheList(t *testing.T) {
	t.Parallel()
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "worker: x", 0)
	r.AddAttrs(slog.Int(Delivery, 1), slog.String("payload", "p"), slog.Group("g", slog.String(Code, "c")))
	if got := Undocumented(r); !slices.Equal(got, []string{"payload", "g.code"}) {
		t.Fatalf("Undocumented = %v", got)
	}
	var sb strings.Builder
	logger := slog.New(slog.NewJSONHandler(&sb, nil))
	logger.InfoContext(context.Background(), "handler: y", slog.Int(HTTPStatus, 401), slog.String(Code, "signature_rejected"))
	logger.InfoContext(context.Background(), "handler: z", slog.String("header", "h"))
	if got := UndocumentedJSON(sb.String() + "not json\n"); !slices.Equal(got, []string{"header", "not json"}) {
		t.Fatalf("UndocumentedJSON = %v", got)
	}
}
