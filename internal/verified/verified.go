// Package verified carries, in a request's context, the body
// middleware.Verify read and verified, to package handler's receivers:
// they take the bytes from there rather than read the request's Body,
// which reads the same bytes, again. An application's handler reads the
// Body.
package verified

import "context"

// bodyKey is the context key of the body.
type bodyKey struct{}

// WithBody returns ctx carrying body, the verified bytes of its request.
func WithBody(ctx context.Context, body []byte) context.Context {
	return context.WithValue(ctx, bodyKey{}, body)
}

// Body returns the body WithBody put in ctx. The slice is shared by every
// caller: do not modify it.
func Body(ctx context.Context) ([]byte, bool) {
	b, ok := ctx.Value(bodyKey{}).([]byte)
	return b, ok
}
