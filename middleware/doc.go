// Package middleware holds courier's func(http.Handler) http.Handler pieces:
// a body limit, panic recovery, signature verification and a per-request
// database transaction.
//
// Each middleware validates its configuration once, when it is built, and
// panics on an invalid one; no request ever pays for that check. Every
// refusal is an RFC 9457 application/problem+json body with a stable code.
//
// A receiver composes them outermost first:
//
//	h := middleware.Recover(logger)(
//		middleware.Verify(verifier, 1<<20)(
//			middleware.Transaction(db)(app)))
//
// Recover turns a panic anywhere below it into a 500. Verify reads the body
// once (bounded), checks its signature and hands app the same bytes, with
// [BodyFromContext] and [PrincipalFromContext]. Transaction runs app inside
// one transaction ([TxFromContext]) and holds app's response back until the
// transaction has committed, so a client never sees a success that was
// rolled back.
package middleware
