package serve

import (
	"net/http"
	"testing"
)

// TestServerBoundsEveryPhase: the examples' servers bound the header, the
// body, the response and idle connections, and the header's size, so a
// slow or idle client cannot hold a connection or memory without end.
func TestServerBoundsEveryPhase(t *testing.T) {
	s := Server(http.NotFoundHandler())
	for name, v := range map[string]int64{
		"ReadHeaderTimeout": int64(s.ReadHeaderTimeout),
		"ReadTimeout":       int64(s.ReadTimeout),
		"WriteTimeout":      int64(s.WriteTimeout),
		"IdleTimeout":       int64(s.IdleTimeout),
		"MaxHeaderBytes":    int64(s.MaxHeaderBytes),
	} {
		if v <= 0 {
			t.Errorf("%s is %d: unbounded", name, v)
		}
	}
	if s.ReadTimeout > 30e9 {
		t.Errorf("ReadTimeout %s: more than 30 s for a body", s.ReadTimeout)
	}
}
