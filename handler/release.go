package handler

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
)

// Retrying a claim's release (see releaseClaim).
const (
	// releaseWindow is how long a release is tried: long enough to ride
	// out a database restart or a dropped connection, well short of a
	// sender's attempt timeout (the client's is 15 seconds).
	releaseWindow = 5 * time.Second
	// releasePause is the first pause before a failed release is tried
	// again; it doubles up to releasePauseCap.
	releasePause    = 10 * time.Millisecond
	releasePauseCap = 500 * time.Millisecond
)

// releaseClaim gives c back after processing failed, so that the
// sender's retry processes the notification. A release that fails (the
// database went away for a moment, the very failure that may have failed
// processing) is tried again for up to releaseWindow, with ctx's values
// but not its cancellation: a claim left processing would answer every
// retry 503 in_progress until it goes stale. The claim is fenced, so a
// release after another request took it over is a no-op. Only a release
// that still fails is logged.
func releaseClaim(ctx context.Context, inbox protocol.Inbox, c protocol.InboxClaim, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	pause := releasePause
	for {
		err := inbox.ReleaseClaim(ctx, c)
		if err == nil {
			return
		}
		if courier.CodeOf(err) == courier.CodeInvalidArgument || !pauseFor(ctx, pause) {
			logger.ErrorContext(ctx, "handler: claim not released", slog.String(logkey.Code, string(courier.CodeInternal)), slog.Any(logkey.Error, err))
			return
		}
		pause = min(2*pause, releasePauseCap)
	}
}

// pauseFor waits about d (jittered between d/2 and d) and reports whether
// ctx is still live.
func pauseFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d/2 + rand.N(d/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
