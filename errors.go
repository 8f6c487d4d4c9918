package courier

import "errors"

// CodeOf returns the code of err: the first Code in its chain, err and
// what it wraps taken depth first, in errors.As's order; "" if none.
//
// An error that is a case of a broader class wraps its precise code
// before the class, so CodeOf gives the precise code and errors.Is holds
// for both: a signature error with an AdCP code, say,
//
//	err := fmt.Errorf("%w: %w", courier.CodeWebhookReplayed, courier.CodeSignatureInvalid)
//
// has code webhook_signature_replayed, and errors.Is(err,
// courier.CodeSignatureInvalid) holds.
func CodeOf(err error) Code {
	var c Code
	if errors.As(err, &c) {
		return c
	}
	return ""
}
