package signature

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/courier-go/courier"
)

// headerAuthorization carries the bearer token.
const headerAuthorization = "Authorization"

// bearerSigner is what NewBearerSigner returns.
type bearerSigner struct {
	token Secret
}

// NewBearerSigner returns a Signer that authenticates requests with a
// bearer token, sent as "Authorization: Bearer <token>". It signs nothing:
// the token proves who sent the request, not what it carries. The signer
// is safe for concurrent use.
func NewBearerSigner(token Secret) (Signer, error) {
	if token.m == nil {
		return nil, configError("NewBearerSigner: the token is not a parsed secret")
	}
	return &bearerSigner{token: token}, nil
}

// Sign sets the Authorization header on req.
func (s *bearerSigner) Sign(req *http.Request, _ Message) error {
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set(headerAuthorization, "Bearer "+string(s.token.m().value))
	return nil
}

// BearerVerifierConfig configures NewBearerVerifier.
type BearerVerifierConfig struct {
	// Sender names who holds these tokens; it is Principal.Sender, the
	// name receivers record its requests under: 1-256 bytes of UTF-8
	// without control characters (NUL, newline, tab, DEL or any other).
	// A Sender that is not such text is a configuration error. Required.
	Sender string
	// Tokens are the accepted tokens; during a rotation hold the old and the
	// new one, under ids of their own (ParseSecret): one id over two
	// secrets is a configuration error, since Principal.KeyID names the one that
	// matched. Required.
	Tokens []Secret
}

// bearerVerifier is what NewBearerVerifier returns.
type bearerVerifier struct {
	sender string
	tokens []Secret
}

// NewBearerVerifier validates cfg and returns a Verifier that checks
// "Authorization: Bearer <token>" against its tokens in constant time: it
// compares SHA-256 digests, so neither the content nor the length of a token
// leaks through timing. The verifier is safe for concurrent use.
//
// A token signs nothing and has no time window: whoever has seen one
// request (a proxy's log, say) can send that request again, or any other,
// as its sender, until the token is rotated out. A receiver answers a
// request sent again from its dedupe record while it keeps the record;
// pruned, the request is processed anew. Prefer a signing scheme where the
// sender has one.
func NewBearerVerifier(cfg BearerVerifierConfig) (Verifier, error) {
	if err := checkSecrets("BearerVerifierConfig", cfg.Sender, "Tokens", cfg.Tokens); err != nil {
		return nil, err
	}
	return &bearerVerifier{sender: cfg.Sender, tokens: append([]Secret(nil), cfg.Tokens...)}, nil
}

// Verify checks req's Authorization header. body is not used.
func (v *bearerVerifier) Verify(_ context.Context, req *http.Request, _ []byte) (Principal, error) {
	h, err := oneHeader(req.Header, headerAuthorization)
	if err != nil {
		return Principal{}, err
	}
	token, ok := parseBearer(h)
	if !ok {
		return Principal{}, reject(courier.CodeSignatureMalformed, "Authorization header is not a bearer token")
	}
	got := sha256.Sum256([]byte(token))
	match := -1
	for i, tok := range v.tokens { // every token is compared, matched or not
		if subtle.ConstantTimeCompare(got[:], tok.m().digest[:]) == 1 && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, reject(courier.CodeSignatureMismatch, "bearer token matches no configured token")
	}
	return Principal{Sender: v.sender, KeyID: v.tokens[match].ID(), Scheme: SchemeBearer}, nil
}

// parseBearer returns the token of an RFC 6750 "Bearer" credential: the
// scheme (case-insensitive), one or more spaces, and a token without spaces.
func parseBearer(h string) (string, bool) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" {
		return "", false
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return "", false
		}
	}
	return token, true
}
