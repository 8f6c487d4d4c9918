// Package prometheus exposes courier's metric events in the Prometheus
// text exposition format, without a dependency on a metrics library: the
// core packages report typed events through hooks, and this adapter at
// the edge counts them.
//
//	m := prometheus.New()
//	s, _ := sqlite.Open(ctx, path, store.Config{Hook: m.StoreHook})
//	w, _ := client.NewWorker(client.Config{Store: s, Signer: signer, Hook: m.WorkerHook})
//	rcv, _ := handler.NewTerminal(handler.ReceiverConfig{Store: s, Verifier: v, Hook: m.ReceiverHook}, fn)
//	mux.Handle("GET /metrics", m)
package prometheus
