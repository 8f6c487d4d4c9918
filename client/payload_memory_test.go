package client_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// heldMemory is what a worker held while delivering a batch of large
// payloads: its live heap once every attempt of the batch was at the
// receiver (after a collection), and the highest heap seen while it
// claimed and delivered them, both beyond the test's own.
type heldMemory struct {
	live, peak uint64
}

// largePayload is a strict JSON document of size bytes.
func largePayload(size int) []byte {
	p := append([]byte(`{"data":"`), bytes.Repeat([]byte("x"), size-len(`{"data":""}`))...)
	return append(p, `"}`...)
}

// measureHeldPayloads enqueues n deliveries of a payload of size bytes
// (sealed at rest when sealed), has a worker of the given Concurrency
// claim them in one Work (BatchSize n), and measures what it held. The
// receiver holds every request until all the attempts that can be in
// flight at once have sent their whole body, so the live heap is taken
// with the worker at its most.
func measureHeldPayloads(tb testing.TB, n, concurrency, size int, sealed bool) heldMemory {
	tb.Helper()
	cfg := store.Config{}
	if sealed {
		key, err := store.NewPayloadKey("pk1", bytes.Repeat([]byte{7}, 32))
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Encryption = &store.Encryption{Current: "pk1", Keys: []store.PayloadKey{key}}
	}
	s, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "outbox.db"), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })

	payload := largePayload(size)
	atOnce := min(n, concurrency)
	var arrived atomic.Int32
	all, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		if arrived.Add(1) == int32(atOnce) {
			close(all)
		}
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write(ack.New(r.Header.Get("webhook-id"), payload).Marshal())
	}))
	tb.Cleanup(srv.Close)

	for i := range n {
		tx, err := s.DB().BeginTxx(tb.Context(), nil)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := s.Outbox.Enqueue(tb.Context(), tx, store.EnqueueParams{
			NotificationID: "big-" + strconv.Itoa(i), Endpoint: srv.URL + "/hooks", Payload: payload,
		}); err != nil {
			tb.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{
		Store: s, Owner: "big-worker", Signer: signer, Transport: loopbackGuard(tb, srv.URL).Transport(),
		Concurrency: concurrency, BatchSize: n, EndpointConcurrency: n,
		Timeout: 30 * time.Second, Lease: 2 * time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}

	// A collection at a tenth of the live heap's growth keeps what is
	// sampled near what is live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		got, err := w.Work(tb.Context())
		if err == nil && got != n {
			tb.Errorf("Work claimed %d, want %d", got, n)
		}
		done <- err
	}()
	var held heldMemory
	select {
	case <-all:
	case err := <-done:
		tb.Fatalf("Work ended before the attempts reached the receiver: %v", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held.live = ms.HeapAlloc - min(base, ms.HeapAlloc)
	close(release)
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	close(stop)
	sampling.Wait()
	held.peak = peak.Load() - min(base, peak.Load())
	return held
}

// A worker holds one copy of each payload it claimed, not one per step
// it passes through (the claim's read, the opening of a sealed row, the
// signature, the request body): what a claim of large payloads costs is
// the figure client.Config.BatchSize gives. Work claims a batch larger
// than Concurrency here, so that the claim, not the attempts, is most
// of what the worker holds. A sealed batch was held twice until the
// claim committed, sealed and opened. Not parallel: it measures the
// process's heap.
func TestWorkerHoldsOneCopyOfEachClaimedPayload(t *testing.T) {
	const size, n, concurrency = 2 << 20, 16, 2
	for _, sealed := range []bool{false, true} {
		t.Run("sealed="+strconv.FormatBool(sealed), func(t *testing.T) {
			held := measureHeldPayloads(t, n, concurrency, size, sealed)
			t.Logf("%d payloads of %d MiB: live %d MiB, peak %d MiB", n, size>>20, held.live>>20, held.peak>>20)
			// Slack for the store, the HTTP connections and what a
			// collection has yet to free: a few payloads' worth.
			if limit := uint64((n + 2) * size); held.live > limit {
				t.Errorf("with %d deliveries claimed the worker held %d MiB, want at most %d MiB", n, held.live>>20, limit>>20)
			}
			if limit := uint64((n + n/2) * size); held.peak > limit {
				t.Errorf("claiming and delivering %d payloads the heap peaked %d MiB above the test's, want at most %d MiB", n, held.peak>>20, limit>>20)
			}
		})
	}
}

// BenchmarkWorkerHeldPayloads measures what a Worker of Concurrency 64
// holds delivering 4 MiB payloads (the largest Enqueue takes): MiB live
// with every attempt in flight, and the heap's peak while it claims and
// delivers them. Run it alone: go test -run XXX -bench WorkerHeld
// -benchtime 1x ./client.
func BenchmarkWorkerHeldPayloads(b *testing.B) {
	const size, concurrency = 4 << 20, 64
	for _, sealed := range []bool{false, true} {
		b.Run("sealed="+strconv.FormatBool(sealed), func(b *testing.B) {
			var held heldMemory
			for b.Loop() {
				held = measureHeldPayloads(b, concurrency, concurrency, size, sealed)
			}
			b.ReportMetric(float64(held.live)/(1<<20), "MiB-live")
			b.ReportMetric(float64(held.peak)/(1<<20), "MiB-peak")
			b.ReportMetric(float64(held.peak)/float64(concurrency*size), "peak/payloads")
		})
	}
}
