package signature_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier/signature"
)

// TestJWKSetErrorsNameTheSetByHostOnly: a set's URL may carry a
// credential (userinfo, an access token in its query, a capability path),
// and a failed fetch's error is logged by the receiver that answers 503:
// it names the set, and a redirect's target, by scheme and host only.
func TestJWKSetErrorsNameTheSetByHostOnly(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(down.URL, "http://")
	down.Close() // nothing listens there any more: the fetch cannot connect

	redirect := httptest.NewServer(http.RedirectHandler("http://agent.example/s3cr3t-path/jwks.json?sig=s3cr3t-sig", http.StatusFound))
	t.Cleanup(redirect.Close)

	for name, url := range map[string]string{
		"host down":          "http://reader:s3cr3t-pass@" + host + "/s3cr3t-path/jwks.json?access_token=s3cr3t-token",
		"redirected to http": "http://reader:s3cr3t-pass@" + strings.TrimPrefix(redirect.URL, "http://") + "/jwks.json?access_token=s3cr3t-token",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = set.LookupKey(t.Context(), "a")
			if err == nil {
				t.Fatal("lookup succeeded; want the fetch's error")
			}
			for _, secret := range []string{"reader", "s3cr3t"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the fetch's error %q holds %q, of the URL's credentials", err, secret)
				}
			}
		})
	}
}
